// gpuscope from C++, with an RAII range guard.
// Build: c++ -I ffi/include examples/cpp/main.cpp -L target/release -Wl,-rpath,$PWD/target/release -lgpuscope
#include <cstdio>
#include <string>
#include "gpuscope.h"

namespace gpuscope {
// Pushes an NVTX range for the guard's lifetime (same thread).
class Range {
public:
    explicit Range(const char* name) { gpuscope_range_push(name); }
    ~Range() { gpuscope_range_pop(); }
    Range(const Range&) = delete;
    Range& operator=(const Range&) = delete;
};
}  // namespace gpuscope

int main() {
    gpuscope_config cfg;
    gpuscope_config_init(&cfg);
    cfg.mode = GPUSCOPE_MODE_METRICS;
    cfg.metrics = "dram";
    cfg.launch_count = 2;

    const int rc = gpuscope_start(&cfg);
    if (rc != GPUSCOPE_OK) {
        std::printf("gpuscope: %s (%d): %s\n", rc == GPUSCOPE_ERR_NO_GPU ? "no GPU" : "not profiling", rc,
                    gpuscope_last_error());
    }
    {
        gpuscope::Range step("step");
        gpuscope::Range inner("forward");
        // ... launch CUDA kernels here ...
    }
    if (rc == GPUSCOPE_OK && gpuscope_stop() == GPUSCOPE_OK) {
        gpuscope_write_report("gpuscope-cpp.csv", GPUSCOPE_FORMAT_CSV);
    }
    // A misuse reports a status, it does not crash.
    const int bad = gpuscope_write_report(nullptr, GPUSCOPE_FORMAT_JSON);
    std::printf("bad call -> %d: %s\n", bad, gpuscope_last_error());
    std::printf("done\n");
    return 0;
}
