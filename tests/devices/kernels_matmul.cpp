// Matrix products on random matrices of odd sizes against a naive dequantize-and-dot reference in
// double, for every weight type with a hand kernel and every instruction-set variant; and the errors
// for bad arguments.
#include "devices/cpu/kernels/kernels.h"
#include "kernels_test.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include <unistd.h>

using namespace kernels_test;
namespace ck = cpu_kernels;

namespace {

const Type kTypes[] = {Type::F32,  Type::F16,  Type::BF16, Type::Q8_0, Type::Q4_0,   Type::Q4_1,
                       Type::Q5_0, Type::Q5_1, Type::IQ4_NL, Type::IQ4_XS, Type::Q2_K, Type::Q3_K,
                       Type::Q4_K, Type::Q5_K, Type::Q6_K};

struct Case {
    int64_t n_rows, n_cols, n_tokens;
    bool packed = false;  // the weights as pack_rows() panels (the reference reads the rows)
};

// The types with a panel format (packed.cpp).
const std::vector<Type> kPanelTypes = {Type::Q8_0, Type::Q4_0, Type::Q4_1, Type::Q5_0, Type::Q5_1, Type::IQ4_NL,
                                       Type::IQ4_XS, Type::Q4_K, Type::Q5_K, Type::Q6_K};

// Runs y = W·x for rows [0, n_rows) in two unaligned pieces into a y wider than n_rows, and checks
// every value against the reference and that the padding columns stay untouched.
void check_matmul(Type type, const Case& c, uint64_t seed) {
    Rng rng(seed);
    const std::vector<uint8_t> w = random_weights(rng, type, c.n_rows, c.n_cols);
    const std::vector<float> xf = random_floats(rng, c.n_tokens * c.n_cols);
    const Type act = ck::activation_type(type);
    const int64_t x_row = ck::activation_row_bytes(type, c.n_cols);
    std::vector<uint8_t> x(c.n_tokens * x_row);
    ck::quantize_rows(act, xf.data(), c.n_cols, c.n_cols, x.data(), 0, c.n_tokens);

    const int64_t y_stride = c.n_rows + 3;
    std::vector<float> y(c.n_tokens * y_stride, -12345.0f);
    ck::Matmul m;
    m.type = type, m.w = w.data(), m.n_rows = c.n_rows, m.n_cols = c.n_cols;
    m.x = x.data(), m.n_tokens = c.n_tokens, m.y = y.data(), m.y_stride = y_stride;
    std::vector<uint8_t> panels(c.packed ? w.size() : 0, 0xA5);
    if (c.packed) {
        const int64_t n_panels = c.n_rows / ck::kPanelRows;
        ck::pack_rows(type, w.data(), c.n_rows, c.n_cols, panels.data(), 0, n_panels / 2);  // in two pieces
        ck::pack_rows(type, w.data(), c.n_rows, c.n_cols, panels.data(), n_panels / 2, n_panels);
        m.w = panels.data(), m.packed = true;
    }
    const int64_t split = c.n_rows / 3;
    ck::matmul(m, split, c.n_rows);
    ck::matmul(m, 0, split);

    const size_t w_row = *gguf::row_bytes(type, c.n_cols);
    int64_t bad = 0;
    for (int64_t t = 0; t < c.n_tokens; t++) {
        for (int64_t r = 0; r < c.n_rows; r++) {
            const RefDot ref = reference_dot(type, &w[r * w_row], &x[t * x_row], c.n_cols);
            const float got = y[t * y_stride + r];
            if (!(std::fabs(got - ref.value) <= 1e-5 * ref.abs_sum + 1e-30)) {
                if (bad++ < 3) FAIL_CHECK("token " << t << " row " << r << ": " << got << " vs " << ref.value << " (Σ|w·x| " << ref.abs_sum << ")");
            }
        }
        for (int64_t r = c.n_rows; r < y_stride; r++) CHECK(y[t * y_stride + r] == -12345.0f);
    }
    CHECK(bad == 0);
}

// Makes the AMX kernels on or off for the scope (on only where supported).
struct AmxEnabled {
    bool saved = ck::amx_active();
    explicit AmxEnabled(bool on) { ck::set_amx_enabled(on && ck::amx_supported()); }
    ~AmxEnabled() { ck::set_amx_enabled(saved); }
};

// The AVX512 variant runs twice where the CPU has AMX: with its tile kernels and without.
std::vector<std::pair<Isa, bool>> variants_with_amx() {
    std::vector<std::pair<Isa, bool>> v;
    for (Isa isa : supported_isas()) {
        v.push_back({isa, false});
        if (isa == Isa::AVX512 && ck::amx_supported()) v.push_back({isa, true});
    }
    if (!ck::amx_supported()) WARN("this CPU (or OS) has no AMX: its tile kernels are not tested");
    return v;
}

}  // namespace

