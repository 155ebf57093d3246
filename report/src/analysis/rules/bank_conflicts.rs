//! `bank-conflicts`: shared-memory accesses serialised by bank conflicts.

use super::{checklist, few_sms, FindingKind, Found, Input, Rule};
use crate::analysis::findings::ms;

/// The rule.
pub static RULE: Rule = Rule {
    kind: FindingKind::BankConflicts,
    bound: None,
    reads: "each measured kernel's shared-memory requests, wavefronts and bank conflicts (metrics mode, --metrics \
            checklist)",
    when: "a kernel of the program's own whose shared loads or stores average one bank conflict or more per \
           request, conflicts being at least 25% of the wavefronts, where this is its costliest checklist cause",
    cost: "its GPU time times the conflicts' share of the wavefronts",
    find,
};

fn find(rule: &Rule, input: &Input) -> Found {
    let out = few_sms::judged(input)
        .filter_map(|k| {
            let (FindingKind::BankConflicts, cost_ns) = checklist::chosen(input, k)? else { return None };
            let c = checklist::conflicted(k, checklist::stats(input, k)?)?;
            Some(rule.kernel_finding(
                k,
                cost_ns,
                format!(
                    "{}: shared-memory {} with {:.1}-way bank conflicts ({:.0}% of the wavefronts are conflicts), \
                         {} of GPU time",
                    k.display_name,
                    c.what,
                    c.ways,
                    c.conflict_pct,
                    ms(k.gpu_ns)
                ),
                ADVICE.into(),
            ))
        })
        .collect();
    (out, 0)
}

const ADVICE: &str = "Spread a warp's accesses over the 32 banks: pad shared arrays by one element per row \
                      (tile[32][33]), or swizzle the index, so a column's elements fall in different banks.";
