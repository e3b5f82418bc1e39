// DType: sizes and names, and the mapping from GGUF tensor types.
#include "engine/tensor.h"

namespace engine {

DType DType::from_gguf(gguf::Type t) {
    switch (t) {
        case gguf::Type::F32: return f32;
        case gguf::Type::F16: return f16;
        case gguf::Type::BF16: return bf16;
        case gguf::Type::I8: return i8;
        case gguf::Type::I16: return i16;
        case gguf::Type::I32: return i32;
        case gguf::Type::I64: return i64;
        default: {
            DType d(GGUF);
            d.block = t;
            return d;
        }
    }
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
