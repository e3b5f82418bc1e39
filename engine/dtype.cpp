// DType: sizes and names, and the mapping from GGUF tensor types.
#include "engine/tensor.h"

namespace engine {

namespace {

// The GGUF types with a plain dtype of their own; every other GGUF type is an opaque block type.
const struct {
    gguf::Type type;
    DType::Code code;
} PLAIN[] = {
    {gguf::Type::F32, DType::F32}, {gguf::Type::F16, DType::F16}, {gguf::Type::BF16, DType::BF16}, {gguf::Type::I8, DType::I8},
    {gguf::Type::I16, DType::I16}, {gguf::Type::I32, DType::I32}, {gguf::Type::I64, DType::I64},
};

}  // namespace

DType DType::from_gguf(gguf::Type t) {
    for (const auto& p : PLAIN)
        if (p.type == t) return DType(p.code);
    DType d(GGUF);
    d.block = t;
    return d;
}

std::optional<gguf::Type> DType::weight_type() const {
    if (code == GGUF) return block;
    if (!is_float()) return std::nullopt;
    for (const auto& p : PLAIN)
        if (p.code == code) return p.type;
    return std::nullopt;
}

size_t DType::itemsize() const {
    switch (code) {
        case BOOL: case U8: case I8: return 1;
        case U16: case I16: case F16: case BF16: return 2;
        case U32: case I32: case F32: return 4;
        case I64: return 8;
        case GGUF: return 0;
    }
    return 0;
}

size_t DType::nbytes(int64_t numel) const {
    if (numel < 0) throw Error("[engine] dtype: negative element count");
    if (code != GGUF) return size_t(numel) * itemsize();
    auto bytes = gguf::row_bytes(block, numel);
    if (!bytes) throw Error("[engine] dtype: " + std::to_string(numel) + " elements are not whole " + name() + " blocks");
    return size_t(*bytes);
}

std::string DType::name() const {
    static const char* const NAMES[] = {"bool", "u8", "i8", "u16", "i16", "u32", "i32", "i64", "f16", "bf16", "f32"};
    if (code == GGUF) return std::string(gguf::type_name(block));
    return NAMES[code];
}

}  // namespace engine
