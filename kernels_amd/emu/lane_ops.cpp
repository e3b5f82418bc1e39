// Exact lane semantics of the ops the kernels use, from the RDNA3/RDNA4/CDNA ISA pseudocode: v_perm_b32,
// v_dot4_i32_iu8 / v_dot4c_i32_i8, ds_swizzle_b32 (BitMode, QDMode), ds_bpermute_b32 and the f16 WMMA/MFMA
// register layouts. The Mutation hook swaps in wrong lane mappings so tests can show they would notice.
#include "kernels_amd/emu/emulator.h"

#include <atomic>
#include <cstring>

namespace tinyllm::amd::emu {
namespace {

std::atomic<Mutation> g_mutation{Mutation::NONE};

int32_t byte_value(uint32_t word, int i, bool is_signed) {
    uint32_t b = (word >> (8 * i)) & 0xff;
    return is_signed ? static_cast<int8_t>(b) : static_cast<int32_t>(b);
}

}  // namespace

void set_mutation(Mutation m) { g_mutation.store(m); }
Mutation mutation() { return g_mutation.load(); }

uint32_t perm_b32(uint32_t s0, uint32_t s1, uint32_t selector) {
    uint64_t data = (uint64_t{s0} << 32) | s1;  // bytes 0-3 from S1, 4-7 from S0
    uint32_t result = 0;
    for (int i = 0; i < 4; i++) {
        uint32_t sel = (selector >> (8 * i)) & 0xff, byte;
        if (sel >= 13) byte = 0xff;
        else if (sel == 12) byte = 0x00;
        else if (sel >= 8) byte = (data >> (16 * (sel - 8) + 15)) & 1 ? 0xff : 0x00;  // sign of byte 1, 3, 5, 7
        else byte = (data >> (8 * sel)) & 0xff;
        result |= byte << (8 * i);
    }
    return result;
}

int32_t sudot4(bool a_signed, uint32_t a, bool b_signed, uint32_t b, int32_t c) {
    uint32_t acc = static_cast<uint32_t>(c);  // clamp off: wraps like the hardware's 32-bit adder
    for (int i = 0; i < 4; i++)
        acc += static_cast<uint32_t>(byte_value(a, i, a_signed) * byte_value(b, i, b_signed));
    return static_cast<int32_t>(acc);
}

int32_t sdot4(uint32_t a, uint32_t b, int32_t c) { return sudot4(true, a, true, b, c); }

void wave_swizzle(uint32_t pattern, const int32_t* in, const bool* active, int32_t* out, uint32_t wave_size) {
    if ((pattern & 0xC000) == 0xC000)
        throw KernelError("ds_swizzle pattern " + std::to_string(pattern) + " (rotate/FFT mode) is not modelled");
    bool quad = (pattern & 0x8000) != 0;
    uint32_t and_mask = pattern & 31, or_mask = (pattern >> 5) & 31, xor_mask = (pattern >> 10) & 31;
    for (uint32_t l = 0; l < wave_size; l++) {
        if (!active[l]) continue;
        uint32_t src;
        if (quad) {  // QDMode: lane i of each group of 4 reads lane pattern[2i+1:2i] of its group
            src = (l & ~3u) | ((pattern >> (2 * (l & 3))) & 3);
        } else {     // BitMode: within each 32 lanes, ((lane & and) | or) ^ xor
            uint32_t j = ((l & and_mask) | or_mask) ^ xor_mask;
            if (mutation() == Mutation::SWIZZLE_SOURCE_LANE) j = (j + 1) & 31;
            src = (l & ~31u) | j;
        }
        out[l] = active[src] ? in[src] : 0;
    }
}

void wave_bpermute(const int32_t* address, const int32_t* in, const bool* active, int32_t* out, uint32_t wave_size) {
    for (uint32_t l = 0; l < wave_size; l++) {
        if (!active[l]) continue;
        uint32_t src = (static_cast<uint32_t>(address[l]) >> 2) & (wave_size - 1);
        if (mutation() == Mutation::BPERMUTE_SOURCE_LANE) src = (src + 1) & (wave_size - 1);
        out[l] = active[src] ? in[src] : 0;
    }
}

int matrix_k_per_lane(MatrixOp op) { return op == MatrixOp::WMMA_GFX11 ? 16 : op == MatrixOp::WMMA_GFX12 ? 8 : 4; }
int matrix_acc_per_lane(MatrixOp op) { return op == MatrixOp::MFMA_F16 ? 4 : 8; }
uint32_t matrix_wave_size(MatrixOp op) { return op == MatrixOp::MFMA_F16 ? 64 : 32; }

// Register layouts, per lane l: A row l%16 and B column l%16 hold k = k_base(l) + e; accumulator element v
// is D[acc_row(l, v)][l%16].
//   gfx11 WMMA (wave32): k_base 0 (lanes 16-31 replicate 0-15), acc_row 2v + l/16
//   gfx12 WMMA (wave32): k_base 8(l/16),                       acc_row 8(l/16) + v
//   MFMA 16x16x16 f16 (wave64): k_base 4(l/16),                 acc_row 4(l/16) + v
void wave_matrix_op(MatrixOp op, const _Float16* a, const _Float16* b, const float* c, float* d) {
    const int kp = matrix_k_per_lane(op), ap = matrix_acc_per_lane(op);
    const uint32_t wave = matrix_wave_size(op);
    auto k_base = [&](uint32_t l) { return op == MatrixOp::WMMA_GFX11 ? 0u : op == MatrixOp::WMMA_GFX12 ? 8 * (l / 16) : 4 * (l / 16); };
    auto acc_row = [&](uint32_t l, uint32_t v, bool for_d) {
        Mutation m = for_d ? mutation() : Mutation::NONE;
        if (op == MatrixOp::WMMA_GFX11) return m == Mutation::WMMA_GFX11_D_ROWS ? 8 * (l / 16) + v : 2 * v + l / 16;
        if (op == MatrixOp::WMMA_GFX12) return m == Mutation::WMMA_GFX12_D_ROWS ? 2 * v + l / 16 : 8 * (l / 16) + v;
        return m == Mutation::MFMA_D_ROWS ? l / 16 + 4 * v : 4 * (l / 16) + v;
    };
    if (op == MatrixOp::WMMA_GFX11)
        for (uint32_t l = 16; l < 32; l++)
            if (std::memcmp(a + l * kp, a + (l - 16) * kp, kp * 2) || std::memcmp(b + l * kp, b + (l - 16) * kp, kp * 2))
                throw KernelError("v_wmma_f32_16x16x16_f16: lanes 16-31 do not replicate lanes 0-15 (lane " + std::to_string(l) + ")");
    float A[16][16], B[16][16], C[16][16];
    for (uint32_t l = 0; l < wave; l++)
        for (int e = 0; e < kp; e++) {
            A[l % 16][k_base(l) + e] = static_cast<float>(a[l * kp + e]);
            B[k_base(l) + e][l % 16] = static_cast<float>(b[l * kp + e]);
        }
    for (uint32_t l = 0; l < wave; l++)
        for (int v = 0; v < ap; v++) C[acc_row(l, v, false)][l % 16] = c[l * ap + v];
    for (uint32_t l = 0; l < wave; l++)
        for (int v = 0; v < ap; v++) {
            uint32_t m = acc_row(l, v, true), n = l % 16;
            float acc = C[m][n];
            for (int k = 0; k < 16; k++) acc += A[m][k] * B[k][n];  // f16 products are exact in f32
            d[l * ap + v] = acc;
        }
}

}  // namespace tinyllm::amd::emu
