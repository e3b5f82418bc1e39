// ISA checks of the embedded code objects, for every kernel and target: the ELF is for the target, the
// kernel's disassembly (llvm-objdump-19) contains the instructions it was written for (dot4, perm, WMMA /
// MFMA, swizzle, nontemporal loads), nothing touches scratch, and the kernel descriptor's LDS, scratch
// and kernarg sizes are what the host expects.
#include "support.h"

#include <catch2/catch.hpp>

#include <elf.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>

using namespace amdtest;

namespace {

std::string tool(const std::string& name) {
    std::string path = "/usr/lib/llvm-19/bin/" + name;
    return access(path.c_str(), X_OK) == 0 ? path : name + "-19";
}

std::string run_command(const std::string& command) {
    std::string out;
    FILE* p = popen(command.c_str(), "r");
    REQUIRE(p != nullptr);
    std::array<char, 4096> buf;
    size_t n;
    while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) out.append(buf.data(), n);
    REQUIRE(pclose(p) == 0);
    return out;
}

struct CodeObjectFile {  // an embedded code object written out for the LLVM tools
    std::string path;
    explicit CodeObjectFile(std::span<const uint8_t> bytes) {
        char name[] = "/tmp/tinyllm_co_XXXXXX";
        int fd = mkstemp(name);
        REQUIRE(fd >= 0);
        REQUIRE(write(fd, bytes.data(), bytes.size()) == static_cast<ssize_t>(bytes.size()));
        close(fd);
        path = name;
    }
    ~CodeObjectFile() { unlink(path.c_str()); }
};

// The instruction lines of one function in `llvm-objdump -d` output.
std::string function_body(const std::string& disassembly, std::string_view name) {
    std::string header = "<" + std::string(name) + ">:";
    size_t begin = disassembly.find(header);
    if (begin == std::string::npos) return "";
    size_t end = disassembly.find(">:\n", begin + header.size());
    return disassembly.substr(begin, end == std::string::npos ? std::string::npos : end - begin);
}

struct Descriptor {
    uint32_t group_segment, private_segment, kernarg_size;
};

// The 64-byte kernel descriptor at symbol `<kernel>.kd` (its first three fields).
std::optional<Descriptor> kernel_descriptor(std::span<const uint8_t> elf, std::string_view kernel, uint32_t& e_flags) {
    Elf64_Ehdr eh;
    REQUIRE(elf.size() >= sizeof(eh));
    std::memcpy(&eh, elf.data(), sizeof(eh));
    REQUIRE(std::memcmp(eh.e_ident, ELFMAG, SELFMAG) == 0);
    e_flags = eh.e_flags;
    std::vector<Elf64_Shdr> sections(eh.e_shnum);
    REQUIRE(eh.e_shoff + sections.size() * sizeof(Elf64_Shdr) <= elf.size());
    std::memcpy(sections.data(), elf.data() + eh.e_shoff, sections.size() * sizeof(Elf64_Shdr));
    std::string want = std::string(kernel) + ".kd";
    for (const Elf64_Shdr& s : sections) {
        if (s.sh_type != SHT_SYMTAB) continue;
        const Elf64_Shdr& strtab = sections.at(s.sh_link);
        for (size_t off = 0; off + sizeof(Elf64_Sym) <= s.sh_size; off += sizeof(Elf64_Sym)) {
            Elf64_Sym sym;
            std::memcpy(&sym, elf.data() + s.sh_offset + off, sizeof(sym));
            const char* name = reinterpret_cast<const char*>(elf.data() + strtab.sh_offset + sym.st_name);
            if (want != name) continue;
            const Elf64_Shdr& home = sections.at(sym.st_shndx);
            size_t at = home.sh_offset + (sym.st_value - home.sh_addr);
            REQUIRE(at + 64 <= elf.size());
            Descriptor d;
            std::memcpy(&d, elf.data() + at, sizeof(d));
            return d;
        }
    }
    return std::nullopt;
}

// `.name: value` fields of one kernel's entry in the code-object metadata note (llvm-readelf --notes).
std::map<std::string, std::string> metadata(const std::string& notes, std::string_view kernel) {
    std::map<std::string, std::string> fields, current;
    auto flush = [&] {
        if (current[".name"] == kernel) fields = current;
        current.clear();
    };
    std::istringstream lines(notes);
    for (std::string line; std::getline(lines, line);) {
        if (line.rfind("  - .", 0) == 0) flush();  // a new kernel record
        size_t key = line.find_first_not_of(" -"), colon = line.find(':');
        if (key == std::string::npos || line[key] != '.' || colon == std::string::npos) continue;
        size_t value = line.find_first_not_of(' ', colon + 1);
        if (value != std::string::npos) current[line.substr(key, colon - key)] = line.substr(value);
    }
    flush();
    return fields;
}

