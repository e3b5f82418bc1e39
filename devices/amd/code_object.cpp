// ELF code objects for amdgcn-amd-amdhsa: kernels from the metadata note (msgpack) and the <name>.kd
// descriptors, and the loaded image. Facts: https://llvm.org/docs/AMDGPUUsage.html (ELF, note records,
// kernel descriptor). Every offset and size is checked: a corrupt file is an amd::Error.
#include "devices/amd/code_object.h"
#include "devices/amd/msgpack.h"

#include <elf.h>

#include <algorithm>
#include <cstdio>
#include <cstring>

namespace amd {

namespace {

constexpr uint8_t ELFOSABI_AMDGPU_HSA = 64;
constexpr uint32_t NT_AMDGPU_METADATA = 32;
constexpr uint32_t R_AMDGPU_ABS64 = 3;
constexpr uint32_t R_AMDGPU_RELATIVE64 = 13;
constexpr uint64_t MAX_IMAGE_BYTES = 1ull << 30;

struct MachName {
    uint32_t mach;
    const char* target;
};
// EF_AMDGPU_MACH values (llvm/BinaryFormat/ELF.h) of the targets we may meet.
constexpr MachName MACHS[] = {
    {0x02f, "gfx906"},  {0x030, "gfx908"},  {0x03f, "gfx90a"},  {0x04c, "gfx942"},
    {0x033, "gfx1010"}, {0x036, "gfx1030"}, {0x037, "gfx1031"}, {0x038, "gfx1032"},
    {0x041, "gfx1100"}, {0x046, "gfx1101"}, {0x047, "gfx1102"}, {0x044, "gfx1103"},
    {0x043, "gfx1150"}, {0x04a, "gfx1151"}, {0x048, "gfx1200"}, {0x04e, "gfx1201"},
};

// Reads an ELF either as a file (addresses translate through PT_LOAD file offsets) or as a loaded
// image (addresses are offsets into the bytes).
class Elf {
public:
    Elf(std::span<const uint8_t> bytes, bool loaded, const std::string& where)
        : b_(bytes), loaded_(loaded), where_(where) {
        if (b_.size() < sizeof(Elf64_Ehdr)) fail("too small for an ELF header");
        std::memcpy(&eh_, b_.data(), sizeof eh_);
        if (std::memcmp(eh_.e_ident, ELFMAG, SELFMAG) != 0) fail("not an ELF file");
        if (eh_.e_ident[EI_CLASS] != ELFCLASS64 || eh_.e_ident[EI_DATA] != ELFDATA2LSB)
            fail("not a little-endian ELF64 file");
        if (eh_.e_machine != EM_AMDGPU) fail("not an AMDGPU code object (e_machine " + std::to_string(eh_.e_machine) + ")");
        if (eh_.e_ident[EI_OSABI] != ELFOSABI_AMDGPU_HSA) fail("not an amdhsa code object (OS ABI " + std::to_string(eh_.e_ident[EI_OSABI]) + ")");
        if (eh_.e_type != ET_DYN) fail("not a linked code object (ET_DYN); link it with ld.lld -shared");
        if (eh_.e_phentsize != sizeof(Elf64_Phdr)) fail("unexpected program header size");
        phdrs_.resize(eh_.e_phnum);
        if (!in(eh_.e_phoff, uint64_t(eh_.e_phnum) * sizeof(Elf64_Phdr), b_.size())) fail("program headers past the end");
        std::memcpy(phdrs_.data(), b_.data() + eh_.e_phoff, phdrs_.size() * sizeof(Elf64_Phdr));
        for (const auto& p : phdrs_) {
            if (p.p_type != PT_LOAD) continue;
            if (p.p_filesz > p.p_memsz) fail("segment file size exceeds its memory size");
            if (!in(p.p_vaddr, p.p_memsz, MAX_IMAGE_BYTES)) fail("segment beyond 1 GiB");
            if (!loaded_ && !in(p.p_offset, p.p_filesz, b_.size())) fail("segment data past the end of the file");
            image_size_ = std::max<uint64_t>(image_size_, p.p_vaddr + p.p_memsz);
        }
    }

    [[noreturn]] void fail(const std::string& what) const { throw Error("[amd] " + where_ + ": " + what); }

    static bool in(uint64_t off, uint64_t n, uint64_t size) { return off <= size && n <= size - off; }

    const Elf64_Ehdr& header() const { return eh_; }
    const std::vector<Elf64_Phdr>& phdrs() const { return phdrs_; }
    uint64_t image_size() const { return image_size_; }

