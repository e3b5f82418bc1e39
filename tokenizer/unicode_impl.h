// The generated NFC tables behind tokenizer/unicode.h (unicode_tables.cpp, scripts/gen_unicode_tables.py):
// combining classes, NFC quick-check runs, decompositions and compositions. Only unicode.cpp reads them.
#pragma once

#include "tokenizer/unicode.h"

#include <cstddef>
#include <cstdint>

namespace tok::unicode {

struct CodepointRun {
    uint32_t first, last, value;
};
struct Decomposition {
    uint32_t cp;
    uint16_t offset;  // into DECOMPOSITION_DATA
    uint8_t length;
};
struct Composition {
    uint32_t first, second, composite;
};

// Generated tables.
extern const CodepointRun CCC_RUNS[];
extern const CodepointRun NFC_QC_RUNS[];
extern const Decomposition DECOMPOSITIONS[];
extern const uint32_t DECOMPOSITION_DATA[];
extern const Composition COMPOSITIONS[];
extern const size_t N_CCC_RUNS, N_NFC_QC_RUNS, N_DECOMPOSITIONS, N_COMPOSITIONS;

}  // namespace tok::unicode
