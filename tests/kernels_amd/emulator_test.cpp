// The emulator's lane semantics against hand-computed ISA results (v_perm_b32 selectors, dot4 signedness
// and wrap-around, ds_swizzle modes with inactive lanes, ds_bpermute, the matrix-op register layouts) and
// its scheduling rules: barriers through LDS, divergent cross-lane ops and partial-EXEC matrix ops rejected.
#include "support.h"

#include "kernels_amd/emu/emulator.h"

#include <catch2/catch.hpp>

using namespace amdtest;
namespace emu = tinyllm::amd::emu;

TEST_CASE("v_perm_b32 picks bytes of {S0, S1}, sign-replicates for 8-11, 0x00 for 12, 0xff above") {
    uint32_t s0 = 0x8899AABB, s1 = 0x11223344;  // bytes 0-3 = 44 33 22 11, 4-7 = BB AA 99 88
    CHECK(emu::perm_b32(s0, s1, 0x07000401) == 0x8844BB33);
    CHECK(emu::perm_b32(s0, s1, 0x0D0C0908) == 0xFF000000);  // bytes 1 and 3 of S1 are positive
    CHECK(emu::perm_b32(s0, s1, 0x0B0AFF0E) == 0xFFFFFFFF);  // bytes 5 and 7 (S0) are negative
    CHECK(emu::perm_b32(0, 0x00008000, 0x00000008) == 0x000000FF);
}

TEST_CASE("dot4 treats bytes as signed or unsigned per operand and wraps without clamp") {
    uint32_t a = 0x80FF7F01, b = 0x02FF80FF;  // a = [1, 127, -1 | 255, -128 | 128], b = [-1 | 255, -128 | 128, -1 | 255, 2]
    CHECK(emu::sudot4(true, a, true, b, 5) == -16512 + 5);
    CHECK(emu::sudot4(false, a, true, b, 0) == -16256);
    CHECK(emu::sudot4(true, a, false, b, 0) == 16000);
    CHECK(emu::sudot4(false, a, false, b, 0) == 81792);
    CHECK(emu::sdot4(a, b, 0) == -16512);
    CHECK(emu::sdot4(1, 1, INT32_MAX) == INT32_MIN);
}

TEST_CASE("ds_swizzle BitMode and QDMode, with inactive source lanes reading 0") {
    int32_t in[64], out[64];
    bool active[64];
    for (int l = 0; l < 64; l++) in[l] = 100 + l, active[l] = true;
    emu::wave_swizzle(0x1f | (16 << 10), in, active, out, 64);  // xor 16 within each 32 lanes
    CHECK(out[3] == 119);
    CHECK(out[20] == 104);
    CHECK(out[35] == 151);
    emu::wave_swizzle(5 << 5, in, active, out, 64);  // and 0, or 5: broadcast lane 5 of each half
    CHECK(out[0] == 105);
    CHECK(out[63] == 137);
    emu::wave_swizzle(0x8000 | 0x1B, in, active, out, 32);  // QDMode (3,2,1,0): reverse each quad
    CHECK(out[4] == 107);
    CHECK(out[6] == 105);
    active[5] = false;
    out[5] = -1;
    emu::wave_swizzle(5 << 5, in, active, out, 32);
    CHECK(out[0] == 0);
    CHECK(out[5] == -1);  // an inactive lane is not written
    CHECK_THROWS_WITH(emu::wave_swizzle(0xE000, in, active, out, 32), Catch::Contains("not modelled"));
}

TEST_CASE("ds_bpermute reads lane (address / 4) mod wave size, 0 from inactive lanes") {
    int32_t address[32], in[32], out[32];
    bool active[32];
    for (int l = 0; l < 32; l++) address[l] = ((l + 3) % 32) * 4, in[l] = l * 7, active[l] = true;
    address[1] = (1 + 32) * 4;  // wraps to itself
    active[10] = false;
    emu::wave_bpermute(address, in, active, out, 32);
    CHECK(out[0] == 21);
    CHECK(out[1] == 7);
    CHECK(out[7] == 0);  // lane 10 is inactive
    CHECK(out[31] == 14);
}

namespace {

// Packs integer matrices A (16x16), B (16x16), C into each op's documented lane registers, runs it, and
// unpacks D by the documented accumulator layout.
void check_matrix_layout(emu::MatrixOp op) {
    const uint32_t wave = emu::matrix_wave_size(op);
    const int kp = emu::matrix_k_per_lane(op), ap = emu::matrix_acc_per_lane(op);
    auto k_of = [&](uint32_t l, int e) { return op == emu::MatrixOp::WMMA_GFX11 ? e : op == emu::MatrixOp::WMMA_GFX12 ? 8 * (l / 16) + e : 4 * (l / 16) + e; };
    auto row_of = [&](uint32_t l, int v) { return op == emu::MatrixOp::WMMA_GFX11 ? 2 * v + l / 16 : op == emu::MatrixOp::WMMA_GFX12 ? 8 * (l / 16) + v : 4 * (l / 16) + v; };
    float A[16][16], B[16][16], C[16][16];
    for (int i = 0; i < 16; i++)
        for (int j = 0; j < 16; j++) A[i][j] = static_cast<float>((i * 3 + j) % 7 - 3), B[i][j] = static_cast<float>((i + 5 * j) % 5 - 2), C[i][j] = static_cast<float>(i - j);
    std::vector<_Float16> a(wave * kp), b(wave * kp);
    std::vector<float> c(wave * ap), d(wave * ap);
    for (uint32_t l = 0; l < wave; l++) {
        for (int e = 0; e < kp; e++) {
            a[l * kp + e] = static_cast<_Float16>(A[l % 16][k_of(l, e)]);
            b[l * kp + e] = static_cast<_Float16>(B[k_of(l, e)][l % 16]);
        }
        for (int v = 0; v < ap; v++) c[l * ap + v] = C[row_of(l, v)][l % 16];
    }
    emu::wave_matrix_op(op, a.data(), b.data(), c.data(), d.data());
    for (uint32_t l = 0; l < wave; l++)
        for (int v = 0; v < ap; v++) {
            int m = row_of(l, v), n = l % 16;
            float want = C[m][n];
            for (int k = 0; k < 16; k++) want += A[m][k] * B[k][n];
            REQUIRE(d[l * ap + v] == want);
        }
}

}  // namespace