    // `n` bytes at loaded address `va`; they must lie in initialized (file-backed) data.
    std::span<const uint8_t> at(uint64_t va, uint64_t n, const char* what) const {
        if (loaded_) {
            if (!in(va, n, b_.size())) fail(std::string(what) + " lies outside the loaded image");
            return b_.subspan(va, n);
        }
        for (const auto& p : phdrs_)
            if (p.p_type == PT_LOAD && va >= p.p_vaddr && in(va - p.p_vaddr, n, p.p_filesz))
                return b_.subspan(p.p_offset + (va - p.p_vaddr), n);
        fail(std::string(what) + " lies outside the loaded segments");
    }
    template <class T>
    T read(uint64_t va, const char* what) const {
        T t;
        std::memcpy(&t, at(va, sizeof(T), what).data(), sizeof(T));
        return t;
    }
    std::string cstring(uint64_t va, uint64_t limit, const char* what) const {
        auto s = at(va, std::min<uint64_t>(limit, 4096), what);
        auto end = std::find(s.begin(), s.end(), 0);
        if (end == s.end()) fail(std::string(what) + " is not NUL-terminated");
        return std::string(s.begin(), end);
    }
    bool executable(uint64_t va) const {
        for (const auto& p : phdrs_)
            if (p.p_type == PT_LOAD && (p.p_flags & PF_X) && va >= p.p_vaddr && va - p.p_vaddr < p.p_memsz) return true;
        return false;
    }

private:
    std::span<const uint8_t> b_;
    bool loaded_;
    const std::string& where_;
    Elf64_Ehdr eh_;
    std::vector<Elf64_Phdr> phdrs_;
    uint64_t image_size_ = 0;
};

// The dynamic section: symbols and relocations.
struct Dynamic {
    uint64_t symtab = 0, strtab = 0, strsz = 0, hash = 0, gnu_hash = 0, rela = 0, relasz = 0;
    bool has_rel = false;
    std::vector<Elf64_Sym> syms;

    explicit Dynamic(const Elf& elf) {
        for (const auto& p : elf.phdrs()) {
            if (p.p_type != PT_DYNAMIC) continue;
            for (uint64_t off = 0; off + sizeof(Elf64_Dyn) <= p.p_filesz; off += sizeof(Elf64_Dyn)) {
                auto d = elf.read<Elf64_Dyn>(p.p_vaddr + off, "dynamic section");
                if (d.d_tag == DT_NULL) break;
                switch (d.d_tag) {
                case DT_SYMTAB: symtab = d.d_un.d_ptr; break;
                case DT_STRTAB: strtab = d.d_un.d_ptr; break;
                case DT_STRSZ: strsz = d.d_un.d_val; break;
                case DT_HASH: hash = d.d_un.d_ptr; break;
                case DT_GNU_HASH: gnu_hash = d.d_un.d_ptr; break;
                case DT_RELA: rela = d.d_un.d_ptr; break;
                case DT_RELASZ: relasz = d.d_un.d_val; break;
                case DT_SYMENT:
                    if (d.d_un.d_val != sizeof(Elf64_Sym)) elf.fail("unexpected dynamic symbol size");
                    break;
                case DT_REL: has_rel = true; break;
                }
            }
        }
        if (!symtab || !strtab) return;
        uint64_t count = symbol_count(elf);
        if (count > 1 << 20) elf.fail("implausible dynamic symbol count");
        for (uint64_t i = 0; i < count; i++) syms.push_back(elf.read<Elf64_Sym>(symtab + i * sizeof(Elf64_Sym), "dynamic symbol"));
    }

    // DT_HASH states the count (nchain); DT_GNU_HASH needs a walk to the end of the last chain.
    uint64_t symbol_count(const Elf& elf) const {
        if (hash) return elf.read<uint32_t>(hash + 4, "DT_HASH");
        if (!gnu_hash) elf.fail("dynamic symbols without DT_HASH or DT_GNU_HASH");
        uint32_t nbuckets = elf.read<uint32_t>(gnu_hash, "DT_GNU_HASH");
        uint32_t symoffset = elf.read<uint32_t>(gnu_hash + 4, "DT_GNU_HASH");
        uint32_t bloom_size = elf.read<uint32_t>(gnu_hash + 8, "DT_GNU_HASH");
        uint64_t buckets = gnu_hash + 16 + uint64_t(bloom_size) * 8, chains = buckets + uint64_t(nbuckets) * 4;
        uint32_t last = 0;
        for (uint32_t i = 0; i < nbuckets; i++) last = std::max(last, elf.read<uint32_t>(buckets + i * 4ull, "DT_GNU_HASH bucket"));
        if (last < symoffset) return symoffset;
        while (!(elf.read<uint32_t>(chains + (last - symoffset) * 4ull, "DT_GNU_HASH chain") & 1)) last++;
        return uint64_t(last) + 1;
    }

