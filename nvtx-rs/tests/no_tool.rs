//! With no tool attached (and a bad NVTX_INJECTION64_PATH) every call is a
//! no-op: nothing crashes, guards still drop, domains fall back to default.

#[test]
fn calls_without_a_tool_are_no_ops() {
    // Set before the first NVTX call in this process (the only test here).
    std::env::set_var("NVTX_INJECTION64_PATH", "/nonexistent/libtool.so");
    let d = gpuscope_nvtx::Domain::new("x");
    assert_eq!(d, gpuscope_nvtx::Domain::DEFAULT);
    let _g = gpuscope_nvtx::push("a");
    let _h = d.push("b");
    let s = d.register_string("c");
    let _i = d.push_registered(s);
    gpuscope_nvtx::mark("m");
    gpuscope_nvtx::start_range("r").end();
    gpuscope_nvtx::name_current_thread("t");
    // 256 bytes and more take the allocating path; inner NULs truncate.
    let long = "x".repeat(1000);
    let _j = gpuscope_nvtx::push(&long);
    let _k = gpuscope_nvtx::push("with\0nul");
}
