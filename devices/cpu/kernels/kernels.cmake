# The hand kernels' instruction-set variants (files *_avx512.cpp, *_avx2.cpp get their -m flags; the
# rest is baseline x86-64) and their benchmark. Included from devices/CMakeLists.txt.
file(GLOB tinyllm_kernels_avx512 CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/cpu/kernels/*_avx512.cpp)
file(GLOB tinyllm_kernels_avx2 CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/cpu/kernels/*_avx2.cpp)
# GCC 12's own intrinsics headers trip -Wuninitialized (their _mm512_undefined_* self-initialize).
set(tinyllm_simd_no_false_warnings $<$<CXX_COMPILER_ID:GNU>:-Wno-uninitialized;-Wno-maybe-uninitialized>)
set_source_files_properties(${tinyllm_kernels_avx512} PROPERTIES COMPILE_OPTIONS
  "-mavx512f;-mavx512bw;-mavx512vl;-mavx512dq;-mavx512vnni;-mavx512bf16;-mavx2;-mfma;-mf16c;${tinyllm_simd_no_false_warnings}")
# AMX tiles (gemm_amx.cpp) build on the AVX-512 variant; they run only where amx_active() says so.
set_source_files_properties(${CMAKE_CURRENT_SOURCE_DIR}/cpu/kernels/gemm_amx.cpp PROPERTIES COMPILE_OPTIONS
  "-mavx512f;-mavx512bw;-mavx512vl;-mavx512dq;-mavx512vnni;-mavx512bf16;-mavx2;-mfma;-mf16c;-mamx-tile;-mamx-int8;-mamx-bf16;${tinyllm_simd_no_false_warnings}")
set_source_files_properties(${tinyllm_kernels_avx2} PROPERTIES COMPILE_OPTIONS
  "-mavx2;-mfma;-mf16c;${tinyllm_simd_no_false_warnings}")

# Not a test: prints GB/s and GFLOP/s per weight type (see its --help).
add_executable(bench_cpu_kernels ${CMAKE_CURRENT_SOURCE_DIR}/cpu/kernels/bench/bench_cpu_kernels.cpp)
target_link_libraries(bench_cpu_kernels PRIVATE tinyllm_devices)
