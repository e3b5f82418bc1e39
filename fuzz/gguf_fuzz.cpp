// Fuzz target: the GGUF reader on arbitrary bytes. Any outcome but gguf::Error or a parsed file that
// reads back within its own bounds is a bug.
#include "gguf/gguf.h"

#include <cstddef>
#include <cstdint>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    try {
        auto f = gguf::File::from_memory(data, size, "fuzz.gguf");
        uint64_t sum = 0;
        for (const gguf::TensorInfo& t : f->tensors())  // touch what the file claims, as a loader would
            for (uint64_t i = 0; i < t.n_bytes; i += 61) sum += t.data[i];
        for (const auto& [key, value] : f->metadata()) sum += key.size() + (value.is_array() ? value.array().size() : 0);
        volatile uint64_t sink = sum;
        (void)sink;
    } catch (const gguf::Error&) {
    }
    return 0;
}
