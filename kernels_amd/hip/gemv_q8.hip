// Decode GEMVs over raw GGUF blocks against q8 activations: y[t][n] = sum_k W[n][k] x[t][k].
// One wave per output row: lane l takes the row's 32-value groups l, l+WAVE, ... (consecutive lanes read
// consecutive bytes of the row, with nontemporal loads), int8 dot4 per word, then a butterfly wave sum.
#include "kernels_amd/hip/amd.h"
#include "kernels_amd/hip/quant_formats.h"

template <class Format>
inline void gemv_q8(const GemvQ8Args& a) {
    uint32_t row = group_id_x() * GEMV_WAVES + wave_id(), token = group_id_y();
    bool row_valid = row < a.n_out;
    row = min_u32(row, a.n_out - 1);  // spare waves of the last work-group compute row n_out-1 and drop it
    float acc = 0.0f;
    for (uint32_t group = lane_id(); group < a.n_in / Q8_GROUP; group += WAVE)
        acc += Format::group_dot(a.w, row, a.n_in, group, load_q8_group(a, token, group));
    acc = wave_sum(acc);
    if (row_valid && lane_id() == 0) a.y[static_cast<uint64_t>(token) * a.n_out + row] = acc;
}

AMD_KERNEL(gemv_q4_k_q8, GemvQ8Args, GEMV_WAVES) { gemv_q8<FormatQ4K>(args); }
AMD_KERNEL(gemv_q5_k_q8, GemvQ8Args, GEMV_WAVES) { gemv_q8<FormatQ5K>(args); }
AMD_KERNEL(gemv_q6_k_q8, GemvQ8Args, GEMV_WAVES) { gemv_q8<FormatQ6K>(args); }
AMD_KERNEL(gemv_iq4_xs_q8, GemvQ8Args, GEMV_WAVES) { gemv_q8<FormatIQ4XS>(args); }
AMD_KERNEL(gemv_q8_0_q8, GemvQ8Args, GEMV_WAVES) { gemv_q8<FormatQ80>(args); }
AMD_KERNEL(gemv_q4_0_q8, GemvQ8Args, GEMV_WAVES) { gemv_q8<FormatQ40>(args); }