TEST_CASE("matmul of random matrices matches the dequantize-and-dot reference, every type and variant") {
    for (auto [isa, amx] : variants_with_amx()) {
        ActiveIsa active(isa);
        AmxEnabled tiles(amx);
        for (Type type : kTypes) {
            const int64_t block = gguf::type_traits(type).block_size;
            // columns: a few blocks, and for 32-element blocks an odd count (not a whole 64-element unit)
            std::vector<int64_t> cols = block == 256 ? std::vector<int64_t>{512} : std::vector<int64_t>{320, 224, 96};
            if (block == 1) cols = {256, 100, 37};
            for (int64_t n_cols : cols)
                for (int64_t n_tokens : {1, 3, 17}) {
                    INFO(ck::isa_name(isa) << (amx ? "+amx " : " ") << gguf::type_name(type) << " cols " << n_cols << " tokens " << n_tokens);
                    check_matmul(type, {37, n_cols, n_tokens}, 1000 + n_cols + n_tokens);
                }
        }
    }
}

TEST_CASE("matmul over weights packed as panels matches the reference, every packed type and variant") {
    for (const auto& [isa, amx] : variants_with_amx()) {
        ActiveIsa active(isa);
        AmxEnabled tiles(amx);
        for (Type type : kPanelTypes) {
            const bool k_quant = gguf::type_traits(type).block_size == 256;
            // 1 to 5 panels: the decode kernels take 3 (one token) or 2 (two) side by side, then fewer
            const std::vector<Case> shapes = k_quant ? std::vector<Case>{{64, 512, 0}, {48, 768, 0}, {16, 256, 0}, {80, 256, 0}}
                                                     : std::vector<Case>{{64, 128, 0}, {48, 768, 0}, {16, 64, 0}, {80, 64, 0}};
            for (int64_t n_tokens : {1, 2, 3, 4, 5, 9, 17})  // decode tiles of 1-4 tokens, prefill beyond
                for (Case c : shapes) {
                    c.n_tokens = n_tokens, c.packed = true;
                    INFO(ck::isa_name(isa) << (amx ? "+amx " : " ") << gguf::type_name(type) << " rows " << c.n_rows << " cols " << c.n_cols << " tokens " << n_tokens);
                    check_matmul(type, c, 77 + c.n_rows + n_tokens);  // row ranges split off panel bounds
                }
        }
    }
    CHECK(ck::can_pack(Type::Q8_0, 32, 64));
    CHECK(ck::can_pack(Type::Q4_K, 32, 256));
    CHECK_FALSE(ck::can_pack(Type::Q8_0, 40, 64));   // rows not in whole panels
    CHECK_FALSE(ck::can_pack(Type::Q4_0, 32, 96));   // columns not a multiple of 64
    CHECK_FALSE(ck::can_pack(Type::Q2_K, 32, 256));  // no panel format for this type
    std::vector<uint8_t> w(40 * 34 * 2), out(w.size());
    CHECK_THROWS_WITH(ck::pack_rows(Type::Q8_0, w.data(), 40, 64, out.data(), 0, 2), Catch::StartsWith("[cpu_kernels.pack_rows] q8_0 (40, 64)"));
}

