// Activation quantization for the decode GEMVs: per 32 values an f32 scale (max|x| / 127), int8 values
// rounded to nearest even, and the sums of each 16 int8 values (the K-quant mins and the Q4_0/Q6_K offsets
// need them). Each work-item packs 4 values into one word; 8 lanes share a group and reduce by swizzle.
#include "kernels_amd/hip/amd.h"

AMD_KERNEL(q8_quantize, Q8QuantizeArgs, Q8_QUANTIZE_WAVES) {
    const Q8QuantizeArgs& a = args;
    uint64_t total = static_cast<uint64_t>(a.n_tokens) * (a.n_in / 4);
    uint64_t word = static_cast<uint64_t>(group_id_x()) * (Q8_QUANTIZE_WAVES * WAVE) + thread_id();
    bool valid = word < total;  // whole 8-lane groups are valid or not, as n_in % 32 == 0
    if (!valid) word = total - 1;
    f32x4 x = load4(a.x + word * 4);
    float amax = __builtin_fmaxf(__builtin_fmaxf(__builtin_fabsf(x[0]), __builtin_fabsf(x[1])),
                                 __builtin_fmaxf(__builtin_fabsf(x[2]), __builtin_fabsf(x[3])));
    amax = group_reduce<8>(amax, OpMax{});
    float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
    uint32_t packed = 0;
    int32_t sum = 0;
    for (uint32_t i = 0; i < 4; i++) {
        int32_t q = static_cast<int32_t>(__builtin_rintf(x[i] * id));
        packed |= (static_cast<uint32_t>(q) & 0xff) << (8 * i);
        sum += q;
    }
    sum = group_reduce<4>(sum, OpAdd{});
    if (!valid) return;
    a.xq[word] = packed;
    if (lane_id() % 8 == 0) a.xscale[word / 8] = d;
    if (lane_id() % 4 == 0) a.xsum[word / 4] = static_cast<float>(sum);
}
