// Weights packed as panels of 16 rows (kernels.h): the per-type panel formats, packing and its exact
// inverse, and the matrix product over panels on the scalar variant, which has no panel kernel of its
// own (Q8_0: a scalar kernel over the panels; the other types: rows unpacked, then the row kernels), and
// the split of a product between the panel variants' decode and prefill kernels.
#include "devices/cpu/kernels/kernels_impl.h"

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <string>

namespace cpu_kernels {

using gguf::Type;

namespace {

// A panel is [codes][meta]. Each row's weights become a code stream (stream_bytes per unit of `unit`
// elements) and meta (scales, mins). The codes region is the 16 rows' streams interleaved by 4-byte
// words: word w of row r at 64·w + 4·r, so one 64-byte load holds the same word of all 16 rows. The meta
// region is per unit meta_bytes · 16, laid out per type so that one load gives a value of all 16 rows.
struct PanelFormat {
    Type type;
    int unit;          // elements per unit: 32 (one block) or 256 (one super-block)
    int stream_bytes;  // code bytes per unit and row
    int meta_bytes;    // meta bytes per unit and row
    // Row r's block → its stream (stream_bytes) and its part of the unit's meta (16 · meta_bytes).
    void (*to_panel)(const uint8_t* blk, int r, uint8_t* stream, uint8_t* meta);
    void (*from_panel)(const uint8_t* stream, const uint8_t* meta, int r, uint8_t* blk);
};

// fp16 scale of row r at meta + 2r (a unit's 16 scales side by side).
void put_half(uint8_t* meta, int r, const void* h) { std::memcpy(meta + 2 * r, h, 2); }
void get_half(const uint8_t* meta, int r, void* h) { std::memcpy(h, meta + 2 * r, 2); }

// Q8_0: stream = q + 128; meta = d[16].
void q8_0_to(const uint8_t* b, int r, uint8_t* s, uint8_t* meta) {
    auto blk = reinterpret_cast<const gguf::block_q8_0*>(b);
    for (int i = 0; i < 32; i++) s[i] = static_cast<uint8_t>(blk->qs[i] ^ 0x80);
    put_half(meta, r, &blk->d);
}
void q8_0_from(const uint8_t* s, const uint8_t* meta, int r, uint8_t* b) {
    auto blk = reinterpret_cast<gguf::block_q8_0*>(b);
    for (int i = 0; i < 32; i++) blk->qs[i] = static_cast<int8_t>(s[i] ^ 0x80);
    get_half(meta, r, &blk->d);
}

// Q4_0 and IQ4_NL (the same block: the nibbles index IQ4_NL's codebook): stream = qs (byte i: element
// i low, i + 16 high); meta = d[16].
void q4_0_to(const uint8_t* b, int r, uint8_t* s, uint8_t* meta) {
    auto blk = reinterpret_cast<const gguf::block_q4_0*>(b);
    std::memcpy(s, blk->qs, 16);
    put_half(meta, r, &blk->d);
}
void q4_0_from(const uint8_t* s, const uint8_t* meta, int r, uint8_t* b) {
    auto blk = reinterpret_cast<gguf::block_q4_0*>(b);
    std::memcpy(blk->qs, s, 16);
    get_half(meta, r, &blk->d);
}

// The 6-bit scales and mins of a Q4_K or Q5_K super-block (12 bytes) as a panel's meta for row r:
// d[16], dmin[16], then the low nibbles, lo[j][16] = sc_j | m_j << 4, and the top bits,
// hi[j % 4][16] = its 2-bit pairs (sc_j, m_j, sc_j+4, m_j+4 for j < 4).
void k_scales_to(const gguf::half& d, const gguf::half& dmin, const uint8_t* q, int r, uint8_t* meta) {
    put_half(meta, r, &d);
    put_half(meta + 32, r, &dmin);
    uint8_t sc[8], mn[8];
    for (int j = 0; j < 4; j++) sc[j] = q[j] & 63, mn[j] = q[j + 4] & 63;
    for (int j = 4; j < 8; j++)
        sc[j] = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4), mn[j] = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
    for (int j = 0; j < 8; j++) meta[64 + 16 * j + r] = static_cast<uint8_t>((sc[j] & 15) | (mn[j] & 15) << 4);
    for (int j = 0; j < 4; j++)
        meta[192 + 16 * j + r] = static_cast<uint8_t>(sc[j] >> 4 | (mn[j] >> 4) << 2 | (sc[j + 4] >> 4) << 4 | (mn[j + 4] >> 4) << 6);
}
void k_scales_from(const uint8_t* meta, int r, gguf::half& d, gguf::half& dmin, uint8_t* q) {
    get_half(meta, r, &d);
    get_half(meta + 32, r, &dmin);
    uint8_t sc[8], mn[8];
    for (int j = 0; j < 8; j++) {
        const int lo = meta[64 + 16 * j + r], hi = meta[192 + 16 * (j % 4) + r] >> (j < 4 ? 0 : 4);
        sc[j] = static_cast<uint8_t>((lo & 15) | (hi & 3) << 4), mn[j] = static_cast<uint8_t>(lo >> 4 | ((hi >> 2) & 3) << 4);
    }
    for (int j = 0; j < 4; j++) {
        q[j] = static_cast<uint8_t>(sc[j] | (sc[j + 4] >> 4) << 6);
        q[j + 4] = static_cast<uint8_t>(mn[j] | (mn[j + 4] >> 4) << 6);
        q[j + 8] = static_cast<uint8_t>((sc[j + 4] & 15) | (mn[j + 4] & 15) << 4);
    }
}

// Q4_K: stream = qs (per 64 elements 32 bytes: low nibbles group 2c, high nibbles 2c + 1); meta as
// k_scales_to.
void q4_k_to(const uint8_t* b, int r, uint8_t* s, uint8_t* meta) {
    auto blk = reinterpret_cast<const gguf::block_q4_K*>(b);
    std::memcpy(s, blk->qs, 128);
    k_scales_to(blk->d, blk->dmin, blk->scales, r, meta);
}
void q4_k_from(const uint8_t* s, const uint8_t* meta, int r, uint8_t* b) {
    auto blk = reinterpret_cast<gguf::block_q4_K*>(b);
    std::memcpy(blk->qs, s, 128);
    k_scales_from(meta, r, blk->d, blk->dmin, blk->scales);
}

// Q5_K: stream per 64 elements c (40 bytes): its 32 bytes of qs as Q4_K, then the fifth bits as two
// words, one for the low nibbles' elements and one for the high nibbles' (byte i of word h: bit L is
// the fifth bit of element 64c + 32h + 4L + i, so word k of the codes finds its bits at bit k); meta as
// k_scales_to. ggml keeps the fifth bit of element 64c + 32h + l at bit 2c + h of qh[l].
void q5_k_to(const uint8_t* b, int r, uint8_t* s, uint8_t* meta) {
    auto blk = reinterpret_cast<const gguf::block_q5_K*>(b);
    for (int c = 0; c < 4; c++) {
        uint8_t* o = s + 40 * c;
        std::memcpy(o, blk->qs + 32 * c, 32);
        for (int h = 0; h < 2; h++)
            for (int i = 0; i < 4; i++) {
                int v = 0;
                for (int L = 0; L < 8; L++) v |= ((blk->qh[4 * L + i] >> (2 * c + h)) & 1) << L;
                o[32 + 4 * h + i] = static_cast<uint8_t>(v);
            }
    }
    k_scales_to(blk->d, blk->dmin, blk->scales, r, meta);
}
void q5_k_from(const uint8_t* s, const uint8_t* meta, int r, uint8_t* b) {
    auto blk = reinterpret_cast<gguf::block_q5_K*>(b);
    std::memset(blk->qh, 0, 32);
    for (int c = 0; c < 4; c++) {
        const uint8_t* o = s + 40 * c;
        std::memcpy(blk->qs + 32 * c, o, 32);
        for (int h = 0; h < 2; h++)
            for (int i = 0; i < 4; i++)
                for (int L = 0; L < 8; L++) blk->qh[4 * L + i] |= static_cast<uint8_t>(((o[32 + 4 * h + i] >> L) & 1) << (2 * c + h));
    }
    k_scales_from(meta, r, blk->d, blk->dmin, blk->scales);
}

// Q4_1: stream = qs as Q4_0; meta = d[16], m[16].
void q4_1_to(const uint8_t* b, int r, uint8_t* s, uint8_t* meta) {
    auto blk = reinterpret_cast<const gguf::block_q4_1*>(b);
    std::memcpy(s, blk->qs, 16);
    put_half(meta, r, &blk->d);
    put_half(meta + 32, r, &blk->m);
}
void q4_1_from(const uint8_t* s, const uint8_t* meta, int r, uint8_t* b) {
    auto blk = reinterpret_cast<gguf::block_q4_1*>(b);
    std::memcpy(blk->qs, s, 16);
    get_half(meta, r, &blk->d);
    get_half(meta + 32, r, &blk->m);
}

// Q5_0 and Q5_1: stream = qs as Q4_0, then the fifth bits as one word (byte i: bit L is the fifth bit
// of element 4L + i, so word k of the codes finds its low nibbles' bits at bit k and its high nibbles'
// at bit 4 + k); meta = d[16] (Q5_1: then m[16]). ggml keeps the fifth bit of element j at bit j of qh.
void fifth_bits_to(const uint8_t* qh, uint8_t* o) {
    uint32_t h;
    std::memcpy(&h, qh, 4);
    for (int i = 0; i < 4; i++) {
        int v = 0;
        for (int L = 0; L < 8; L++) v |= ((h >> (4 * L + i)) & 1) << L;
        o[i] = static_cast<uint8_t>(v);
    }
}
void fifth_bits_from(const uint8_t* o, uint8_t* qh) {
    uint32_t h = 0;
    for (int i = 0; i < 4; i++)
        for (int L = 0; L < 8; L++) h |= static_cast<uint32_t>((o[i] >> L) & 1) << (4 * L + i);
    std::memcpy(qh, &h, 4);
}
void q5_0_to(const uint8_t* b, int r, uint8_t* s, uint8_t* meta) {
    auto blk = reinterpret_cast<const gguf::block_q5_0*>(b);
    std::memcpy(s, blk->qs, 16);
    fifth_bits_to(blk->qh, s + 16);
    put_half(meta, r, &blk->d);
}
void q5_0_from(const uint8_t* s, const uint8_t* meta, int r, uint8_t* b) {
    auto blk = reinterpret_cast<gguf::block_q5_0*>(b);
    std::memcpy(blk->qs, s, 16);
    fifth_bits_from(s + 16, blk->qh);
    get_half(meta, r, &blk->d);
}
void q5_1_to(const uint8_t* b, int r, uint8_t* s, uint8_t* meta) {
    auto blk = reinterpret_cast<const gguf::block_q5_1*>(b);
    std::memcpy(s, blk->qs, 16);
    fifth_bits_to(blk->qh, s + 16);
    put_half(meta, r, &blk->d);
    put_half(meta + 32, r, &blk->m);
}
void q5_1_from(const uint8_t* s, const uint8_t* meta, int r, uint8_t* b) {
    auto blk = reinterpret_cast<gguf::block_q5_1*>(b);
    std::memcpy(blk->qs, s, 16);
    fifth_bits_from(s + 16, blk->qh);
    get_half(meta, r, &blk->d);
    get_half(meta + 32, r, &blk->m);
}

// IQ4_XS: stream = qs (per 32 elements 16 bytes: byte k element k low, 16 + k high); meta = d[16],
// scales_l[4][16], scales_h[16] (the file's 6-bit scales as they are: 8 bytes a row, as in the block).
void iq4_xs_to(const uint8_t* b, int r, uint8_t* s, uint8_t* meta) {
    auto blk = reinterpret_cast<const gguf::block_iq4_xs*>(b);
    std::memcpy(s, blk->qs, 128);
    put_half(meta, r, &blk->d);
    for (int j = 0; j < 4; j++) meta[32 + 16 * j + r] = blk->scales_l[j];
    put_half(meta + 96, r, &blk->scales_h);
}
void iq4_xs_from(const uint8_t* s, const uint8_t* meta, int r, uint8_t* b) {
    auto blk = reinterpret_cast<gguf::block_iq4_xs*>(b);
    std::memcpy(blk->qs, s, 128);
    get_half(meta, r, &blk->d);
    for (int j = 0; j < 4; j++) blk->scales_l[j] = meta[32 + 16 * j + r];
    get_half(meta + 96, r, &blk->scales_h);
}

// Q6_K element codes (0..63, ggml's order: per 128 elements, ql[l] low / ql[l + 32] low / ql[l] high /
// ql[l + 32] high with qh bits 0-1 / 2-3 / 4-5 / 6-7 of qh[l]).
void q6_k_codes(const gguf::block_q6_K* blk, uint8_t u[256]) {
    for (int n = 0; n < 2; n++)
        for (int l = 0; l < 32; l++) {
            const uint8_t* ql = blk->ql + 64 * n;
            const uint8_t qh = blk->qh[32 * n + l];
            uint8_t* y = u + 128 * n;
            y[l] = static_cast<uint8_t>((ql[l] & 15) | (qh & 3) << 4);
            y[l + 32] = static_cast<uint8_t>((ql[l + 32] & 15) | ((qh >> 2) & 3) << 4);
            y[l + 64] = static_cast<uint8_t>((ql[l] >> 4) | ((qh >> 4) & 3) << 4);
            y[l + 96] = static_cast<uint8_t>((ql[l + 32] >> 4) | ((qh >> 6) & 3) << 4);
        }
}

// Q6_K: stream per 32 elements e (24 bytes): 16 bytes of low nibbles (byte k: e + k low, e + 16 + k
// high), then top bits as two words per 16 elements (byte i of word h: bits 2L of element
// e + 16h + 4L + i); meta = scales[16 groups][16 rows] (int8), then d[16].
void q6_k_to(const uint8_t* b, int r, uint8_t* s, uint8_t* meta) {
    auto blk = reinterpret_cast<const gguf::block_q6_K*>(b);
    uint8_t u[256];
    q6_k_codes(blk, u);
    for (int w = 0; w < 8; w++) {
        const uint8_t* e = u + 32 * w;
        uint8_t* o = s + 24 * w;
        for (int k = 0; k < 16; k++) o[k] = static_cast<uint8_t>((e[k] & 15) | (e[16 + k] & 15) << 4);
        for (int h = 0; h < 2; h++)
            for (int i = 0; i < 4; i++) {
                int v = 0;
                for (int L = 0; L < 4; L++) v |= (e[16 * h + 4 * L + i] >> 4) << (2 * L);
                o[16 + 4 * h + i] = static_cast<uint8_t>(v);
            }
    }
    for (int g = 0; g < 16; g++) meta[16 * g + r] = static_cast<uint8_t>(blk->scales[g]);
    put_half(meta + 256, r, &blk->d);
}
void q6_k_from(const uint8_t* s, const uint8_t* meta, int r, uint8_t* b) {
    auto blk = reinterpret_cast<gguf::block_q6_K*>(b);
    uint8_t u[256];
    for (int w = 0; w < 8; w++) {
        const uint8_t* o = s + 24 * w;
        uint8_t* e = u + 32 * w;
        for (int k = 0; k < 16; k++) e[k] = o[k] & 15, e[16 + k] = o[k] >> 4;
        for (int h = 0; h < 2; h++)
            for (int i = 0; i < 4; i++)
                for (int L = 0; L < 4; L++) e[16 * h + 4 * L + i] |= static_cast<uint8_t>(((o[16 + 4 * h + i] >> (2 * L)) & 3) << 4);
    }
    for (int n = 0; n < 2; n++)
        for (int l = 0; l < 32; l++) {
            const uint8_t* y = u + 128 * n;
            blk->ql[64 * n + l] = static_cast<uint8_t>((y[l] & 15) | (y[l + 64] & 15) << 4);
            blk->ql[64 * n + l + 32] = static_cast<uint8_t>((y[l + 32] & 15) | (y[l + 96] & 15) << 4);
            blk->qh[32 * n + l] = static_cast<uint8_t>(y[l] >> 4 | (y[l + 32] >> 4) << 2 | (y[l + 64] >> 4) << 4 | (y[l + 96] >> 4) << 6);
        }
    for (int g = 0; g < 16; g++) blk->scales[g] = static_cast<int8_t>(meta[16 * g + r]);
    get_half(meta + 256, r, &blk->d);
}

static_assert(sizeof(gguf::block_iq4_nl) == sizeof(gguf::block_q4_0) && offsetof(gguf::block_iq4_nl, qs) == offsetof(gguf::block_q4_0, qs));

const PanelFormat kFormats[] = {
    {Type::Q8_0, 32, 32, 2, q8_0_to, q8_0_from},
    {Type::Q4_0, 32, 16, 2, q4_0_to, q4_0_from},
    {Type::Q4_1, 32, 16, 4, q4_1_to, q4_1_from},
    {Type::Q5_0, 32, 20, 2, q5_0_to, q5_0_from},
    {Type::Q5_1, 32, 20, 4, q5_1_to, q5_1_from},
    {Type::IQ4_NL, 32, 16, 2, q4_0_to, q4_0_from},
    {Type::IQ4_XS, 256, 128, 8, iq4_xs_to, iq4_xs_from},
    {Type::Q4_K, 256, 128, 16, q4_k_to, q4_k_from},
    {Type::Q5_K, 256, 160, 16, q5_k_to, q5_k_from},
    {Type::Q6_K, 256, 192, 18, q6_k_to, q6_k_from},
};

const PanelFormat* format_of(Type t) {
    for (const PanelFormat& f : kFormats)
        if (f.type == t) return &f;
    return nullptr;
}

// "q8_0, q4_0, ...": the types with a panel format, for messages.
std::string packable_names() {
    std::string names;
    for (const PanelFormat& f : kFormats) names += (names.empty() ? "" : ", ") + std::string(gguf::type_traits(f.type).name);
    return names;
}

// The byte of the codes region that holds byte b of row r's stream.
inline int64_t code_at(int64_t b, int r) { return (b / 4) * 64 + 4 * r + b % 4; }

}  // namespace

