//! With no tool attached (and a bad NVTX_INJECTION64_PATH) every call is a
//! no-op: nothing crashes, guards still drop, domains fall back to default.

#[test]
fn calls_without_a_tool_are_no_ops() {
    // Set before the first NVTX call in this process (the only test here).
    std::env::set_var("NVTX_INJECTION64_PATH", "/nonexistent/libtool.so");
    let d = nvtx_rs::Domain::new("x");
    assert_eq!(d, nvtx_rs::Domain::DEFAULT);
    let _g = nvtx_rs::push("a");
    let _h = d.push("b");
    let s = d.register_string("c");
    let _i = d.push_registered(s);
    nvtx_rs::mark("m");
    nvtx_rs::start_range("r").end();
    nvtx_rs::name_current_thread("t");
    // 256 bytes and more take the allocating path; inner NULs truncate.
    let long = "x".repeat(1000);
    let _j = nvtx_rs::push(&long);
    let _k = nvtx_rs::push("with\0nul");
}
