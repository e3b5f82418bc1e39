// The hot-op registry (devices/ops.h): a device supplies each op's implementation when the graph is
// scheduled, and one without a kernel for an op fails with the op, the device and the type.
#include "engine_test_util.h"

#include "devices/ops.h"
#include "gguf/gguf.h"

#include <cstdlib>
#include <cstring>

using namespace engine;
using namespace etest;

namespace {

// Host memory, host implementations of every op except linear (which it lacks for every type).
class NoLinearDevice final : public devices::Device {
public:
    const std::string& name() const override { return name_; }
    devices::Target target() const override { return {devices::Arch::X86_64, ""}; }
    devices::Memory alloc(size_t bytes) override {
        void* p = std::calloc(1, bytes ? bytes : 1);
        return {reinterpret_cast<uint64_t>(p), p, bytes, false};
    }
    void free(devices::Memory& m) override {
        if (!m.external) std::free(m.host);
        m = {};
    }
    devices::Memory wrap(const void* host, size_t bytes, devices::Access) override {
        return {reinterpret_cast<uint64_t>(host), const_cast<void*>(host), bytes, true};
    }
    void copy_in(const devices::Memory& dst, size_t offset, const void* src, size_t bytes) override {
        std::memcpy(static_cast<char*>(dst.host) + offset, src, bytes);
    }
    void copy_out(void* dst, const devices::Memory& src, size_t offset, size_t bytes) override {
        std::memcpy(dst, static_cast<const char*>(src.host) + offset, bytes);
    }
    std::shared_ptr<devices::Program> compile(const devices::KernelSource& src) override { return devices::get("CPU").compile(src); }
    void launch(const devices::Program& p, const devices::LaunchArgs& a) override { devices::get("CPU").launch(p, a); }
    void run_host(devices::HostFn fn, const void* ctx, int64_t n_work, int64_t grain) override {
        devices::get("CPU").run_host(fn, ctx, n_work, grain);
    }
    devices::ops::Impl op(devices::ops::Kind kind, gguf::Type type, const void* args) const override {
        if (kind == devices::ops::Kind::LINEAR) return {};
        return Device::op(kind, type, args);
    }
    void synchronize() override {}

private:
    std::string name_ = "NOLINEAR";
};

void register_no_linear() {
    static bool once = [] {
        devices::register_device("NOLINEAR", [] { return std::make_unique<NoLinearDevice>(); });
        return true;
    }();
    (void)once;
}

}  // namespace

TEST_CASE("ops: a device without a kernel for an op names the op, the device and the type", "[ops]") {
    register_no_linear();
    std::vector<uint8_t> raw(size_t(*gguf::row_bytes(gguf::Type::Q2_K, 256)) * 16, 0);
    Tensor w = Tensor::from_data(raw.data(), raw.size(), {16, 256}, DType::from_gguf(gguf::Type::Q2_K), "NOLINEAR");
    std::vector<float> ones(256, 1.0f);
    Tensor x = Tensor::from_data(ones.data(), ones.size() * 4, {1, 256}, f32, "NOLINEAR");
    REQUIRE_THROWS_WITH(linear(x, w).realize(), "[linear] NOLINEAR has no kernel for q2_K");
}

TEST_CASE("ops: the same device runs the ops it has (topk) through the host implementations", "[ops]") {
    register_no_linear();
    std::vector<float> v{0.5f, 3.0f, -1.0f, 2.0f};
    Tensor x = Tensor::from_data(v.data(), v.size() * 4, {1, 4}, f32, "NOLINEAR");
    auto [top, idx] = topk(x, 2);
    REQUIRE(idx.to_vector<int32_t>() == std::vector<int32_t>{1, 3});
    REQUIRE(top.to_vector<float>() == std::vector<float>{3.0f, 2.0f});
}
