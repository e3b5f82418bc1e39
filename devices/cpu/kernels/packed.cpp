// Q8_0 weights packed as panels of 16 rows (kernels.h): the packing itself, and the scalar matrix
// product over panels that the scalar and AVX2 variants use (the AVX-512 one is packed_avx512.cpp).
#include "devices/cpu/kernels/kernels_impl.h"

#include <cstring>

namespace cpu_kernels {

using gguf::Type;

bool can_pack(Type weight_type, int64_t n_rows, int64_t n_cols) {
    return weight_type == Type::Q8_0 && n_rows > 0 && n_rows % kPanelRows == 0 && n_cols > 0 && n_cols % 64 == 0;
}

void pack_rows(Type weight_type, const void* w, int64_t n_rows, int64_t n_cols, void* out, int64_t panel_begin,
               int64_t panel_end) {
    if (!can_pack(weight_type, n_rows, n_cols))
        throw Error("[cpu_kernels.pack_rows] " + std::string(gguf::type_traits(weight_type).name) + " (" + std::to_string(n_rows) +
                    ", " + std::to_string(n_cols) + "): only Q8_0 with rows in panels of 16 and columns in multiples of 64");
    const size_t row_bytes = bytes_per_row(weight_type, n_cols), panel_bytes = kPanelRows * row_bytes;
    const int64_t n_groups = n_cols / 32;
    for (int64_t p = panel_begin; p < panel_end; p++) {
        auto src = static_cast<const uint8_t*>(w) + p * panel_bytes;
        auto codes = static_cast<uint8_t*>(out) + p * panel_bytes;
        uint8_t* scales = codes + kPanelRows * n_cols;
        for (int r = 0; r < kPanelRows; r++)
            for (int64_t g = 0; g < n_groups; g++) {
                auto blk = reinterpret_cast<const gguf::block_q8_0*>(src + r * row_bytes) + g;
                std::memcpy(scales + 2 * (g * kPanelRows + r), &blk->d, 2);
                for (int i = 0; i < 32; i++) {
                    const int64_t c = 32 * g + i;
                    codes[(c / 4) * 64 + 4 * r + c % 4] = static_cast<uint8_t>(blk->qs[i] ^ 0x80);
                }
            }
    }
}

// Scalar product over panels, exact integer sums per group like the other variants' Q8_0 kernels.
void matmul_packed_scalar(const Matmul& m, int64_t row_begin, int64_t row_end) {
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
                for (int i = 0; i < 32; i++) {
                    const int64_t c = 32 * g + i;
                    dot += (static_cast<int32_t>(codes[(c / 4) * 64 + 4 * lane + c % 4]) - 128) * x[g].qs[i];
                }
                uint16_t s;
                std::memcpy(&s, scales + 2 * (g * kPanelRows + lane), 2);
                sum += gguf::f16_to_f32(s) * gguf::f16_to_f32(x[g].d) * static_cast<float>(dot);
            }
            m.y[t * m.y_stride + r] = sum;
        }
    }
}

}  // namespace cpu_kernels