bool can_pack(Type weight_type, int64_t n_rows, int64_t n_cols) {
    const PanelFormat* f = format_of(weight_type);
    return f && n_rows > 0 && n_rows % kPanelRows == 0 && n_cols > 0 && n_cols % (f->unit < 64 ? 64 : f->unit) == 0;
}

int64_t panel_code_bytes(Type weight_type, int64_t n_cols) {
    const PanelFormat& f = *format_of(weight_type);
    return kPanelRows * (n_cols / f.unit) * f.stream_bytes;
}

void pack_rows(Type weight_type, const void* w, int64_t n_rows, int64_t n_cols, void* out, int64_t panel_begin,
               int64_t panel_end) {
    if (!can_pack(weight_type, n_rows, n_cols))
        throw Error("[cpu_kernels.pack_rows] " + std::string(gguf::type_traits(weight_type).name) + " (" + std::to_string(n_rows) +
                    ", " + std::to_string(n_cols) + "): only " + packable_names() + ", rows in panels of 16, columns in multiples of 64 (256 for K-quants)");
    const PanelFormat& f = *format_of(weight_type);
    const size_t row_bytes = bytes_per_row(weight_type, n_cols), panel_bytes = kPanelRows * row_bytes;
    const int64_t n_units = n_cols / f.unit, block_bytes = static_cast<int64_t>(row_bytes) / n_units;
    uint8_t stream[192];
    for (int64_t p = panel_begin; p < panel_end; p++) {
        auto src = static_cast<const uint8_t*>(w) + p * panel_bytes;
        auto codes = static_cast<uint8_t*>(out) + p * panel_bytes;
        uint8_t* meta = codes + kPanelRows * n_units * f.stream_bytes;
        for (int64_t u = 0; u < n_units; u++)
            for (int r = 0; r < kPanelRows; r++) {
                f.to_panel(src + r * row_bytes + u * block_bytes, r, stream, meta + u * kPanelRows * f.meta_bytes);
                for (int b = 0; b < f.stream_bytes; b++) codes[code_at(u * f.stream_bytes + b, r)] = stream[b];
            }
    }
}

