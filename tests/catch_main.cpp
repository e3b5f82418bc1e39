// The one Catch2 main shared by all test executables. Compiled kernels are kept inside the build folder
// (the default, ~/.cache/tinyllm/kernels, is outside the clone), for the test and the binaries it runs.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <cstdlib>

int main(int argc, char* argv[]) {
    ::setenv("TINYLLM_KERNEL_CACHE", TINYLLM_BINARY_DIR "/kernel-cache", 0);
    return Catch::Session().run(argc, argv);
}
