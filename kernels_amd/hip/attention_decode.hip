// Flash-attention decode over the fp16 KV cache, split in two kernels. The partial kernel gives each
// work-group one chunk of ATTN_CHUNK keys of one KV head and all its query heads (GQA): each wave scores
// its keys (lane = D/WAVE dims, butterfly sum), keeps a local softmax, and the waves merge through LDS
// (fp16 accumulators). The combine kernel merges the chunks. Scores are in log2 units (exp2 is native).
// Paged, the same kernels serve a mixed batch: each query token reads its own sequence's keys through
// the block table (kernargs.h).
#include "kernels_amd/hip/amd.h"

constexpr float LOG2E = 1.44269504088896340736f;
constexpr uint32_t KEYS_PER_WAVE = ATTN_CHUNK / ATTN_WAVES;
constexpr uint32_t HEADS_PER_PASS = 8;  // query heads whose wave results share the LDS at a time

// N consecutive fp16 values from a 4-byte aligned address (N = 1 only for D=64 on wave64).
template <uint32_t N>
inline void load_f16(const uint16_t* p, float* out) {
    if constexpr (N == 1) {
        out[0] = half_to_float(*p);
    } else {
        const uint32_t* words = reinterpret_cast<const uint32_t*>(p);
        for (uint32_t i = 0; i < N / 2; i++) {
            uint32_t w = words[i];
            out[2 * i] = half_lo(w);
            out[2 * i + 1] = half_hi(w);
        }
    }
}

template <uint32_t D>
inline void attn_decode_partial(const AttnDecodeArgs& a) {
    // Each lane holds DPL contiguous dims; a head smaller than the wave leaves lanes D.. idle: they read
    // a valid dim with a zero query (adding nothing to the score) and store nothing.
    constexpr uint32_t DPL = D >= WAVE ? D / WAVE : 1, LANES = D >= WAVE ? WAVE : D;
    AMD_LDS(_Float16, acc_lds, ATTN_WAVES * HEADS_PER_PASS * D);  // (wave, head, D)
    AMD_LDS(float, stat_lds, ATTN_WAVES * HEADS_PER_PASS * 2);     // (wave, head, {max, sum})
    const float inf = __builtin_inff();
    const bool paged = a.block_table != nullptr;
    uint32_t chunk = group_id_x(), wave = wave_id(), lane = lane_id();
    uint32_t token = paged ? group_id_y() / a.n_kv_heads : 0, kv_head = paged ? group_id_y() % a.n_kv_heads : group_id_y();
    uint32_t group = a.n_heads / a.n_kv_heads;
    uint32_t kv_len = a.kv_len;
    const int32_t* table = nullptr;  // paged: this token's sequence's block ids
    if (paged) {
        const int32_t cap = static_cast<int32_t>(a.blocks_per_seq * a.block_size), p = a.pos[token], s = a.seq[token];
        kv_len = static_cast<uint32_t>((p < 0 ? 0 : p < cap ? p : cap - 1) + 1);
        table = a.block_table + static_cast<uint64_t>(s < 0 ? 0 : s < static_cast<int32_t>(a.n_seqs) ? s : a.n_seqs - 1) * a.blocks_per_seq;
    }
    const uint64_t out_row0 = (static_cast<uint64_t>(token) * a.n_heads + kv_head * group) * a.n_chunks + chunk;  // + head * n_chunks
    if (chunk * ATTN_CHUNK >= kv_len) {  // paged: past this token's keys (uniform in the work-group)
        for (uint32_t idx = thread_id(); idx < group * D; idx += block_dim_x()) {
            uint64_t row = out_row0 + static_cast<uint64_t>(idx / D) * a.n_chunks;
            a.partial[row * D + idx % D] = 0.0f;
            if (idx % D == 0) a.stats[row * 2] = -inf, a.stats[row * 2 + 1] = 0.0f;
        }
        return;
    }
    uint32_t key0 = chunk * ATTN_CHUNK + wave * KEYS_PER_WAVE;
    uint32_t n_keys = key0 < kv_len ? min_u32(kv_len - key0, KEYS_PER_WAVE) : 0;  // uniform in the wave
    bool lane_used = lane < LANES;
    uint32_t dim0 = min_u32(lane, LANES - 1) * DPL;
    uint64_t head_offset = static_cast<uint64_t>(kv_head) * a.kv_head_stride + dim0;
    auto key_offset = [&](uint32_t j) -> uint64_t {  // of key key0 + j (j < n_keys)
        uint32_t key = key0 + j;
        if (!paged) return head_offset + static_cast<uint64_t>(key) * a.pos_stride;
        int32_t b = table[key / a.block_size];
        uint32_t block = b < 0 ? 0 : b < static_cast<int32_t>(a.n_blocks) ? static_cast<uint32_t>(b) : a.n_blocks - 1;
        return head_offset + (static_cast<uint64_t>(block) * a.block_size + key % a.block_size) * a.pos_stride;
    };
    float q_scale = a.scale * LOG2E;
    const float* q_token = a.q + static_cast<uint64_t>(token) * a.n_heads * D;

    for (uint32_t head0 = 0; head0 < group; head0 += HEADS_PER_PASS) {
        uint32_t n_pass = min_u32(group - head0, HEADS_PER_PASS);
        for (uint32_t h = 0; h < n_pass; h++) {
            const float* q = q_token + static_cast<uint64_t>(kv_head * group + head0 + h) * D + dim0;
            float qf[DPL];
            for (uint32_t i = 0; i < DPL; i++) qf[i] = lane_used ? q[i] * q_scale : 0.0f;
            float score[KEYS_PER_WAVE], max = -inf;
            for (uint32_t j = 0; j < KEYS_PER_WAVE; j++) {
                score[j] = -inf;
                if (j < n_keys) {
                    float kf[DPL], dot = 0.0f;
                    load_f16<DPL>(a.k + key_offset(j), kf);
                    for (uint32_t i = 0; i < DPL; i++) dot = __builtin_fmaf(qf[i], kf[i], dot);
                    score[j] = wave_sum(dot);
                    max = __builtin_fmaxf(max, score[j]);
                }
            }
            float sum = 0.0f, acc[DPL] = {};
            for (uint32_t j = 0; j < KEYS_PER_WAVE; j++) {  // a fixed trip count keeps score[] in registers
                if (j >= n_keys) break;
                float p = __builtin_exp2f(score[j] - max), vf[DPL];
                load_f16<DPL>(a.v + key_offset(j), vf);
                for (uint32_t i = 0; i < DPL; i++) acc[i] = __builtin_fmaf(p, vf[i], acc[i]);
                sum += p;
            }
            uint32_t slot = wave * HEADS_PER_PASS + h;
            if (lane_used)
                for (uint32_t i = 0; i < DPL; i++) acc_lds[slot * D + dim0 + i] = static_cast<_Float16>(acc[i]);
            if (lane == 0) {
                stat_lds[slot * 2] = max;  // -inf for a wave past kv_len: its weight below is 2^-inf = 0
                stat_lds[slot * 2 + 1] = sum;
            }
        }
        barrier();
        for (uint32_t idx = thread_id(); idx < n_pass * D; idx += block_dim_x()) {  // block size from the dispatch packet
            uint32_t h = idx / D, d = idx % D;
            float max = -inf;  // finite: wave 0 of a live chunk has at least one key
            for (uint32_t w = 0; w < ATTN_WAVES; w++) max = __builtin_fmaxf(max, stat_lds[(w * HEADS_PER_PASS + h) * 2]);
            float value = 0.0f, sum = 0.0f;
            for (uint32_t w = 0; w < ATTN_WAVES; w++) {
                uint32_t slot = w * HEADS_PER_PASS + h;
                float weight = __builtin_exp2f(stat_lds[slot * 2] - max);
                value = __builtin_fmaf(weight, static_cast<float>(acc_lds[slot * D + d]), value);
                sum = __builtin_fmaf(weight, stat_lds[slot * 2 + 1], sum);
            }
            uint64_t row = out_row0 + static_cast<uint64_t>(head0 + h) * a.n_chunks;
            a.partial[row * D + d] = value;
            if (d == 0) {
                a.stats[row * 2] = max;
                a.stats[row * 2 + 1] = sum;
            }
        }
        barrier();  // the next pass reuses the LDS
    }
}