void unpack_panel(Type weight_type, const uint8_t* panel, int64_t n_cols, int r_begin, int r_end, int64_t unit_begin,
                  int64_t unit_end, uint8_t* out) {
    const PanelFormat& f = *format_of(weight_type);
    const int64_t n_units = n_cols / f.unit, block_bytes = static_cast<int64_t>(bytes_per_row(weight_type, n_cols)) / n_units;
    const uint8_t* meta = panel + kPanelRows * n_units * f.stream_bytes;
    uint8_t stream[192];
    for (int r = r_begin; r < r_end; r++)
        for (int64_t u = unit_begin; u < unit_end; u++) {
            for (int b = 0; b < f.stream_bytes; b += 4) std::memcpy(stream + b, panel + code_at(u * f.stream_bytes + b, r), 4);  // words
            f.from_panel(stream, meta + u * kPanelRows * f.meta_bytes, r, out + ((r - r_begin) * (unit_end - unit_begin) + u - unit_begin) * block_bytes);
        }
}

void matmul_panels(const Matmul& m, int64_t r0, int64_t r1, int64_t gemm_min_tokens, MatmulFn gemv, MatmulFn gemm) {
    if (m.n_tokens < gemm_min_tokens) return gemv(m, r0, r1);
    const int64_t up = (r0 + kPanelRows - 1) / kPanelRows * kPanelRows, down = r1 / kPanelRows * kPanelRows;
    const int64_t a = up < r1 ? up : r1, b = down > a ? down : a;
    if (r0 < a) gemv(m, r0, a);
    if (a < b) gemm(m, a, b);
    if (b < r1) gemv(m, b, r1);
}

