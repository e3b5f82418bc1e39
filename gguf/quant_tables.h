// The lattice and value tables of ggml's IQ and FP4 formats, generated into gguf/quant_tables.cpp
// by scripts/gen_quant_tables.py. Grid entries pack 8 (u64) or 4 (u32) bytes, byte i = element i.
#pragma once

#include <cstdint>

namespace gguf::tables {

extern const uint8_t kmask_iq2xs[8];      // 1 << j
extern const uint8_t ksigns_iq2xs[128];   // 7 sign bits + parity bit: bit j set negates element j
extern const int8_t kvalues_iq4nl[16];    // the non-linear 4-bit codebook of iq4_nl / iq4_xs
extern const int8_t kvalues_fp4[16];      // E2M1 values ×2 (mxfp4, nvfp4)
extern const uint64_t iq2xxs_grid[256];
extern const uint64_t iq2xs_grid[512];
extern const uint64_t iq2s_grid[1024];
extern const uint64_t iq1s_grid[2048];    // bytes are int8 in {-1, 0, 1}
extern const uint32_t iq3xxs_grid[256];
extern const uint32_t iq3s_grid[512];

}  // namespace gguf::tables