AMD_KERNEL(attn_decode_partial_d8, AttnDecodeArgs, ATTN_WAVES) { attn_decode_partial<8>(args); }
AMD_KERNEL(attn_decode_partial_d16, AttnDecodeArgs, ATTN_WAVES) { attn_decode_partial<16>(args); }
AMD_KERNEL(attn_decode_partial_d32, AttnDecodeArgs, ATTN_WAVES) { attn_decode_partial<32>(args); }
AMD_KERNEL(attn_decode_partial_d64, AttnDecodeArgs, ATTN_WAVES) { attn_decode_partial<64>(args); }
AMD_KERNEL(attn_decode_partial_d128, AttnDecodeArgs, ATTN_WAVES) { attn_decode_partial<128>(args); }
AMD_KERNEL(attn_decode_partial_d256, AttnDecodeArgs, ATTN_WAVES) { attn_decode_partial<256>(args); }

// One wave per query head; every lane weighs all chunks for its output dims (no cross-lane traffic).
AMD_KERNEL(attn_decode_combine, AttnCombineArgs, ATTN_COMBINE_WAVES) {
    const AttnCombineArgs& a = args;
    uint64_t head = group_id_x();
    const float* stats = a.stats + head * a.n_chunks * 2;
    const float* partial = a.partial + head * a.n_chunks * a.head_dim;
    float max = -__builtin_inff();
    for (uint32_t c = 0; c < a.n_chunks; c++) max = __builtin_fmaxf(max, stats[2 * c]);
    float sum = 0.0f;
    for (uint32_t c = 0; c < a.n_chunks; c++) sum = __builtin_fmaf(__builtin_exp2f(stats[2 * c] - max), stats[2 * c + 1], sum);
    float inv = 1.0f / sum;
    for (uint32_t d = lane_id(); d < a.head_dim; d += WAVE) {
        float value = 0.0f;
        for (uint32_t c = 0; c < a.n_chunks; c++)
            value = __builtin_fmaf(__builtin_exp2f(stats[2 * c] - max), partial[static_cast<uint64_t>(c) * a.head_dim + d], value);
        a.out[head * a.head_dim + d] = value * inv;
    }
}

// One work-group per token: its row converted to fp16 into the pool row it names.
AMD_KERNEL(kv_store_f16, KvStoreArgs, KV_STORE_WAVES) {
    const KvStoreArgs& a = args;
    uint32_t t = group_id_x();
    int32_t slot = a.slot[t];
    if (thread_id() == 0) a.out[t] = slot;
    if (slot < 0 || static_cast<uint32_t>(slot) >= a.n_rows) return;
    const float* x = a.x + static_cast<uint64_t>(t) * a.row;
    uint16_t* dst = a.pool + static_cast<uint64_t>(slot) * a.row;
    for (uint32_t i = thread_id(); i < a.row; i += block_dim_x()) dst[i] = __builtin_bit_cast(uint16_t, static_cast<_Float16>(x[i]));
}
