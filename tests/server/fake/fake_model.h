// A scripted stand-in for a model: a byte-level tokenizer (every byte one token, so tags, stop strings
// and multi-byte characters all split across tokens) and a Session that "generates" a planned text,
// optionally slowly, recording what it was asked. Also a ChatML template (real Jinja, via llm::ChatTemplate).
#pragma once

#include "llm/session.h"
#include "server/server.h"

#include <atomic>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

namespace fake {

// ids: 0 <unk>, 1 <s>, 2 </s>, 3..258 the bytes 0..255, then the specials below.
class ByteTokenizer : public tok::Tokenizer {
public:
    static constexpr int32_t BOS = 1, EOS = 2, IM_START = 259, IM_END = 260;
    std::vector<int32_t> encode(std::string_view text, bool add_special, bool parse_special) const override;
    std::vector<tok::TextSpan> control_spans(std::string_view text) const override;
    std::vector<int32_t> encode_literal(std::string_view text, bool add_special, const std::vector<tok::TextSpan>& literal) const override;
    std::string piece(int32_t id) const override;
    std::string token_text(int32_t id, bool) const override;  // a byte; specials render as nothing
    bool is_special(int32_t id) const override { return id < 3 || id >= IM_START; }
    bool is_control(int32_t id) const override { return id == BOS || id >= IM_START; }
    int32_t n_vocab() const override { return 261; }
    int32_t bos() const override { return BOS; }
    int32_t eos() const override { return EOS; }
    bool add_bos() const override { return true; }
    bool is_end(int32_t id) const override { return id == EOS || id == IM_END; }
};

class ScriptedSession : public llm::Session {
public:
    explicit ScriptedSession(int n_ctx = 512);
    const llm::ModelInfo& info() const override { return info_; }
    const tok::Tokenizer& tokenizer() const override { return tokenizer_; }
    llm::GenerateResult generate(const std::vector<int32_t>& prompt, const llm::GenerateOptions& options) override;
    void reset() override;
    // A deterministic stand-in: byte counts of the text folded into n_embd dims, L2-normalized.
    std::vector<float> embed(const std::vector<int32_t>& tokens, llm::Pooling pooling) override;

    // The script: what to answer to a prompt (given as text, specials included). Default: `reply_text`.
    std::function<std::string(const std::string& prompt)> reply;
    std::string reply_text = "Hello there!";
    bool end_with_eos = true;   // false: keep going until max_tokens
    int token_delay_ms = 0;
    int prefill_delay_ms = 0;    // > 0: the prompt "prefills" in two halves this slow, reporting progress
    int fail_after_tokens = -1;  // >= 0: generate() throws after that many tokens (an engine failure)

    // What it saw (read after the request finished).
    struct Call {
        std::string prompt_text;
        std::vector<int32_t> prompt;
        llm::SamplingParams sampling;
        int max_tokens = 0;
        int n_top_logprobs = 0;
        llm::GrammarSpec grammar;
    };
    std::vector<Call> calls() const;
    int max_concurrent() const { return max_concurrent_; }
    bool generating() const { return active_ > 0; }
    // Tokens produced after `since` (steady clock), by the last generation.
    int tokens_after(std::chrono::steady_clock::time_point since) const;

private:
    ByteTokenizer tokenizer_;
    llm::ModelInfo info_;
    mutable std::mutex mutex_;
    std::vector<Call> calls_;
    std::vector<int32_t> cached_;  // the last sequence (prompt + reply), for prefix reuse
    std::vector<std::chrono::steady_clock::time_point> token_times_;
    std::atomic<int> active_{0}, max_concurrent_{0};
};

std::string prompt_text(const std::vector<int32_t>& ids);  // decode with specials written out

// ChatML through a real Jinja template (llm::ChatTemplate): <|im_start|>role\ncontent<|im_end|>\n …, tools
// listed in a system turn, "<think>\n" opened when the context says enable_thinking.
std::string render_chatml(const nlohmann::ordered_json& context);

}  // namespace fake