TEST_CASE("unpacking panels gives back the packed rows byte for byte") {
    for (Type type : kPanelTypes) {
        INFO(gguf::type_name(type));
        Rng rng(5);
        const int64_t n_rows = 32, n_cols = 512, row = static_cast<int64_t>(*gguf::row_bytes(type, n_cols));
        std::vector<uint8_t> w = random_weights(rng, type, n_rows, n_cols);
        for (uint8_t& b : w) b = static_cast<uint8_t>(rng.next());  // every bit pattern, scales included
        std::vector<uint8_t> panels(w.size()), back(w.size(), 0);
        ck::pack_rows(type, w.data(), n_rows, n_cols, panels.data(), 0, 2);
        CHECK(panels != w);
        ck::unpack_rows(type, panels.data(), n_rows, n_cols, back.data(), 0, 7);  // ranges that cut panels
        ck::unpack_rows(type, panels.data(), n_rows, n_cols, back.data() + 7 * row, 7, 29);
        ck::unpack_rows(type, panels.data(), n_rows, n_cols, back.data() + 29 * row, 29, 32);
        CHECK(back == w);
    }
    std::vector<uint8_t> w(32 * 18 * 2);
    CHECK_THROWS_WITH(ck::unpack_rows(Type::Q4_0, w.data(), 32, 64, w.data(), 0, 33), Catch::StartsWith("[cpu_kernels.unpack_rows] q4_0"));
}

TEST_CASE("matmul over long rows (split into column slices) matches the reference") {
    for (auto [isa, amx] : variants_with_amx()) {
        ActiveIsa active(isa);
        AmxEnabled tiles(amx);
        for (Type type : {Type::F16, Type::BF16, Type::Q8_0, Type::Q4_0, Type::Q4_1, Type::IQ4_XS, Type::Q4_K, Type::Q5_K, Type::Q6_K}) {
            INFO(ck::isa_name(isa) << (amx ? "+amx " : " ") << gguf::type_name(type));
            check_matmul(type, {20, 2560, 9}, 7);
        }
    }
}

TEST_CASE("matmul rejects bad arguments with a message naming the kernel") {
    std::vector<uint8_t> w(4096), x(4096);
    std::vector<float> y(64);
    ck::Matmul m;
    m.type = Type::Q4_K, m.w = w.data(), m.n_rows = 2, m.n_cols = 100, m.x = x.data(), m.n_tokens = 1;
    m.y = y.data(), m.y_stride = 2;
    CHECK_THROWS_WITH(ck::matmul(m, 0, 2), Catch::StartsWith("[cpu_kernels.matmul] q4_K: n_cols 100 is not a positive multiple of 256"));
    m.n_cols = 256;
    CHECK_THROWS_WITH(ck::matmul(m, 0, 3), Catch::Contains("row range [0, 3) outside 0..2"));
    m.y_stride = 1;
    CHECK_THROWS_WITH(ck::matmul(m, 0, 2), Catch::Contains("y_stride 1 < n_rows"));
    m.y_stride = 2, m.type = Type::I32;
    CHECK_THROWS_WITH(ck::matmul(m, 0, 2), Catch::Contains("i32: no hand kernel and no dequantizer"));
    m.type = static_cast<Type>(1000);
    CHECK_THROWS_WITH(ck::matmul(m, 0, 2), Catch::Contains("unknown weight type id 1000"));
    m.type = Type::Q8_0, m.n_cols = 32, m.x = nullptr;
    CHECK_THROWS_WITH(ck::matmul(m, 0, 2), Catch::Contains("null pointer"));
    CHECK_THROWS_AS(ck::quantize_rows(Type::Q4_0, nullptr, 32, 32, nullptr, 0, 1), ck::Error);
    CHECK_THROWS_WITH(ck::quantize_rows(Type::Q8_K, y.data(), 32, 32, x.data(), 0, 1),
                      Catch::StartsWith("[cpu_kernels.quantize_rows] q8_K: n_cols 32"));
}

