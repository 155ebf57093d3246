//! Kernel names as people read them.

/// Demangles an Itanium C++ name; other names pass through.
pub fn demangle(name: &str) -> String {
    if name.starts_with("_Z") {
        if let Ok(sym) = cpp_demangle::Symbol::new(name) {
            if let Ok(s) = sym.demangle(&cpp_demangle::DemangleOptions::default()) {
                return s;
            }
        }
    }
    name.to_string()
}

/// A kernel's name without return type and parameter list:
/// `void matmul_tiled<16>(float const*, ...)` -> `matmul_tiled<16>`.
pub fn short_name(name: &str) -> &str {
    let mut s = name;
    // Cut the parameter list: the last top-level '(' ... ')'.
    if s.ends_with(')') {
        let mut depth = 0i32;
        for (i, c) in s.char_indices().rev() {
            match c {
                ')' => depth += 1,
                '(' => {
                    depth -= 1;
                    if depth == 0 {
                        s = &s[..i];
                        break;
                    }
                }
                _ => {}
            }
        }
    }
    // Drop a return type: the text before the last top-level space.
    let mut depth = 0i32;
    let mut cut = 0;
    for (i, c) in s.char_indices() {
        match c {
            '<' | '(' => depth += 1,
            '>' | ')' => depth -= 1,
            ' ' if depth == 0 => cut = i + 1,
            _ => {}
        }
    }
    &s[cut..]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_names_drop_return_type_and_parameters() {
        assert_eq!(short_name("void matmul_tiled<16>(float const*, float const*, float*, int)"), "matmul_tiled<16>");
        assert_eq!(short_name("vector_add"), "vector_add");
        assert_eq!(short_name("void at::native::f<(int)4, float>(int, float)"), "at::native::f<(int)4, float>");
    }
}
