// Fuzz target: the tokenizers on arbitrary text: SentencePiece (the built-in stories260K vocabulary)
// and byte-level BPE (a tiny vocabulary with merges), with and without special-token parsing. Ids
// must stay in the vocabulary and decoding must not fail.
#include "gguf/gguf.h"
#include "tokenizer/tokenizer.h"

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string_view>

namespace {

struct Vocabularies {
    std::unique_ptr<gguf::File> spm_file, bpe_file;
    std::unique_ptr<tok::Tokenizer> spm, bpe;
    std::vector<uint8_t> bpe_bytes;
};

Vocabularies load() {
    Vocabularies v;
    v.spm_file = gguf::File::open(TINYLLM_SOURCE_DIR "/models/stories260K.gguf");
    v.spm = tok::Tokenizer::from_gguf(*v.spm_file);
    gguf::Writer w;
    w.set_str("tokenizer.ggml.model", "gpt2");
    w.set_str("tokenizer.ggml.pre", "qwen2");
    w.set_str_array("tokenizer.ggml.tokens", {"a", "b", "ab", "abab", "\xc4\xa0", "\xc4\xa0" "a", "<|im_start|>", "<|im_end|>"});
    w.set("tokenizer.ggml.token_type",
          gguf::Value::make_array(gguf::ValueType::INT32, {gguf::Value::make_int(gguf::ValueType::INT32, 1), gguf::Value::make_int(gguf::ValueType::INT32, 1),
                                                           gguf::Value::make_int(gguf::ValueType::INT32, 1), gguf::Value::make_int(gguf::ValueType::INT32, 1),
                                                           gguf::Value::make_int(gguf::ValueType::INT32, 1), gguf::Value::make_int(gguf::ValueType::INT32, 1),
                                                           gguf::Value::make_int(gguf::ValueType::INT32, 3), gguf::Value::make_int(gguf::ValueType::INT32, 3)}));
    w.set_str_array("tokenizer.ggml.merges", {"a b", "ab ab", "\xc4\xa0 a"});
    v.bpe_bytes = w.bytes();
    v.bpe_file = gguf::File::from_memory(v.bpe_bytes.data(), v.bpe_bytes.size(), "fuzz-bpe.gguf");
    v.bpe = tok::Tokenizer::from_gguf(*v.bpe_file);
    return v;
}

void check(const tok::Tokenizer& t, std::string_view text, bool parse_special) {
    std::vector<int32_t> ids;
    try {
        ids = t.encode(text, true, parse_special);
    } catch (const tok::Error&) {  // e.g. a character a vocabulary without byte tokens cannot represent
        return;
    }
    for (int32_t id : ids)
        if (id < 0 || id >= t.n_vocab()) std::abort();
    (void)t.decode(ids);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    static const Vocabularies v = load();
    std::string_view text(reinterpret_cast<const char*>(data), size);
    bool parse_special = size > 0 && (data[0] & 1);
    check(*v.spm, text, parse_special);
    check(*v.bpe, text, parse_special);
    return 0;
}