TEST_CASE("activation quantizers agree across variants on exact ties, zeros and odd row counts") {
    // Values at exactly k + 0.5 times the step: roundf (Q8_0/Q8_1) and round-to-even (Q8_K) differ there.
    Rng rng(3);
    const int64_t n_rows = 7, n_cols = 512;
    std::vector<float> x = random_floats(rng, n_rows * n_cols);
    for (int64_t i = 0; i < n_cols; i++) {
        x[i] = (i % 32 == 0) ? 127.0f : static_cast<float>(i % 61) - 30.5f;  // row 0: ties against amax 127
        x[n_cols + i] = 0.0f;                                                // row 1: all zero
        x[2 * n_cols + i] = (i % 256 == 3) ? -127.0f : static_cast<float>(i % 37) - 17.5f;
    }
    x[3 * n_cols + 7] = std::ldexp(1.0f, -140);  // a subnormal
    for (Type act : {Type::Q8_0, Type::Q8_1, Type::Q8_K, Type::F16, Type::BF16}) {
        const size_t row_bytes = *gguf::row_bytes(act, n_cols);
        std::vector<uint8_t> want(n_rows * row_bytes);
        {
            ActiveIsa scalar(Isa::SCALAR);
            ck::quantize_rows(act, x.data(), n_cols, n_cols, want.data(), 0, n_rows);
        }
        for (Isa isa : supported_isas()) {
            ActiveIsa active(isa);
            std::vector<uint8_t> got(n_rows * row_bytes, 0xAA);
            ck::quantize_rows(act, x.data(), n_cols, n_cols, got.data(), 0, n_rows);
            INFO(ck::isa_name(isa) << " " << gguf::type_name(act));
            CHECK(std::memcmp(got.data(), want.data(), got.size()) == 0);
        }
    }
}

TEST_CASE("Q8_0 and Q8_1 quantizers agree across variants on rows of any block count") {
    // AVX-512 quantizes 16 blocks at a time: rows of 1-23 blocks end inside a batch, and every block
    // gets its own magnitude so a block given another's scale shows.
    Rng rng(11);
    for (int64_t n_cols : {32, 96, 480, 544, 736}) {
        std::vector<float> x = random_floats(rng, 3 * n_cols);
        for (int64_t i = 0; i < 3 * n_cols; i++) x[i] *= std::ldexp(1.0f, static_cast<int>((i / 32) % 13) - 6);
        for (Type act : {Type::Q8_0, Type::Q8_1}) {
            std::vector<uint8_t> want(3 * *gguf::row_bytes(act, n_cols));
            {
                ActiveIsa scalar(Isa::SCALAR);
                ck::quantize_rows(act, x.data(), n_cols, n_cols, want.data(), 0, 3);
            }
            for (Isa isa : supported_isas()) {
                ActiveIsa active(isa);
                std::vector<uint8_t> got(want.size(), 0xAA);
                ck::quantize_rows(act, x.data(), n_cols, n_cols, got.data(), 0, 3);
                INFO(ck::isa_name(isa) << " " << gguf::type_name(act) << " cols " << n_cols);
                CHECK(std::memcmp(got.data(), want.data(), got.size()) == 0);
            }
        }
    }
}

TEST_CASE("matmul split over threads gives the same bits as one call") {
    // The engine splits rows across its thread pool; each row must not depend on the split.
    for (Isa isa : supported_isas()) {
        ActiveIsa active(isa);
        for (Type type : {Type::F16, Type::Q8_0, Type::Q4_K}) {
            for (int64_t n_tokens : {1, 9}) {
                Rng rng(11);
                const int64_t n_rows = 100, n_cols = 512;
                const std::vector<uint8_t> w = random_weights(rng, type, n_rows, n_cols);
                const std::vector<float> xf = random_floats(rng, n_tokens * n_cols);
                std::vector<uint8_t> x(n_tokens * ck::activation_row_bytes(type, n_cols));
                ck::quantize_rows(ck::activation_type(type), xf.data(), n_cols, n_cols, x.data(), 0, n_tokens);
                ck::Matmul m;
                m.type = type, m.w = w.data(), m.n_rows = n_rows, m.n_cols = n_cols;
                m.x = x.data(), m.n_tokens = n_tokens, m.y_stride = n_rows;
                std::vector<float> one(n_tokens * n_rows), split(n_tokens * n_rows);
                m.y = one.data();
                ck::matmul(m, 0, n_rows);
                m.y = split.data();
                std::vector<std::thread> threads;
                for (int64_t r0 : {0, 16, 48})  // uneven, unaligned ends
                    threads.emplace_back([&m, r0] { ck::matmul(m, r0, r0 == 48 ? m.n_rows : r0 == 0 ? 16 : 48); });
                for (auto& th : threads) th.join();
                INFO(ck::isa_name(isa) << " " << gguf::type_name(type) << " tokens " << n_tokens);
                CHECK(std::memcmp(one.data(), split.data(), one.size() * sizeof(float)) == 0);
            }
        }
    }
}

