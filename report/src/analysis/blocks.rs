//! Repeated blocks summed: sibling ranges named `NAME.N` or `N` (a
//! model's decoder layers in a ModuleList, blocks in a Sequential, as
//! PyTorch's automatic ranges name them) taken together, and the ranges
//! inside them by name across the blocks (every layer's attention, every
//! layer's MLP), so the cost of a kind of block and of a part of it reads
//! as one figure.

use super::RangeAnalysis;
use rustc_hash::FxHashMap as HashMap;
use serde::Serialize;

/// One group of repeated ranges.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[non_exhaustive]
pub struct BlockGroup {
    /// The members' path with each index that varies written as its range
    /// (`step/forward/model/layers.0-7/mlp`).
    pub path: String,
    /// Its ranges.
    pub members: usize,
    /// Their wall time per call together (each member's mean over its
    /// calls after warm-up, summed: members may have had different
    /// numbers of warm-up calls), ns.
    pub wall_ns: u64,
    /// Share of the wall time per call of the range around them, %
    /// (`None`: that range is not in the report).
    pub share_of_parent_pct: Option<f64>,
    /// Kernel time launched in them, ns.
    pub kernel_ns: u64,
    /// SM efficiency weighted by kernel time over the members with it.
    pub sm_efficiency_pct: Option<f64>,
    /// The member with the most wall time per call, from the first frame
    /// where the members differ (`layers.5/mlp`), and that time.
    pub slowest: (String, u64),
    /// The median member's wall time per call, ns.
    pub median_wall_ns: u64,
}

fn is_index(s: &str) -> bool {
    !s.is_empty() && s.len() <= 9 && s.bytes().all(|b| b.is_ascii_digit())
}

/// `path` with every `NAME.N` frame written `NAME.*` and every `N` frame
/// `*`; `None` when it has no such frame.
fn generic(path: &str) -> Option<String> {
    let mut any = false;
    let frames: Vec<String> = path
        .split('/')
        .map(|f| match f.rsplit_once('.') {
            Some((name, n)) if !name.is_empty() && is_index(n) => {
                any = true;
                format!("{name}.*")
            }
            _ if is_index(f) => {
                any = true;
                "*".to_string()
            }
            _ => f.to_string(),
        })
        .collect();
    any.then(|| frames.join("/"))
}

/// At most this many indices are listed when they are not consecutive.
const MAX_LISTED: usize = 6;

/// What a group needs of one range.
struct Member<'a> {
    path: &'a str,
    wall_ns: u64,
    kernel_ns: u64,
    sm_efficiency_pct: Option<f64>,
}