void unpack_rows(Type weight_type, const void* packed, int64_t n_rows, int64_t n_cols, void* out, int64_t row_begin,
                 int64_t row_end) {
    if (!can_pack(weight_type, n_rows, n_cols) || row_begin < 0 || row_end < row_begin || row_end > n_rows)
        throw Error("[cpu_kernels.unpack_rows] " + std::string(gguf::type_traits(weight_type).name) + " (" +
                    std::to_string(n_rows) + ", " + std::to_string(n_cols) + "): not a packable shape or rows outside it");
    const size_t row_bytes = bytes_per_row(weight_type, n_cols);
    const int64_t n_units = n_cols / format_of(weight_type)->unit;
    for (int64_t r = row_begin; r < row_end;) {
        const int64_t p = r / kPanelRows, lo = r % kPanelRows, hi = std::min<int64_t>(kPanelRows, row_end - p * kPanelRows);
        unpack_panel(weight_type, static_cast<const uint8_t*>(packed) + p * kPanelRows * row_bytes, n_cols, static_cast<int>(lo),
                     static_cast<int>(hi), 0, n_units, static_cast<uint8_t*>(out) + (r - row_begin) * row_bytes);
        r = p * kPanelRows + hi;
    }
}

// Q8_0: a scalar product over panels, exact integer sums per group like the other variants' kernels.
void matmul_packed_q8_0(const Matmul& m, int64_t row_begin, int64_t row_end) {
    const int64_t K = m.n_cols, n_groups = K / 32;
    const size_t panel_bytes = kPanelRows * bytes_per_row(Type::Q8_0, K), act_bytes = bytes_per_row(Type::Q8_0, K);
    for (int64_t r = row_begin; r < row_end; r++) {
        const uint8_t* codes = static_cast<const uint8_t*>(m.w) + (r / kPanelRows) * panel_bytes;
        const uint8_t* scales = codes + kPanelRows * K;
        const int lane = static_cast<int>(r % kPanelRows);
        for (int64_t t = 0; t < m.n_tokens; t++) {
            auto x = reinterpret_cast<const gguf::block_q8_0*>(static_cast<const uint8_t*>(m.x) + t * act_bytes);
            float sum = 0.0f;
            for (int64_t g = 0; g < n_groups; g++) {
                int32_t dot = 0;
                for (int i = 0; i < 32; i++) dot += (static_cast<int32_t>(codes[code_at(32 * g + i, lane)]) - 128) * x[g].qs[i];
                uint16_t s;
                std::memcpy(&s, scales + 2 * (g * kPanelRows + lane), 2);
                sum += gguf::f16_to_f32(s) * gguf::f16_to_f32(x[g].d) * static_cast<float>(dot);
            }
            m.y[t * m.y_stride + r] = sum;
        }
    }
}