// Prefill over float weights (from 8 tokens on) sums each output as one FMA chain along its row, in
// column order, on the AVX2 and AVX-512 variants alike: the same bits on both, whatever the row length
// (column slices) or the rows and tokens left over. (AMX's bf16 tiles sum in another order: off here.)
TEST_CASE("prefill over F32 F16 and BF16 weights gives the bits of one FMA chain per output on AVX2 and AVX-512") {
    AmxEnabled tiles(false);
    std::vector<Isa> isas;
    for (Isa isa : supported_isas())
        if (isa != Isa::SCALAR) isas.push_back(isa);
    for (Type type : {Type::F32, Type::F16, Type::BF16})
        for (const Case& c : {Case{37, 96, 13}, Case{50, 1100, 9}, Case{16, 40, 8}}) {
            Rng rng(23);
            const std::vector<uint8_t> w = random_weights(rng, type, c.n_rows, c.n_cols);
            const std::vector<float> xf = random_floats(rng, c.n_tokens * c.n_cols);
            const int64_t x_row = ck::activation_row_bytes(type, c.n_cols), w_row = *gguf::row_bytes(type, c.n_cols);
            std::vector<uint8_t> x(c.n_tokens * x_row);
            ck::quantize_rows(ck::activation_type(type), xf.data(), c.n_cols, c.n_cols, x.data(), 0, c.n_tokens);
            auto value = [type](const uint8_t* row, int64_t i) {
                uint16_t h;
                std::memcpy(&h, row + 2 * i, 2);
                if (type == Type::F32) {
                    float f;
                    std::memcpy(&f, row + 4 * i, 4);
                    return f;
                }
                return type == Type::F16 ? gguf::f16_to_f32(h) : gguf::bf16_to_f32(h);
            };
            std::vector<float> chain(c.n_tokens * c.n_rows);
            for (int64_t t = 0; t < c.n_tokens; t++)
                for (int64_t r = 0; r < c.n_rows; r++) {
                    float acc = 0.0f;
                    for (int64_t i = 0; i < c.n_cols; i++) acc = std::fma(value(&w[r * w_row], i), value(&x[t * x_row], i), acc);
                    chain[t * c.n_rows + r] = acc;
                }
            for (Isa isa : isas) {
                ActiveIsa active(isa);
                ck::Matmul m;
                m.type = type, m.w = w.data(), m.n_rows = c.n_rows, m.n_cols = c.n_cols;
                m.x = x.data(), m.n_tokens = c.n_tokens, m.y_stride = c.n_rows;
                std::vector<float> y(c.n_tokens * c.n_rows);
                m.y = y.data();
                ck::matmul(m, 0, c.n_rows / 3), ck::matmul(m, c.n_rows / 3, c.n_rows);
                INFO(ck::isa_name(isa) << " " << gguf::type_name(type) << " " << c.n_rows << "x" << c.n_cols << ", " << c.n_tokens << " tokens");
                CHECK(std::memcmp(y.data(), chain.data(), y.size() * sizeof(float)) == 0);
            }
        }
}

