// The engine's generated kernels as real amdgcn code: every kernel of a model-like set of graphs is
// compiled in process (LLVM 19 + lld) for gfx1100, gfx1201, gfx90a and gfx942, and each code object is
// checked: the kernel and its descriptor load, no scratch, the wave size and workgroup limit of the target,
// and a disassembly (llvm-objdump-19) of global memory instructions, no flat or scratch accesses.
#include "amd_engine_test_util.h"

#include "devices/amd/amd.h"
#include "devices/amd/amdgcn_compiler.h"

#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>

using namespace amd_engine_test;
using engine::f16;
using engine::f32;

namespace {

// Compiles nothing and runs nothing: records the amdgcn kernels the engine renders (host memory, like NULL).
class RecordingDevice final : public devices::Device {
public:
    std::vector<devices::KernelSource> kernels;
    const std::string& name() const override { return name_; }
    devices::Target target() const override { return {devices::Arch::AMDGCN, "gfx1100"}; }
    devices::Memory alloc(size_t bytes) override {
        void* p = std::calloc(1, bytes ? bytes : 1);
        return {reinterpret_cast<uint64_t>(p), p, bytes, false};
    }
    void free(devices::Memory& m) override {
        std::free(m.host);
        m = {};
    }
    void copy_in(const devices::Memory& dst, size_t offset, const void* src, size_t bytes) override {
        std::memcpy(static_cast<char*>(dst.host) + offset, src, bytes);
    }
    void copy_out(void* dst, const devices::Memory& src, size_t offset, size_t bytes) override {
        std::memcpy(dst, static_cast<const char*>(src.host) + offset, bytes);
    }
    std::shared_ptr<devices::Program> compile(const devices::KernelSource& src) override {
        kernels.push_back(src);
        return std::make_shared<devices::Program>();
    }
    void launch(const devices::Program&, const devices::LaunchArgs&) override {}
    void launch_hand_kernel(const std::string&, std::span<const uint8_t>) override {}
    void synchronize() override {}

private:
    std::string name_ = "AMDRECORD";
};

RecordingDevice* recorder() {
    static RecordingDevice* r = [] {
        auto* dev = new RecordingDevice;
        devices::register_device("AMDRECORD", [dev] { return std::unique_ptr<devices::Device>(dev); });
        return dev;
    }();
    return r;
}

// The generated kernels of a small transformer block: norms, RoPE at a symbolic position, the f16 KV
// cache write, SiLU-gated FFN with F32 weights (generated matmul), softmax, an embedding gather.
const std::vector<devices::KernelSource>& block_kernels() {
    static const std::vector<devices::KernelSource> kernels = [] {
        RecordingDevice* rec = recorder();
        DefaultDevice d("AMDRECORD");
        engine::Var pos("start_pos", 0, 60);
        pos.bind(5);
        Tensor emb = on("AMDRECORD", uniform(32 * 64, 1), {32, 64}), w = on("AMDRECORD", uniform(64, 2), {64});
        Tensor ids = Tensor::from_vector(std::vector<int32_t>{3, 1, 4}, {3});
        Tensor x = engine::embedding(emb, ids);
        Tensor h = engine::rms_norm(x, w, 1e-5);
        Tensor q = engine::rope(h.reshape({3, 8, 8}), pos, 8, 10000.0, engine::RopeLayout::NORM);
        Tensor cache = Tensor::empty({64, 8, 8}, f16);
        cache.slice(0, pos, 3).assign(q);
        Tensor wg = on("AMDRECORD", uniform(172 * 64, 3), {172, 64}), wu = on("AMDRECORD", uniform(172 * 64, 4), {172, 64});
        Tensor f = engine::silu(engine::linear(h, wg)) * engine::linear(h, wu);
        Tensor s = engine::softmax(f * 0.5, -1);
        engine::realize({s, cache.slice(0, 0, engine::Dim(pos) + 3).cast(f32).sum(0)});
        return rec->kernels;
    }();
    return kernels;
}

std::string objdump(const std::vector<uint8_t>& code) {
    char name[] = "/tmp/tinyllm-codegen-XXXXXX";
    int fd = mkstemp(name);
    REQUIRE(fd >= 0);
    REQUIRE(write(fd, code.data(), code.size()) == ssize_t(code.size()));
    ::close(fd);
    std::string tool = access("/usr/lib/llvm-19/bin/llvm-objdump", X_OK) == 0 ? "/usr/lib/llvm-19/bin/llvm-objdump" : "llvm-objdump-19";
    FILE* p = popen((tool + " -d " + name + " 2>&1").c_str(), "r");
    REQUIRE(p);
    std::string out;
    std::array<char, 4096> buf;
    size_t n;
    while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) out.append(buf.data(), n);
    int status = pclose(p);
    unlink(name);
    REQUIRE(status == 0);
    return out;
}

}  // namespace