void matmul_packed_rows(const Matmul& m, int64_t row_begin, int64_t row_end, const Kernels& row_kernels) {
    if (m.type == Type::Q8_0) return matmul_packed_q8_0(m, row_begin, row_end);
    // the rows of each panel in the range back in GGUF form, then the variant's row kernel on them
    const size_t row_bytes = bytes_per_row(m.type, m.n_cols);
    const int64_t n_units = m.n_cols / format_of(m.type)->unit;
    auto rows = static_cast<uint8_t*>(scratch(ScratchSlot::UNPACKED, kPanelRows * row_bytes));
    for (int64_t r = row_begin; r < row_end;) {
        const int64_t p = r / kPanelRows, lo = r % kPanelRows, hi = std::min<int64_t>(kPanelRows, row_end - p * kPanelRows);
        unpack_panel(m.type, static_cast<const uint8_t*>(m.w) + p * kPanelRows * row_bytes, m.n_cols, static_cast<int>(lo),
                     static_cast<int>(hi), 0, n_units, rows);
        Matmul part = m;
        part.w = rows, part.n_rows = hi - lo, part.y = m.y + p * kPanelRows + lo, part.packed = false;
        row_kernels.matmul(part, 0, hi - lo);
        r = p * kPanelRows + hi;
    }
}

}  // namespace cpu_kernels