TEST_CASE("WMMA (gfx11, gfx12) and MFMA compute D = A*B + C in their documented register layouts") {
    check_matrix_layout(emu::MatrixOp::WMMA_GFX11);
    check_matrix_layout(emu::MatrixOp::WMMA_GFX12);
    check_matrix_layout(emu::MatrixOp::MFMA_F16);
}

TEST_CASE("gfx11 WMMA rejects lanes 16-31 that do not replicate lanes 0-15") {
    std::vector<_Float16> a(32 * 16, static_cast<_Float16>(1.0f)), b(32 * 16, static_cast<_Float16>(1.0f));
    std::vector<float> c(32 * 8, 0.0f), d(32 * 8);
    b[20 * 16 + 3] = static_cast<_Float16>(2.0f);
    CHECK_THROWS_WITH(emu::wave_matrix_op(emu::MatrixOp::WMMA_GFX11, a.data(), b.data(), c.data(), d.data()),
                      Catch::Contains("lanes 16-31 do not replicate lanes 0-15 (lane 20)"));
}

// ---- scheduling rules, with small kernels written against the emulator's lane API ----
namespace {

int32_t g_out[1024];

void exchange_through_lds(const void*) {  // every work-item reads a value another wave wrote
    uint32_t t = emu::workitem_id(0), n = emu::workgroup_size(0);
    auto* lds = static_cast<int32_t*>(emu::lds_alloc(n * 4, 4));
    lds[t] = static_cast<int32_t>(t * 3 + emu::workgroup_id(0));
    emu::barrier(__LINE__);
    g_out[emu::workgroup_id(0) * n + t] = lds[(t + 37) % n];
}

void swizzle_in_one_branch(const void*) {
    uint32_t lane = emu::workitem_id(0) % 32;
    if (lane < 16) g_out[lane] = emu::ds_swizzle(1, 0x1f | (1 << 10), __LINE__);
    else g_out[lane] = emu::ds_swizzle(2, 0x1f | (2 << 10), __LINE__);
}

void swizzle_after_early_exit(const void*) {
    uint32_t lane = emu::workitem_id(0) % 32;
    if (lane >= 16) return;
    g_out[lane] = emu::ds_swizzle(static_cast<int32_t>(lane + 1), 0x1f | (16 << 10), __LINE__);  // reads exited lanes
}

void wmma_after_early_exit(const void*) {
    if (emu::workitem_id(0) == 7) return;
    _Float16 a[16] = {}, b[16] = {};
    float c[8] = {}, d[8];
    emu::matrix_op(emu::MatrixOp::WMMA_GFX11, a, b, c, d, __LINE__);
}

void barrier_against_swizzle(const void*) {
    if (emu::workitem_id(0) % 32 < 16) emu::barrier(__LINE__);
    else emu::ds_swizzle(0, 0x1f, __LINE__);
}

void too_much_lds(const void*) { emu::lds_alloc(48 * 1024, 4), emu::lds_alloc(20 * 1024, 4); }

}  // namespace

TEST_CASE("a barrier orders LDS writes and reads across the waves of a work-group") {
    emu::run_grid("lds", exchange_through_lds, nullptr, Target::GFX1100, {256, 1, 1}, {128, 1, 1});
    for (uint32_t g = 0; g < 2; g++)
        for (uint32_t t = 0; t < 128; t++) REQUIRE(g_out[g * 128 + t] == static_cast<int32_t>((t + 37) % 128 * 3 + g));
}

TEST_CASE("the emulator rejects a cross-lane op reached by only part of a wave") {
    CHECK_THROWS_WITH(emu::run_grid("branch", swizzle_in_one_branch, nullptr, Target::GFX1100, {32, 1, 1}, {32, 1, 1}),
                      Catch::Contains("divergent cross-lane op"));
    CHECK_THROWS_WITH(emu::run_grid("barrier", barrier_against_swizzle, nullptr, Target::GFX1100, {32, 1, 1}, {32, 1, 1}),
                      Catch::Contains("divergent barrier"));
}

TEST_CASE("lanes that have exited are inactive: swizzle reads 0 from them, a matrix op refuses to run") {
    emu::run_grid("exit", swizzle_after_early_exit, nullptr, Target::GFX1100, {32, 1, 1}, {32, 1, 1});
    for (int l = 0; l < 16; l++) CHECK(g_out[l] == 0);
    CHECK_THROWS_WITH(emu::run_grid("wmma", wmma_after_early_exit, nullptr, Target::GFX1100, {32, 1, 1}, {32, 1, 1}),
                      Catch::Contains("partial EXEC") && Catch::Contains("lane 7 of wave 0"));
}

TEST_CASE("LDS beyond 64 KiB per work-group is an error") {
    CHECK_THROWS_WITH(emu::run_grid("lds", too_much_lds, nullptr, Target::GFX1100, {32, 1, 1}, {32, 1, 1}),
                      Catch::Contains("exceeds the 65536 bytes"));
}
