//! `uncoalesced-access`: global loads or stores that fetch sectors whose
//! bytes the threads do not use.

use super::checklist::{self, Uncoalesced};
use super::{few_sms, FindingKind, Found, Input, Rule};
use crate::analysis::findings::ms;

/// The rule.
pub static RULE: Rule = Rule {
    kind: FindingKind::UncoalescedAccess,
    bound: None,
    reads: "each measured kernel's global load and store sectors and requests, and the share of the fetched bytes \
            its threads asked for (metrics mode, --metrics checklist)",
    when: "a kernel not compute-bound whose global loads or stores (10% of its sectors or more) use at most 60% of \
           the bytes of the sectors they fetch (without that share measured: more than 16 sectors per request), \
           where this is its costliest checklist cause",
    cost: "its GPU time times the share of its global sectors fetched for nothing",
    find,
};

fn find(rule: &Rule, input: &Input) -> Found {
    let out = few_sms::judged(input)
        .filter_map(|k| {
            let (FindingKind::UncoalescedAccess, cost_ns) = checklist::chosen(input, k)? else { return None };
            let u = checklist::uncoalesced(checklist::stats(input, k)?)?;
            let advice = if checklist::vendor_library(&k.name) { LIBRARY_ADVICE } else { ADVICE };
            Some(rule.kernel_finding(k, cost_ns, message(&k.display_name, &u, k.gpu_ns), advice.into()))
        })
        .collect();
    (out, 0)
}

fn message(name: &str, u: &Uncoalesced, gpu_ns: u64) -> String {
    let (what, spr) = (u.what, u.sectors_per_request);
    match u.ideal {
        Some(ideal) => format!(
            "{name}: uncoalesced global {what}: {spr:.1} sectors per request where {ideal:.1} would do ({:.0}% of the \
             fetched bytes used), {} of GPU time",
            u.used_pct,
            ms(gpu_ns)
        ),
        None => format!(
            "{name}: uncoalesced global {what}: {spr:.1} sectors per request, more than the widest access needs (16), \
             {} of GPU time",
            ms(gpu_ns)
        ),
    }
}

const ADVICE: &str = "Make neighbouring threads touch neighbouring addresses: index by threadIdx.x along the \
                      contiguous dimension, transpose through shared memory, or store the data structure-of-arrays.";

/// A library's kernel reads what the program hands it: its layout.
const LIBRARY_ADVICE: &str = "The library reads its operands strided as the program lays them out: pass contiguous \
                              tensors (.contiguous()), channels_last for convolutions, or the transpose flags \
                              instead of transposed copies.";