// The CPU device keys each product's activations (Matmul::acts_key) so that a thread prepares them once
// for all its row ranges of it: ranges in any order, panel cuts (whose rows go to the matrix-vector
// kernel, which takes the scratch slot in between) and a new x under a new key must all give the bits
// of the same calls without a key.
TEST_CASE("matmul row ranges of one product sharing an activations key give the bits of unkeyed calls") {
    for (const auto& [isa, amx] : variants_with_amx()) {
        ActiveIsa active(isa);
        AmxEnabled tiles(amx);
        for (Type type : {Type::Q8_0, Type::Q4_0, Type::Q5_1, Type::IQ4_XS, Type::Q4_K, Type::Q5_K, Type::Q6_K, Type::Q3_K})
            for (bool packed : {false, true}) {
                if (packed && !ck::can_pack(type, 96, 512)) continue;
                Rng rng(5);
                const int64_t n_rows = 96, n_cols = 512, n_tokens = 21;
                const std::vector<uint8_t> w = random_weights(rng, type, n_rows, n_cols);
                std::vector<uint8_t> panels(w.size());
                if (packed) ck::pack_rows(type, w.data(), n_rows, n_cols, panels.data(), 0, n_rows / ck::kPanelRows);
                std::vector<uint8_t> x(n_tokens * ck::activation_row_bytes(type, n_cols));
                ck::Matmul m;
                m.type = type, m.w = packed ? panels.data() : w.data(), m.packed = packed;
                m.n_rows = n_rows, m.n_cols = n_cols, m.x = x.data(), m.n_tokens = n_tokens, m.y_stride = n_rows;
                for (uint64_t key : {41, 42}) {  // a new x for the second key
                    const std::vector<float> xf = random_floats(rng, n_tokens * n_cols);
                    ck::quantize_rows(ck::activation_type(type), xf.data(), n_cols, n_cols, x.data(), 0, n_tokens);
                    std::vector<float> unkeyed(n_tokens * n_rows), keyed(n_tokens * n_rows);
                    for (auto [y, k] : {std::pair{unkeyed.data(), uint64_t(0)}, {keyed.data(), key}}) {
                        m.y = y, m.acts_key = k;
                        for (auto [r0, r1] : {std::pair<int64_t, int64_t>{32, 64}, {0, 16}, {64, 70}, {70, 96}, {16, 32}}) ck::matmul(m, r0, r1);
                    }
                    INFO(ck::isa_name(isa) << (amx ? "+amx " : " ") << gguf::type_name(type) << (packed ? " packed" : "") << " key " << key);
                    CHECK(std::memcmp(unkeyed.data(), keyed.data(), keyed.size() * sizeof(float)) == 0);
                }
            }
    }
}

namespace {

// y = W·x on the active variant for random W, x of one type and shape.
std::vector<float> run_matmul(Type type, const Case& c, uint64_t seed, double* abs_bound) {
    Rng rng(seed);
    const std::vector<uint8_t> w = random_weights(rng, type, c.n_rows, c.n_cols);
    const std::vector<float> xf = random_floats(rng, c.n_tokens * c.n_cols);
    const int64_t x_row = ck::activation_row_bytes(type, c.n_cols);
    std::vector<uint8_t> x(c.n_tokens * x_row);
    ck::quantize_rows(ck::activation_type(type), xf.data(), c.n_cols, c.n_cols, x.data(), 0, c.n_tokens);
    ck::Matmul m;
    m.type = type, m.w = w.data(), m.n_rows = c.n_rows, m.n_cols = c.n_cols;
    m.x = x.data(), m.n_tokens = c.n_tokens, m.y_stride = c.n_rows;
    std::vector<float> y(c.n_tokens * c.n_rows);
    m.y = y.data();
    ck::matmul(m, 0, c.n_rows);
    if (abs_bound) {  // the largest Σ|w·x| of any output: the scale of fp32 rounding differences
        const size_t w_row = *gguf::row_bytes(type, c.n_cols);
        *abs_bound = 0;
        for (int64_t t = 0; t < c.n_tokens; t++)
            for (int64_t r = 0; r < c.n_rows; r++)
                *abs_bound = std::max(*abs_bound, reference_dot(type, &w[r * w_row], &x[t * x_row], c.n_cols).abs_sum);
    }
    return y;
}

// The same product on the AVX-512 kernels and on the AMX tiles; `bound` as run_matmul's.
std::pair<std::vector<float>, std::vector<float>> without_and_with_amx(Type type, const Case& c, uint64_t seed, double& bound) {
    std::vector<float> plain, tiles;
    {
        AmxEnabled off(false);
        plain = run_matmul(type, c, seed, &bound);
    }
    {
        AmxEnabled on(true);
        REQUIRE(ck::amx_active());
        tiles = run_matmul(type, c, seed, nullptr);
    }
    return {plain, tiles};
}

}  // namespace

