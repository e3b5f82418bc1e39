// Prefill GEMMs on the matrix cores: y[t][n] = sum_k W[n][k] x[t][k], x fp16, W dequantized to fp16 as it
// is loaded, fp32 accumulation in v_wmma_f32_16x16x16_f16 (gfx11/12) or v_mfma_f32_16x16x16f16 (CDNA).
// A work-group computes a 64x64 tile; each of its 4 waves a 32x32 quarter as 2x2 matrix-op tiles.
#include "kernels_amd/hip/amd.h"
#include "kernels_amd/hip/quant_formats.h"

typedef _Float16 mma_ab_load_t __attribute__((vector_size(2 * MMA_K_PER_LANE), aligned(4)));

template <class Format>
inline void gemm(const GemmArgs& a) {
    uint32_t lane = lane_id(), wave = wave_id(), col = lane % 16;
    uint32_t token0 = group_id_y() * GEMM_TILE + (wave / 2) * 32;
    uint32_t out0 = group_id_x() * GEMM_TILE + (wave % 2) * 32;
    // Rows this lane feeds into A (tokens) and B (outputs); past the edge they repeat the last row.
    const uint16_t* x_rows[2];
    uint32_t w_rows[2];
    for (uint32_t i = 0; i < 2; i++) {
        x_rows[i] = a.x + static_cast<uint64_t>(min_u32(token0 + 16 * i + col, a.n_tokens - 1)) * a.n_in;
        w_rows[i] = min_u32(out0 + 16 * i + col, a.n_out - 1);
    }
    mma_acc_t acc[2][2] = {};
    for (uint32_t k0 = 0; k0 < a.n_in; k0 += 16) {
        uint32_t k = k0 + mma_k(lane, 0);
        mma_ab_t x_frag[2], w_frag[2];
        for (uint32_t i = 0; i < 2; i++) {
            x_frag[i] = *reinterpret_cast<const mma_ab_load_t*>(x_rows[i] + k);
            _Float16 w_values[MMA_K_PER_LANE];
            Format::template dequant<MMA_K_PER_LANE>(a.w, w_rows[i], a.n_in, k, w_values);
            for (uint32_t e = 0; e < MMA_K_PER_LANE; e++) w_frag[i][e] = w_values[e];
        }
        for (uint32_t t = 0; t < 2; t++)
            for (uint32_t o = 0; o < 2; o++) acc[t][o] = mma_f16(x_frag[t], w_frag[o], acc[t][o]);
    }
    for (uint32_t t = 0; t < 2; t++)
        for (uint32_t o = 0; o < 2; o++)
            for (uint32_t v = 0; v < MMA_ACC_PER_LANE; v++) {
                uint32_t token = token0 + 16 * t + mma_acc_row(lane, v), out = out0 + 16 * o + col;
                if (token < a.n_tokens && out < a.n_out) a.y[static_cast<uint64_t>(token) * a.n_out + out] = acc[t][o][v];
            }
}

AMD_KERNEL(gemm_f16, GemmArgs, GEMM_WAVES) { gemm<FormatF16>(args); }
AMD_KERNEL(gemm_q4_k, GemmArgs, GEMM_WAVES) { gemm<FormatQ4K>(args); }
AMD_KERNEL(gemm_q5_k, GemmArgs, GEMM_WAVES) { gemm<FormatQ5K>(args); }
AMD_KERNEL(gemm_q6_k, GemmArgs, GEMM_WAVES) { gemm<FormatQ6K>(args); }
AMD_KERNEL(gemm_iq4_xs, GemmArgs, GEMM_WAVES) { gemm<FormatIQ4XS>(args); }
AMD_KERNEL(gemm_q8_0, GemmArgs, GEMM_WAVES) { gemm<FormatQ80>(args); }
AMD_KERNEL(gemm_q4_0, GemmArgs, GEMM_WAVES) { gemm<FormatQ40>(args); }
