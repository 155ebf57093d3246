/* Prints what the preload shim armed, then exits 7. With an argument, also
 * dlopens libgpuscope.so and calls InitializeInjection as the CUDA driver
 * would. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char** argv) {
    const char* cuda = getenv("CUDA_INJECTION64_PATH");
    const char* nvtx = getenv("NVTX_INJECTION64_PATH");
    printf("cuda=%s\nnvtx=%s\n", cuda ? cuda : "(unset)", nvtx ? nvtx : "(unset)");
    if (argc > 1) {
        void* lib = dlopen(argv[1], RTLD_NOW);
        if (!lib) { printf("dlopen failed: %s\n", dlerror()); return 2; }
        int (*init)(void) = (int (*)(void))dlsym(lib, "InitializeInjection");
        printf("InitializeInjection -> %d\n", init ? init() : -1);
        printf("again -> %d\n", init ? init() : -1);
    }
    return 7;
}