TEST_CASE("amd codegen: every generated kernel compiles to a clean code object on all four targets") {
    const auto& kernels = block_kernels();
    REQUIRE(kernels.size() >= 6);
    for (const char* gfx : {"gfx1100", "gfx1201", "gfx90a", "gfx942"}) {
        bool wave64 = std::string(gfx).rfind("gfx9", 0) == 0;
        for (const auto& k : kernels) {
            INFO(k.name << " for " << gfx);
            std::vector<uint8_t> code = amd::compile_code_object(k.llvm_ir, gfx, k.name);
            amd::CodeObject co = amd::parse_code_object(code, k.name);
            CHECK(co.target == gfx);
            const amd::KernelInfo* info = co.find(k.name);
            REQUIRE(info);
            CHECK(info->private_segment_size == 0);  // no scratch: the device refuses kernels that need it
            CHECK_FALSE(info->dynamic_stack);
            CHECK(info->wavefront_size == (wave64 ? 64u : 32u));
            CHECK(info->max_workgroup_size == 256);
            std::string isa = objdump(code);
            CHECK(isa.find("global_store") != std::string::npos);  // buffers are global memory, not flat
            CHECK(isa.find("flat_load") == std::string::npos);
            CHECK(isa.find("flat_store") == std::string::npos);
            CHECK(isa.find("scratch_") == std::string::npos);
            CHECK(isa.find("s_endpgm") != std::string::npos);
        }
    }
}

TEST_CASE("amd codegen: the host twin is the same kernel taking the GPU's kernarg bytes") {
    const devices::KernelSource& k = block_kernels().front();
    std::vector<uint8_t> code = amd::compile_code_object(k.llvm_ir, "gfx1100", k.name);
    amd::CodeObject co = amd::parse_code_object(code, k.name);
    std::vector<uint32_t> offsets;
    for (const auto& a : co.find(k.name)->args)
        if (!a.hidden()) offsets.push_back(a.offset);
    std::string twin = amd::host_twin_ir(k.llvm_ir, k.name, offsets);
    CHECK(twin.find("define void @" + k.name + ".twin(ptr") != std::string::npos);
    CHECK(twin.find("amdgpu_kernel") == std::string::npos);
    CHECK(twin.find("llvm.amdgcn") == std::string::npos);
    CHECK_THROWS_WITH(amd::host_twin_ir(k.llvm_ir, k.name, std::vector<uint32_t>{0}), Catch::Contains("kernarg offsets for"));
}

TEST_CASE("amd codegen: bad IR and unknown targets are errors that name the kernel") {
    CHECK_THROWS_WITH(amd::compile_code_object("define void @broken( {", "gfx1100", "broken_kernel"),
                      Catch::StartsWith("[devices] AMD: broken_kernel: LLVM IR does not parse"));
    const devices::KernelSource& k = block_kernels().front();
    CHECK_THROWS_WITH(amd::compile_code_object(k.llvm_ir, "gfx950", k.name), Catch::Contains("cannot compile for 'gfx950'"));
    CHECK_THROWS_WITH(amd::host_twin_ir("define void @f() {\n  ret void\n}\n", "f", {}), Catch::Contains("no amdgpu_kernel 'f'"));
}