/// `generic` with each `*` written as the members' indices at that frame:
/// `0-7`, or the indices listed when they are not consecutive.
fn name(members: &[Member<'_>], generic: &str) -> String {
    let frames: Vec<String> = generic
        .split('/')
        .enumerate()
        .map(|(pos, f)| {
            let stem = match f.strip_suffix(".*") {
                Some(stem) => format!("{stem}."),
                None if f == "*" => String::new(),
                None => return f.to_string(),
            };
            let mut idx: Vec<u64> = members
                .iter()
                .filter_map(|g| {
                    let frame = g.path.split('/').nth(pos)?;
                    frame.rsplit_once('.').map_or(frame, |(_, n)| n).parse().ok()
                })
                .collect();
            idx.sort_unstable();
            idx.dedup();
            let list = match (idx.first(), idx.last()) {
                (Some(a), Some(b)) if (b - a) as usize + 1 == idx.len() && a != b => format!("{a}-{b}"),
                _ if idx.len() > MAX_LISTED => {
                    let head: Vec<String> = idx[..MAX_LISTED].iter().map(|i| i.to_string()).collect();
                    format!("{},...({} in all)", head.join(","), idx.len())
                }
                _ => idx.iter().map(|i| i.to_string()).collect::<Vec<_>>().join(","),
            };
            format!("{stem}{list}")
        })
        .collect();
    frames.join("/")
}

/// The groups of repeated ranges among `ranges` (library ranges left out),
/// in path order. Linear in the number of ranges.
pub fn groups(ranges: &[RangeAnalysis]) -> Vec<BlockGroup> {
    group(ranges.iter().filter(|g| g.library.is_none()).map(|g| Member {
        path: &g.path,
        wall_ns: g.wall_ns / g.count.max(1),
        kernel_ns: g.kernel_ns,
        sm_efficiency_pct: g.sm_efficiency_pct,
    }))
}

fn group<'a>(ranges: impl Iterator<Item = Member<'a>>) -> Vec<BlockGroup> {
    let mut by: HashMap<String, Vec<Member<'a>>> = HashMap::default();
    let mut wall: HashMap<&str, u64> = HashMap::default();
    for g in ranges {
        wall.insert(g.path, g.wall_ns);
        if let Some(k) = generic(g.path) {
            by.entry(k).or_default().push(g);
        }
    }
    let summed: HashMap<&str, u64> = by.iter().map(|(k, m)| (k.as_str(), m.iter().map(|g| g.wall_ns).sum())).collect();
    let mut out: Vec<BlockGroup> = by
        .iter()
        .filter(|(_, m)| m.len() >= 2)
        .map(|(k, m)| {
            let wall_ns: u64 = m.iter().map(|g| g.wall_ns).sum();
            let kernel_ns: u64 = m.iter().map(|g| g.kernel_ns).sum();
            let (mut w, mut x) = (0.0, 0.0);
            for g in m {
                if let Some(s) = g.sm_efficiency_pct {
                    w += g.kernel_ns as f64;
                    x += s * g.kernel_ns as f64;
                }
            }
            let parent = k.rsplit_once('/').map(|(p, _)| p);
            let parent_wall = parent.and_then(|p| wall.get(p).or_else(|| summed.get(p)).copied());
            let slowest = m.iter().max_by_key(|g| (g.wall_ns, std::cmp::Reverse(g.path))).expect("two or more");
            let mut walls: Vec<u64> = m.iter().map(|g| g.wall_ns).collect();
            walls.sort_unstable();
            BlockGroup {
                path: name(m, k),
                members: m.len(),
                wall_ns,
                share_of_parent_pct: parent_wall.filter(|&p| p > 0).map(|p| 100.0 * wall_ns as f64 / p as f64),
                kernel_ns,
                sm_efficiency_pct: (w > 0.0).then(|| x / w),
                slowest: (
                    slowest
                        .path
                        .split('/')
                        .skip(k.split('/').take_while(|f| !f.ends_with('*')).count())
                        .collect::<Vec<_>>()
                        .join("/"),
                    slowest.wall_ns,
                ),
                median_wall_ns: walls[walls.len() / 2],
            }
        })
        .collect();
    out.sort_by(|a, b| a.path.cmp(&b.path));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(path: &str, wall_ns: u64, sm: Option<f64>) -> Member<'_> {
        Member { path, wall_ns, kernel_ns: wall_ns / 2, sm_efficiency_pct: sm }
    }

    #[test]
    fn decoder_layers_and_their_parts_are_summed_across_the_layers() {
        let mut v = vec![m("step/forward/model", 1000, None)];
        for i in 0..4 {
            let (a, b) = (format!("step/forward/model/layers.{i}"), format!("step/forward/model/layers.{i}/mlp"));
            v.push(Member {
                path: Box::leak(a.into_boxed_str()),
                wall_ns: 200 + i,
                kernel_ns: 100,
                sm_efficiency_pct: Some(50.0 + 10.0 * i as f64),
            });
            v.push(m(Box::leak(b.into_boxed_str()), 80, None));
        }
        v.push(m("step/forward/lm_head", 100, None));
        let g = group(v.into_iter());
        assert_eq!(g.len(), 2);
        let layers = &g[0];
        assert_eq!(layers.path, "step/forward/model/layers.0-3");
        assert_eq!((layers.members, layers.wall_ns, layers.kernel_ns), (4, 806, 400));
        assert!((layers.share_of_parent_pct.unwrap() - 80.6).abs() < 1e-9);
        assert_eq!(layers.sm_efficiency_pct, Some(65.0), "weighted by kernel time");
        assert_eq!(layers.slowest, ("layers.3".to_string(), 203));
        let mlp = &g[1];
        assert_eq!(mlp.path, "step/forward/model/layers.0-3/mlp");
        assert_eq!(mlp.wall_ns, 320);
        // Its parent is the layers' group: 320 of 806.
        assert!((mlp.share_of_parent_pct.unwrap() - 100.0 * 320.0 / 806.0).abs() < 1e-9);
        assert_eq!(mlp.sm_efficiency_pct, None);
        assert_eq!(mlp.slowest.0, "layers.0/mlp", "ties: the first");
    }

    #[test]
    fn sequential_blocks_and_long_lists_of_indices() {
        let g = group([m("net/blocks/0/conv", 5, None), m("net/blocks/1/conv", 7, None)].into_iter());
        assert_eq!(g[0].path, "net/blocks/0-1/conv");
        assert_eq!(g[0].slowest.0, "1/conv");
        let paths: Vec<String> = (0..20).map(|i| format!("r.{}", i * 3)).collect();
        let g = group(paths.iter().map(|p| m(p, 1, None)));
        assert_eq!(g[0].path, "r.0,3,6,9,12,15,...(20 in all)");
    }

    #[test]
    fn a_single_indexed_range_or_a_version_number_is_no_group() {
        let g = group([m("a/layers.0", 5, None), m("v1.2", 1, None), m("v1.3x", 1, None)].into_iter());
        assert!(g.is_empty(), "{g:?}");
        assert_eq!(generic("a/b.10/c"), Some("a/b.*/c".into()));
        assert_eq!(generic("a/.5/c.x"), None);
        let g = group([m("s/b.1", 5, None), m("s/b.3", 7, None)].into_iter());
        assert_eq!(g[0].path, "s/b.1,3");
        assert_eq!(g[0].share_of_parent_pct, None, "no range around them");
    }
}