bool rdna(Target t) { return t == Target::GFX1100 || t == Target::GFX1201; }

std::vector<std::string> required_instructions(std::string_view kernel, Target t) {
    std::vector<std::string> need;
    bool gemv_q8 = kernel.rfind("gemv_", 0) == 0 && kernel != "gemv_f16";
    bool gemv = kernel.rfind("gemv_", 0) == 0, gemm = kernel.rfind("gemm_", 0) == 0;
    if (gemv_q8) need.push_back(rdna(t) ? "v_dot4_i32_iu8" : "v_dot4c_i32_i8");
    if (gemv || kernel == "q8_quantize" || kernel.rfind("attn_decode_partial", 0) == 0) {
        need.push_back("ds_swizzle_b32");
        if (!rdna(t) && kernel != "q8_quantize") need.push_back("ds_bpermute_b32");  // the cross-half step of wave64
    }
    if (gemv || gemm) {  // streamed weights: the target's nontemporal load form
        const char* nt = t == Target::GFX1100 ? "slc dlc" : t == Target::GFX1201 ? "th:TH_LOAD_NT" : t == Target::GFX90A ? "glc slc" : " nt";
        need.push_back(nt);
    }
    if (gemm) {
        need.push_back(rdna(t) ? "v_wmma_f32_16x16x16_f16" : t == Target::GFX90A ? "v_mfma_f32_16x16x16f16" : "v_mfma_f32_16x16x16_f16");
    }
    for (const char* lut_or_unaligned : {"iq4_xs", "q8_0", "q4_0"})
        if ((gemv || gemm) && kernel.find(lut_or_unaligned) != std::string::npos) need.push_back("v_perm_b32");
    if (kernel.rfind("attn_decode", 0) == 0) need.push_back("exp_f32");  // v_exp_f32, or v_s_exp_f32 for uniform values on gfx12
    if (kernel.rfind("attn_decode_partial", 0) == 0) need.push_back("s_barrier");
    return need;
}

uint32_t expected_lds(std::string_view kernel) {  // bytes of the LDS arrays the source declares
    if (kernel.rfind("attn_decode_partial_d", 0) != 0) return 0;
    uint32_t d = static_cast<uint32_t>(std::stoul(std::string(kernel.substr(21))));
    return ATTN_WAVES * 8 * d * 2 + ATTN_WAVES * 8 * 2 * 4;  // fp16 accumulators + (max, sum) per wave and head
}

}  // namespace

TEST_CASE("ISA: every kernel's code object has its intended instructions, no scratch, LDS within limits") {
    if (!have_code_objects()) {
        WARN("SKIPPED: built without TINYLLM_AMD, no code objects to check");
        return;
    }
    const std::map<Target, uint32_t> mach = {{Target::GFX1100, 0x41}, {Target::GFX1201, 0x4e}, {Target::GFX90A, 0x3f}, {Target::GFX942, 0x4c}};
    for (Target t : ALL_TARGETS) {
        std::map<std::string_view, std::string> disassembly, notes;  // per source file
        for (const KernelInfo& k : kernels()) {
            INFO(k.name << " on " << target_name(t));
            std::span<const uint8_t> co = code_object(k.name, t);
            if (!disassembly.count(k.source)) {
                CodeObjectFile file(co);
                disassembly[k.source] = run_command(tool("llvm-objdump") + " -d --mcpu=" + std::string(target_name(t)) + " " + file.path);
                notes[k.source] = run_command(tool("llvm-readelf") + " --notes " + file.path);
            }
            uint32_t e_flags = 0;
            std::optional<Descriptor> desc = kernel_descriptor(co, k.name, e_flags);
            REQUIRE(desc);
            CHECK((e_flags & 0xff) == mach.at(t));
            CHECK(desc->kernarg_size == k.kernarg_size);  // no hidden arguments: the host struct is the segment
            CHECK(desc->private_segment == 0);
            CHECK(desc->group_segment == expected_lds(k.name));
            CHECK(desc->group_segment <= 65536);

            std::string body = function_body(disassembly[k.source], k.name);
            REQUIRE(!body.empty());
            for (const std::string& instruction : required_instructions(k.name, t)) {
                INFO("needs " << instruction);
                CHECK(body.find(instruction) != std::string::npos);
            }
            CHECK(body.find("scratch_") == std::string::npos);
            CHECK(body.find("buffer_store") == std::string::npos);  // gfx9 spills go through buffer ops
            CHECK(body.find("buffer_load") == std::string::npos);

            auto meta = metadata(notes[k.source], k.name);
            CHECK(meta[".vgpr_spill_count"] == "0");
            CHECK(meta[".sgpr_spill_count"] == "0");
            CHECK(meta[".wavefront_size"] == std::to_string(wave_size(t)));
            CHECK(meta[".kernarg_segment_size"] == std::to_string(k.kernarg_size));
        }
    }
}
