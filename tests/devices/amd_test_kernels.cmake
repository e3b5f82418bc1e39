# The AMD device tests dispatch real gfx1100 code objects: amd_test_kernels.hip, compiled with clang-19
# (flags from notes/amd-toolchain.md) into the build tree, its path handed to test_devices. Built even
# with TINYLLM_AMD=OFF: the backend is always compiled, and clang-19 is a build dependency anyway.
if(NOT TARGET test_devices)
  return()
endif()
find_program(TINYLLM_CLANG19 clang++-19 REQUIRED)
set(src ${CMAKE_CURRENT_LIST_DIR}/amd_test_kernels.hip)
set(out ${CMAKE_CURRENT_BINARY_DIR}/amd_test_kernels.gfx1100.hsaco)
add_custom_command(OUTPUT ${out}
  COMMAND ${TINYLLM_CLANG19} -B/usr/lib/llvm-19/bin -x hip --offload-arch=gfx1100 -mcumode -nogpulib -nogpuinc
          --cuda-device-only --no-gpu-bundle-output -O3 -c ${src} -o ${out}
  DEPENDS ${src} COMMENT "Compiling the AMD test kernels for gfx1100" VERBATIM)
add_custom_target(amd_test_code_objects DEPENDS ${out})
add_dependencies(test_devices amd_test_code_objects)
target_compile_definitions(test_devices PRIVATE TINYLLM_AMD_TEST_KERNELS="${out}")
