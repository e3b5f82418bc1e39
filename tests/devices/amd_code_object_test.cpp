// The code-object reader against clang-19's gfx1100 output (what llvm-readelf shows for it), its loaded
// image, the msgpack metadata reader, and corrupt inputs.
#include "amd_test_util.h"

#include "devices/amd/code_object.h"
#include "devices/amd/msgpack.h"

#include <elf.h>

#include <algorithm>
#include <cstring>

using amd_test::test_kernels;

namespace {

const amd::KernelArgInfo* arg_of_kind(const amd::KernelInfo& k, const std::string& kind) {
    for (const auto& a : k.args)
        if (a.value_kind == kind) return &a;
    return nullptr;
}

// Byte offset of the metadata note's msgpack payload in the file (after the 12-byte header and "AMDGPU\0\0").
size_t metadata_offset(const std::vector<uint8_t>& elf) {
    Elf64_Ehdr eh;
    std::memcpy(&eh, elf.data(), sizeof eh);
    for (int i = 0; i < eh.e_phnum; i++) {
        Elf64_Phdr ph;
        std::memcpy(&ph, elf.data() + eh.e_phoff + i * sizeof ph, sizeof ph);
        if (ph.p_type == PT_NOTE) return ph.p_offset + 12 + 8;
    }
    FAIL("no PT_NOTE");
    return 0;
}

}  // namespace

TEST_CASE("amd code object: kernels, arguments and descriptors of a clang-19 gfx1100 object") {
    auto elf = test_kernels();
    amd::CodeObject co = amd::parse_code_object(elf, "amd_test_kernels");
    CHECK(co.target == "gfx1100");
    REQUIRE(co.kernels.size() == 2);

    const amd::KernelInfo* vadd = co.find("vadd");
    REQUIRE(vadd);
    CHECK(vadd->kernarg_size == 28);
    CHECK(vadd->kernarg_align == 8);
    CHECK(vadd->wavefront_size == 32);  // gfx11 compiles wave32 by default
    CHECK(vadd->private_segment_size == 0);
    REQUIRE(vadd->args.size() == 4);
    for (int i = 0; i < 3; i++) {
        CHECK(vadd->args[i].pointer());
        CHECK(vadd->args[i].offset == 8u * i);
    }
    CHECK(vadd->args[3].value_kind == "by_value");
    CHECK(vadd->args[3].offset == 24);
    CHECK(vadd->args[3].size == 4);

    // The descriptor offset is the .kd symbol: its kernel_code_entry points into the code segment.
    amd::KernelDescriptor kd;
    auto image = amd::build_image(elf, 0, "amd_test_kernels");
    REQUIRE(vadd->descriptor_offset + sizeof kd <= image.size());
    std::memcpy(&kd, image.data() + vadd->descriptor_offset, sizeof kd);
    CHECK(kd.kernarg_size == 28);
    CHECK((kd.kernel_code_properties & amd::KD_ENABLE_WAVEFRONT_SIZE32) != 0);

    const amd::KernelInfo* scale = co.find("scale2d");
    REQUIRE(scale);
    const auto* count_x = arg_of_kind(*scale, "hidden_block_count_x");
    const auto* group_x = arg_of_kind(*scale, "hidden_group_size_x");
    REQUIRE(count_x);
    REQUIRE(group_x);
    CHECK(count_x->offset == 16);
    CHECK(group_x->offset == count_x->offset + 12);
    CHECK(scale->kernarg_size >= 272);
    CHECK(co.find("nope") == nullptr);
}

TEST_CASE("amd code object: the loaded image describes the same kernels as the file") {
    auto elf = test_kernels();
    amd::CodeObject file = amd::parse_code_object(elf, "file");
    auto image = amd::build_image(elf, 0x7f0000000000, "file");
    CHECK(image.size() == file.image_size);
    amd::CodeObject loaded = amd::parse_loaded_image(image, "image");
    REQUIRE(loaded.kernels.size() == file.kernels.size());
    for (size_t i = 0; i < file.kernels.size(); i++) {
        CHECK(loaded.kernels[i].name == file.kernels[i].name);
        CHECK(loaded.kernels[i].descriptor_offset == file.kernels[i].descriptor_offset);
        CHECK(loaded.kernels[i].kernarg_size == file.kernels[i].kernarg_size);
    }
}

TEST_CASE("amd code object: corrupt or foreign files are clear errors") {
    auto elf = test_kernels();
    auto fails_with = [](std::vector<uint8_t> bytes, const std::string& what) {
        CHECK_THROWS_WITH(amd::parse_code_object(bytes, "k.hsaco"), Catch::Contains("[amd] k.hsaco") && Catch::Contains(what));
    };
    fails_with({}, "too small");
    fails_with(std::vector<uint8_t>(elf.begin(), elf.begin() + 100), "past the end");
    auto not_elf = elf;
    not_elf[1] = 'X';
    fails_with(not_elf, "not an ELF");
    auto x86 = elf;
    x86[18] = EM_X86_64;
    fails_with(x86, "not an AMDGPU code object");

    auto bad_note = elf;  // the top-level msgpack map claims far more entries than the note holds
    bad_note[metadata_offset(elf)] = 0xdf;
    fails_with(bad_note, "metadata note");

    auto renamed = elf;  // the metadata (first occurrence) names a descriptor symbol that does not exist
    const char kd[] = "vadd.kd";
    auto at = std::search(renamed.begin(), renamed.end(), kd, kd + 7);
    REQUIRE(at != renamed.end());
    (*at) = 'w';
    fails_with(renamed, "'wadd.kd' not found");

    // Every truncation either parses the (intact) loaded segments or fails cleanly: never a crash.
    for (size_t n = 0; n < elf.size(); n += 37) {
        try {
            amd::parse_code_object(std::span(elf.data(), n), "cut");
        } catch (const amd::Error&) {
        }
    }
}

TEST_CASE("amd msgpack: the spec's encodings decode to their values") {
    // {"a": [1, -1, 300, "x", true, nil], "b": 1.5 (float64)}
    const std::vector<uint8_t> doc = {0x82, 0xa1, 'a', 0x96, 0x01, 0xff, 0xcd, 0x01, 0x2c, 0xa1, 'x', 0xc3, 0xc0,
                                      0xa1, 'b', 0xcb, 0x3f, 0xf8, 0, 0, 0, 0, 0, 0};
    auto v = amd::msgpack::parse(doc, "doc");
    const auto* a = v.get("a");
    REQUIRE(a);
    REQUIRE(a->array.size() == 6);
    CHECK(a->array[0].as_int() == 1);
    CHECK(a->array[1].as_int() == -1);
    CHECK(a->array[2].as_int() == 300);
    CHECK(*a->array[3].as_str() == "x");
    CHECK(a->array[4].boolean);
    CHECK(a->array[5].type == amd::msgpack::Value::Type::NIL);
    CHECK(v.get("b")->real == 1.5);
    CHECK(v.get("c") == nullptr);

    CHECK_THROWS_WITH(amd::msgpack::parse(std::vector<uint8_t>{0x92, 0x01}, "doc"), Catch::Contains("truncated"));
    CHECK_THROWS_WITH(amd::msgpack::parse(std::vector<uint8_t>{0xc1}, "doc"), Catch::Contains("unsupported type"));
    std::vector<uint8_t> deep(100, 0x91);
    deep.push_back(0x00);
    CHECK_THROWS_WITH(amd::msgpack::parse(deep, "doc"), Catch::Contains("nesting"));
}