    std::string name(const Elf& elf, const Elf64_Sym& s) const {
        if (s.st_name >= strsz) elf.fail("symbol name outside the string table");
        return elf.cstring(strtab + s.st_name, strsz - s.st_name, "symbol name");
    }
    const Elf64_Sym* find(const Elf& elf, const std::string& n) const {
        for (const auto& s : syms)
            if (s.st_shndx != SHN_UNDEF && name(elf, s) == n) return &s;
        return nullptr;
    }
};

std::string target_of(const Elf& elf, const msgpack::Value* meta) {
    uint32_t mach = elf.header().e_flags & 0xff;
    for (const auto& m : MACHS)
        if (m.mach == mach) return m.target;
    // An unlisted target: take it from the metadata ("amdgcn-amd-amdhsa--gfx1100:xnack-").
    if (const msgpack::Value* t = meta ? meta->get("amdhsa.target") : nullptr; t && t->as_str()) {
        std::string s = *t->as_str();
        size_t p = s.find("--");
        if (p != std::string::npos) return s.substr(p + 2, s.find(':', p) == std::string::npos ? std::string::npos : s.find(':', p) - p - 2);
    }
    char hex[8];
    std::snprintf(hex, sizeof hex, "0x%03x", mach);
    elf.fail(std::string("unknown AMDGPU target (EF_AMDGPU_MACH ") + hex + ")");
}

std::optional<msgpack::Value> metadata_note(const Elf& elf, const std::string& where) {
    for (const auto& p : elf.phdrs()) {
        if (p.p_type != PT_NOTE) continue;
        for (uint64_t off = 0; off + sizeof(Elf64_Nhdr) <= p.p_filesz;) {
            auto nh = elf.read<Elf64_Nhdr>(p.p_vaddr + off, "note header");
            uint64_t name_at = off + sizeof nh, desc_at = name_at + ((uint64_t(nh.n_namesz) + 3) & ~3ull);
            uint64_t next = desc_at + ((uint64_t(nh.n_descsz) + 3) & ~3ull);
            if (next > p.p_filesz) elf.fail("note runs past its segment");
            auto name = elf.at(p.p_vaddr + name_at, nh.n_namesz, "note name");
            bool amdgpu = nh.n_namesz == 7 && std::memcmp(name.data(), "AMDGPU", 7) == 0;
            if (amdgpu && nh.n_type == NT_AMDGPU_METADATA)
                return msgpack::parse(elf.at(p.p_vaddr + desc_at, nh.n_descsz, "note"), where);
            off = next;
        }
    }
    return std::nullopt;
}

uint32_t field(const Elf& elf, const msgpack::Value& m, const char* key, std::optional<uint32_t> fallback = std::nullopt) {
    const msgpack::Value* v = m.get(key);
    if (!v) {
        if (fallback) return *fallback;
        elf.fail(std::string("kernel metadata lacks ") + key);
    }
    auto i = v->as_int();
    if (!i || *i < 0 || *i > UINT32_MAX) elf.fail(std::string("kernel metadata ") + key + " is not a 32-bit count");
    return static_cast<uint32_t>(*i);
}

KernelInfo kernel_from(const Elf& elf, const Dynamic& dyn, const msgpack::Value* meta, const std::string& symbol) {
    const Elf64_Sym* sym = dyn.find(elf, symbol);
    if (!sym) elf.fail("kernel descriptor symbol '" + symbol + "' not found");
    auto kd = elf.read<KernelDescriptor>(sym->st_value, "kernel descriptor");
    if (!elf.executable(sym->st_value + kd.kernel_code_entry_byte_offset))
        elf.fail("kernel '" + symbol + "' entry point is outside the code segment");

    KernelInfo k;
    k.name = symbol.substr(0, symbol.size() - 3);
    k.descriptor_offset = sym->st_value;
    k.kernarg_size = kd.kernarg_size;
    k.group_segment_size = kd.group_segment_fixed_size;
    k.private_segment_size = kd.private_segment_fixed_size;
    k.wavefront_size = kd.kernel_code_properties & KD_ENABLE_WAVEFRONT_SIZE32 ? 32 : 64;
    if (!meta) return k;

    if (const auto* n = meta->get(".name"); n && n->as_str()) k.name = *n->as_str();
    k.kernarg_size = field(elf, *meta, ".kernarg_segment_size");
    k.kernarg_align = field(elf, *meta, ".kernarg_segment_align", 16);
    k.group_segment_size = field(elf, *meta, ".group_segment_fixed_size", kd.group_segment_fixed_size);
    k.private_segment_size = field(elf, *meta, ".private_segment_fixed_size", kd.private_segment_fixed_size);
    k.max_workgroup_size = field(elf, *meta, ".max_flat_workgroup_size", 1024);
    if (const auto* d = meta->get(".uses_dynamic_stack"); d && d->type == msgpack::Value::Type::BOOL) k.dynamic_stack = d->boolean;
    if (field(elf, *meta, ".wavefront_size", k.wavefront_size) != k.wavefront_size)
        elf.fail("kernel '" + k.name + "': metadata and descriptor disagree on the wavefront size");
    if (k.kernarg_align == 0 || (k.kernarg_align & (k.kernarg_align - 1))) elf.fail("kernel '" + k.name + "': kernarg alignment is not a power of two");
    if (const auto* args = meta->get(".args")) {
        if (args->type != msgpack::Value::Type::ARRAY) elf.fail("kernel '" + k.name + "': .args is not an array");
        for (const auto& a : args->array) {
            KernelArgInfo arg;
            const auto* kind = a.get(".value_kind");
            if (!kind || !kind->as_str()) elf.fail("kernel '" + k.name + "': an argument lacks .value_kind");
            arg.value_kind = *kind->as_str();
            arg.offset = field(elf, a, ".offset");
            arg.size = field(elf, a, ".size");
            if (uint64_t(arg.offset) + arg.size > k.kernarg_size)
                elf.fail("kernel '" + k.name + "': argument at offset " + std::to_string(arg.offset) + " ends past the kernarg segment");
            k.args.push_back(arg);
        }
    }
    return k;
}

CodeObject parse(const Elf& elf, const std::string& where) {
    CodeObject co;
    co.image_size = elf.image_size();
    if (co.image_size == 0) elf.fail("no loadable segments");
    Dynamic dyn(elf);
    auto meta = metadata_note(elf, where);
    co.target = target_of(elf, meta ? &*meta : nullptr);
    if (meta) {
        const auto* kernels = meta->get("amdhsa.kernels");
        if (!kernels || kernels->type != msgpack::Value::Type::ARRAY) elf.fail("metadata has no amdhsa.kernels list");
        for (const auto& km : kernels->array) {
            const auto* sym = km.get(".symbol");
            if (!sym || !sym->as_str()) elf.fail("a kernel's metadata lacks .symbol");
            co.kernels.push_back(kernel_from(elf, dyn, &km, *sym->as_str()));
        }
    } else {  // no metadata (hand-assembled objects): every <name>.kd symbol is a kernel
        for (const auto& s : dyn.syms) {
            if (s.st_shndx == SHN_UNDEF) continue;
            std::string n = dyn.name(elf, s);
            if (n.size() > 3 && n.ends_with(".kd")) co.kernels.push_back(kernel_from(elf, dyn, nullptr, n));
        }
    }
    if (co.kernels.empty()) elf.fail("contains no kernels");
    return co;
}

}  // namespace

const KernelInfo* CodeObject::find(const std::string& name) const {
    for (const auto& k : kernels)
        if (k.name == name) return &k;
    return nullptr;
}

CodeObject parse_code_object(std::span<const uint8_t> elf, const std::string& where) {
    return parse(Elf(elf, false, where), where);
}

CodeObject parse_loaded_image(std::span<const uint8_t> image, const std::string& where) {
    return parse(Elf(image, true, where), where);
}

std::vector<uint8_t> build_image(std::span<const uint8_t> bytes, uint64_t base, const std::string& where) {
    Elf elf(bytes, false, where);
    std::vector<uint8_t> image(elf.image_size());
    for (const auto& p : elf.phdrs())
        if (p.p_type == PT_LOAD) std::memcpy(image.data() + p.p_vaddr, bytes.data() + p.p_offset, p.p_filesz);

    Dynamic dyn(elf);
    if (dyn.has_rel) elf.fail("REL relocations are not supported (AMDGPU code objects use RELA)");
    for (uint64_t off = 0; off + sizeof(Elf64_Rela) <= dyn.relasz; off += sizeof(Elf64_Rela)) {
        auto r = elf.read<Elf64_Rela>(dyn.rela + off, "relocation");
        uint32_t type = ELF64_R_TYPE(r.r_info), sym = ELF64_R_SYM(r.r_info);
        if (!Elf::in(r.r_offset, 8, image.size())) elf.fail("relocation target outside the image");
        uint64_t value;
        if (type == R_AMDGPU_RELATIVE64) {
            value = base + r.r_addend;
        } else if (type == R_AMDGPU_ABS64) {
            if (sym >= dyn.syms.size() || dyn.syms[sym].st_shndx == SHN_UNDEF)
                elf.fail("relocation against an undefined symbol: code objects must be self-contained");
            value = base + dyn.syms[sym].st_value + r.r_addend;
        } else {
            elf.fail("unsupported relocation type " + std::to_string(type));
        }
        std::memcpy(image.data() + r.r_offset, &value, 8);
    }
    return image;
}

}  // namespace amd
