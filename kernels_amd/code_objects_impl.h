// The code objects embedded at build time (generated code_objects.cpp): one ELF per kernel source and target.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tinyllm::amd::detail {

struct EmbeddedCodeObject {
    const char* source;  // kernels_amd/hip/<source>.hip
    const char* target;  // "gfx1100", ...
    const uint8_t* begin;
    const uint8_t* end;
};
extern const EmbeddedCodeObject embedded_code_objects[];
extern const size_t embedded_code_object_count;

}  // namespace tinyllm::amd::detail