TEST_CASE("AMX tiles compute the AVX-512 kernels' integer dot products") {
    if (!ck::amx_supported()) {
        WARN("this CPU (or OS) has no AMX: skipped");
        return;
    }
    ActiveIsa active(Isa::AVX512);
    // Rows not a multiple of 16, tokens not a multiple of 16 (a partial tile of tokens), one super-block, long rows
    // split into column slices.
    const Case cases[] = {{37, 320, 5}, {16, 64, 16}, {7, 512, 33}, {50, 2560, 21}, {20, 256, 17}};
    for (Type type : kTypes) {
        if (!ck::quant_layout(type)) continue;
        for (const Case& c : cases) {
            if (c.n_cols % gguf::type_traits(type).block_size != 0) continue;
            INFO(gguf::type_name(type) << " rows " << c.n_rows << " cols " << c.n_cols << " tokens " << c.n_tokens);
            double bound = 0;
            const auto [plain, tiles] = without_and_with_amx(type, c, 77, bound);
            // The same integers scaled in the same order (super-block types: a super-block's groups
            // summed before d_x on both), so the same bits.
            int64_t differ = 0;
            for (size_t i = 0; i < plain.size(); i++)
                if (plain[i] != tiles[i] && differ++ < 3) FAIL_CHECK("output " << i << ": avx512 " << plain[i] << " amx " << tiles[i]);
            CHECK(differ == 0);
        }
    }
}

TEST_CASE("AMX bf16 tiles compute F16 and BF16 products exactly, as the FMA kernel does up to the order of sums") {
    if (!ck::amx_supported()) {
        WARN("this CPU (or OS) has no AMX: skipped");
        return;
    }
    ActiveIsa active(Isa::AVX512);
    // Partial panels and token blocks, and rows longer than one 1024-column slice.
    const Case cases[] = {{37, 320, 17}, {16, 64, 16}, {7, 512, 33}, {50, 2560, 21}, {33, 1056, 8}};
    for (Type type : {Type::F16, Type::BF16})
        for (const Case& c : cases) {
            INFO(gguf::type_name(type) << " rows " << c.n_rows << " cols " << c.n_cols << " tokens " << c.n_tokens);
            double bound = 0;
            const auto [plain, tiles] = without_and_with_amx(type, c, 91, bound);
            int64_t differ = 0;
            for (size_t i = 0; i < plain.size(); i++)
                if (!(std::fabs(plain[i] - tiles[i]) <= 2e-7 * bound) && differ++ < 3)
                    FAIL_CHECK("output " << i << ": avx512 " << plain[i] << " amx " << tiles[i] << " (bound " << bound << ")");
            CHECK(differ == 0);
        }
}

TEST_CASE("the AMX kernels turn off cleanly: set_amx_enabled(false), other variants, TINYLLM_CPU_AMX=0") {
    {
        AmxEnabled off(false);
        CHECK_FALSE(ck::amx_active());
        ActiveIsa active(Isa::AVX512);
        check_matmul(Type::Q8_0, {37, 320, 17}, 5);  // the AVX-512 kernels still right
    }
    if (ck::amx_supported()) {
        AmxEnabled on(true);
        CHECK(ck::amx_active());
        ActiveIsa avx2(Isa::AVX2);
        CHECK_FALSE(ck::amx_active());  // a capability of the AVX512 variant only
        check_matmul(Type::Q4_0, {37, 320, 17}, 6);
    } else {
        CHECK_THROWS_WITH(ck::set_amx_enabled(true), Catch::StartsWith("[cpu_kernels] AMX: not supported"));
    }
    // The environment is read once per process: ask fresh ones (this executable, a hidden test).
    char self[4096];
    const ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    REQUIRE(n > 0);
    self[n] = '\0';
    const std::string child = std::string("'") + self + "' '[amx_env_child]' 2>&1";
    CHECK(std::system(("TINYLLM_CPU_AMX=0 " + child + " > /dev/null").c_str()) == 0);
    FILE* out = popen(("TINYLLM_CPU_AMX=maybe " + child).c_str(), "r");
    REQUIRE(out);
    std::string text;
    char buf[512];
    while (size_t got = fread(buf, 1, sizeof buf, out)) text.append(buf, got);
    CHECK(pclose(out) != 0);
    CHECK_THAT(text, Catch::Contains("[cpu_kernels] TINYLLM_CPU_AMX=maybe: expected 0 or 1"));
}

// Run by the test above in a child process with TINYLLM_CPU_AMX set.
TEST_CASE("AMX off by environment (child process)", "[.][amx_env_child]") {
    CHECK_FALSE(ck::amx_active());
    check_matmul(Type::Q8_0, {37, 320, 17}, 5);
}
