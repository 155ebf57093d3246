//! Which frameworks' libraries the process has loaded: what names a
//! framework when no kernel record does (trace windows of 0), so advice is
//! in its terms.

use std::io::BufRead;

/// Parts of a mapped library's path, and the framework each means.
const FRAMEWORK_LIBRARIES: [(&str, &str); 6] = [
    ("libtorch_cuda", "torch"),
    // Loaded by torch.compile, but also by libraries that may compile
    // (transformers imports it for eager models too): no sign of compiling.
    ("libtriton", "triton"),
    ("xla_extension", "jax"),
    ("jaxlib", "jax"),
    ("libtensorflow", "tensorflow"),
    ("cupy_backends", "cupy"),
];

/// Lines of `/proc/self/maps` read at most (a process maps a few thousand).
const MAX_LINES: usize = 1 << 16;

/// The frameworks whose libraries `maps` (the text of `/proc/self/maps`)
/// holds, sorted, each once.
pub(crate) fn frameworks_in(maps: impl BufRead) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for line in maps.lines().take(MAX_LINES).map_while(Result::ok) {
        for (part, name) in FRAMEWORK_LIBRARIES {
            if line.contains(part) && !out.iter().any(|n| n == name) {
                out.push(name.to_string());
            }
        }
    }
    out.sort();
    out
}

/// The frameworks whose libraries this process has loaded (none where
/// `/proc` cannot be read).
pub(crate) fn frameworks_loaded() -> Vec<String> {
    match std::fs::File::open("/proc/self/maps") {
        Ok(f) => frameworks_in(std::io::BufReader::new(f)),
        Err(_) => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frameworks_are_named_by_the_libraries_mapped() {
        let maps = "7f00-7f10 r-xp 0 08:01 1 /venv/lib/python3.12/site-packages/torch/lib/libtorch_cuda.so\n\
                    7f10-7f20 r-xp 0 08:01 2 /venv/lib/python3.12/site-packages/torch/lib/libtorch_cuda.so\n\
                    7f20-7f30 r-xp 0 08:01 3 /venv/lib/python3.12/site-packages/jaxlib/xla_extension.so\n\
                    7f30-7f40 r-xp 0 08:01 4 /usr/lib/x86_64-linux-gnu/libc.so.6\n\
                    7f40-7f50 r-xp 0 08:01 5 /venv/lib/python3.12/site-packages/triton/_C/libtriton.so\n";
        assert_eq!(frameworks_in(maps.as_bytes()), ["jax", "torch", "triton"]);
        assert!(frameworks_in("".as_bytes()).is_empty());
    }
}
