/* gpuscope from C: profile a region, write the report.
 * Build (from the repository, after cargo build --release -p gpuscope-ffi):
 *   cc -I ffi/include examples/c/main.c -L target/release -Wl,-rpath,$PWD/target/release -lgpuscope
 * The rpath lets the program find libgpuscope.so where it was built (or
 * install the library where the loader looks, or set LD_LIBRARY_PATH). */
#include <stdio.h>
#include "gpuscope.h"

int main(void) {
    gpuscope_config cfg;
    gpuscope_config_init(&cfg);
    cfg.keep_trace = 10000;

    int rc = gpuscope_start(&cfg);
    if (rc == GPUSCOPE_ERR_NO_GPU) {
        /* No driver, GPU or CUPTI: the program goes on unprofiled. */
        printf("gpuscope: no GPU (%s)\n", gpuscope_last_error());
    } else if (rc != GPUSCOPE_OK) {
        printf("gpuscope: start failed (%d): %s\n", rc, gpuscope_last_error());
    }

    /* What one call of "work" does: the report then gives its model FLOPs
     * utilisation and tokens per second. Works with or without a GPU. */
    if (gpuscope_declare_flops("work", 1.2e12) != GPUSCOPE_OK ||
        gpuscope_declare_work("work", 4096, "tokens") != GPUSCOPE_OK) {
        printf("gpuscope: %s\n", gpuscope_last_error());
    }
    int bad = gpuscope_declare_flops("work", -1.0); /* rejected, with why */
    printf("bad declaration -> %d: %s\n", bad, gpuscope_last_error());

    gpuscope_range_push("work");
    /* ... launch CUDA kernels here ... */
    gpuscope_range_pop();

    if (rc == GPUSCOPE_OK) {
        if (gpuscope_stop() == GPUSCOPE_OK &&
            gpuscope_write_report("gpuscope-c.json", GPUSCOPE_FORMAT_JSON) == GPUSCOPE_OK) {
            printf("gpuscope %s: report written to gpuscope-c.json\n", gpuscope_version());
        } else {
            printf("gpuscope: %s\n", gpuscope_last_error());
        }
    }
    printf("done\n");
    return 0;
}
