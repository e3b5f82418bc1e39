// The conformance corpus: every line of ../shared/tokenizers/expected/<name>.jsonl must encode to the
// reference tokenizer's ids (no BOS, special tokens parsed) and decode back to its text.
#include "tokenizer_test_util.h"

#include "tokenizer/unicode.h"

using namespace tok_test;

namespace {

void check_vocabulary(const std::string& name, bool nfc_decode) {
    REQUIRE_SHARED_DATA();
    const Loaded& v = vocab(name);
    const std::vector<Case> cases = read_expected(name);
    REQUIRE(cases.size() > 300);
    int encode_failures = 0, decode_failures = 0;
    for (const Case& c : cases) {
        const std::vector<int32_t> got = v.tok->encode(c.text, false, true);
        if (got != c.ids && ++encode_failures <= 8)
            UNSCOPED_INFO("line " << c.line << " '" << escaped(c.text) << "'\n  expected " << show(c.ids, *v.tok)
                                  << "\n  got      " << show(got, *v.tok));
        const std::string want = nfc_decode ? tok::unicode::to_nfc(c.text) : c.text;
        const std::string back = v.tok->decode(c.ids);
        if (back != want && ++decode_failures <= 8)
            UNSCOPED_INFO("line " << c.line << " decodes to '" << escaped(back) << "', not '" << escaped(want) << "'");
    }
    CHECK(encode_failures == 0);
    CHECK(decode_failures == 0);
}

}  // namespace

TEST_CASE("llama3 (BPE, llama-bpe preset) encodes the corpus like the reference") { check_vocabulary("llama3", false); }
TEST_CASE("qwen3 (BPE, qwen2 preset, NFC) encodes the corpus like the reference") { check_vocabulary("qwen3", true); }
TEST_CASE("gpt4o (BPE, gpt-4o preset) encodes the corpus like the reference") { check_vocabulary("gpt4o", false); }
TEST_CASE("gemma3 (SentencePiece, no space prefix) encodes the corpus like the reference") { check_vocabulary("gemma3", false); }
TEST_CASE("llama2 (SentencePiece, space prefix) encodes the corpus like the reference") { check_vocabulary("llama2", false); }
TEST_CASE("mistral_v1 (SentencePiece, space prefix) encodes the corpus like the reference") { check_vocabulary("mistral_v1", false); }
