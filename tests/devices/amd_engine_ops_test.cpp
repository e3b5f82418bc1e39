// The engine on "AMD" over the fake /dev/kfd: memory, generated kernels (compiled to gfx1100 code objects,
// loaded, dispatched through the AQL queue, run by the fake GPU as host twins of the same IR) against the
// CPU device, Jit capture/replay, and the errors a user can meet (no GPU, a tensor of another device).
#include "amd_engine_test_util.h"

#include "devices/device.h"

using namespace amd_engine_test;
using engine::f16;
using engine::f32;
using engine::i32;

namespace {

// The same graph built on `device` (its default device while building), realized, copied to the host.
template <class F>
std::vector<float> on_device(const std::string& device, F&& build) {
    DefaultDevice d(device);
    return build().template to_vector<float>();
}

}  // namespace

TEST_CASE("amd engine: no GPU is a clear error, not a crash") {
    amd::FakeKfdOptions no_kfd{.kfd_present = false, .gpus = {}}, no_gpu{.kfd_present = true, .gpus = {}};
    CHECK_THROWS_WITH(amd::make_fake_engine_device(no_kfd), Catch::StartsWith("[devices] AMD: no AMD GPU: /dev/kfd does not exist"));
    CHECK_THROWS_WITH(amd::make_fake_engine_device(no_gpu), Catch::Contains("KFD lists no GPU"));
    CHECK_THROWS_WITH(amd::make_fake_engine_device("gfx950"), Catch::Contains("no fake GPU for 'gfx950'"));
}

TEST_CASE("amd engine: memory is GPU memory: zero-filled, copies at offsets, ranges checked") {
    devices::Device& dev = devices::get(fake_amd());
    CHECK(dev.target().arch == devices::Arch::AMDGCN);
    CHECK(dev.target().cpu == "gfx1100");
    devices::Memory m = dev.alloc(1000);
    CHECK(m.handle != 0);
    std::vector<uint8_t> out(1000, 0xff);
    dev.copy_out(out.data(), m, 0, out.size());
    CHECK(out == std::vector<uint8_t>(1000, 0));
    std::vector<uint8_t> in(100);
    for (size_t i = 0; i < in.size(); i++) in[i] = uint8_t(i + 1);
    dev.copy_in(m, 900, in.data(), in.size());
    std::vector<uint8_t> back(100);
    dev.copy_out(back.data(), m, 900, back.size());
    CHECK(back == in);
    CHECK_THROWS_WITH(dev.copy_in(m, 950, in.data(), in.size()), Catch::Contains("exceeds a 1000-byte buffer"));
    devices::Memory stranger{m.handle + 4096 * 1024, nullptr, 16, false};
    CHECK_THROWS_WITH(dev.copy_out(back.data(), stranger, 0, 16), Catch::Contains("not memory of this GPU"));
    dev.free(m);
    CHECK(m.handle == 0);
}

TEST_CASE("amd engine: generated elementwise, reduce and gather kernels match the CPU") {
    std::string amd = fake_amd();
    auto graph = [] {
        std::string dev = engine::default_device();
        Tensor x = on(dev, uniform(6 * 40, 1, -3.0f, 3.0f), {6, 40});
        Tensor w = on(dev, uniform(40, 2), {40});
        Tensor h = engine::silu(engine::rms_norm(x, w, 1e-5)) + engine::softmax(x * 2.0, -1);   // norms, exp, reductions
        Tensor r = engine::rope(x.reshape({6, 5, 8}), 3, 8, 10000.0, engine::RopeLayout::NEOX); // sin/cos
        Tensor half = (x.cast(f16) * 1.5).cast(f32) + x.max(1, true).cast(engine::bf16).cast(f32);
        Tensor ids = (Tensor::arange(12).cast(i32) * 7 % 6).reshape({12});
        Tensor rows = engine::embedding(x, ids);                                                // gather (12, 40)
        Tensor ints = (Tensor::arange(240).cast(i32) % 7 - 3).cast(f32).reshape({6, 40});
        return engine::concat({h, r.reshape({6, 40}), half, rows.sum(0, true), ints}, 0);
    };
    std::vector<float> want = on_device("CPU", graph), got = on_device(amd, graph);
    REQUIRE(got.size() == 25 * 40);
    require_close(got, want, 1e-5, 1e-5, "AMD vs CPU");
}

TEST_CASE("amd engine: F32 weights multiply in a generated kernel, one work-item per output") {
    std::string amd = fake_amd();
    auto graph = [] {
        std::string dev = engine::default_device();
        Tensor x = on(dev, uniform(3 * 64, 3), {3, 64});
        Tensor w = on(dev, uniform(172 * 64, 4), {172, 64});  // stories260K's FFN: 172 rows, no block multiple
        return engine::linear(x, w);
    };
    std::vector<float> want = on_device("CPU", graph), got = on_device(amd, graph);
    require_close(got, want, 1e-5, 1e-5, "x W^T");
    bool generated = false;
    for (const auto& k : engine::last_schedule()) generated |= !k.custom && k.has_reduce;
    CHECK(generated);
}

TEST_CASE("amd engine: Jit capture and replay with a Var run on the GPU") {
    std::string amd = fake_amd();
    DefaultDevice d(amd);
    engine::Var pos("pos", 0, 15);
    Tensor cache = Tensor::empty({16, 8}, f32);
    Tensor row = Tensor::empty({1, 8}, f32);
    engine::Jit jit([&](const std::vector<Tensor>& in) {
        cache.slice(0, pos, 1).assign(in[0] * 2.0);
        return std::vector<Tensor>{cache.slice(0, 0, engine::Dim(pos) + 1).sum(0)};
    });
    std::vector<float> expect(8, 0.0f);
    for (int p = 0; p < 4; p++) {
        std::vector<float> v = uniform(8, 10 + p);
        row.copy_from(v.data(), v.size() * 4);
        pos.bind(p);
        uint64_t compiles = engine::stats().compiles;
        std::vector<float> got = jit({row})[0].to_vector<float>();
        if (p > 0) CHECK(engine::stats().compiles == compiles);  // replays compile nothing
        for (int i = 0; i < 8; i++) expect[i] += 2.0f * v[i];
        require_close(got, expect, 1e-6, 1e-6, "running sum at pos " + std::to_string(p));
    }
    CHECK(jit.n_captured() == 1);
}

TEST_CASE("amd engine: a tensor on another device is refused before the GPU sees it") {
    std::string amd = fake_amd();
    Tensor a = on(amd, uniform(64, 5), {64});
    Tensor c = on("CPU", uniform(64, 6), {64});
    CHECK_THROWS_WITH((a + c).realize(), Catch::Contains("not memory of this GPU (a tensor on another device?)"));
}

TEST_CASE("amd engine: set_default_device names the problem with a device") {
    CHECK_THROWS_WITH(engine::set_default_device("TPU"), Catch::Contains("unknown device 'TPU'"));
    CHECK(engine::default_device() == "CPU");
}
