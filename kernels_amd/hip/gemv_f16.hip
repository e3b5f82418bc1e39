// fp16 GEMV for small dense heads (e.g. the GatedDeltaNet beta/alpha rows): one wave per output row,
// each lane 8 halves (one 16-byte nontemporal load) per step, fp32 accumulation, butterfly wave sum.
#include "kernels_amd/hip/amd.h"

AMD_KERNEL(gemv_f16, GemvF16Args, GEMV_WAVES) {
    const GemvF16Args& a = args;
    uint32_t row = group_id_x() * GEMV_WAVES + wave_id(), token = group_id_y();
    bool row_valid = row < a.n_out;
    row = min_u32(row, a.n_out - 1);
    const uint32_t* w = reinterpret_cast<const uint32_t*>(a.w + static_cast<uint64_t>(row) * a.n_in);
    const float* x = a.x + static_cast<uint64_t>(token) * a.n_in;
    float acc = 0.0f;
    for (uint32_t k = lane_id() * 8; k < a.n_in; k += WAVE * 8) {
        u32x4 wv = load4_nt(w + k / 2);
        f32x4 x0 = load4(x + k), x1 = load4(x + k + 4);
        for (uint32_t i = 0; i < 4; i++) {
            acc = __builtin_fmaf(half_lo(wv[i]), i < 2 ? x0[2 * i] : x1[2 * i - 4], acc);
            acc = __builtin_fmaf(half_hi(wv[i]), i < 2 ? x0[2 * i + 1] : x1[2 * i - 3], acc);
        }
    }
    acc = wave_sum(acc);
    if (row_valid && lane_id() == 0) a.y[static_cast<uint64_t>(token) * a.n_out + row] = acc;
}
