// The scripted model used by the server tests and the tinyllm_fake executable; see fake_model.h.
#include "fake/fake_model.h"

#include "llm/chat_template.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <stdexcept>
#include <thread>

namespace fake {

namespace {

struct Special {
    int32_t id;
    std::string_view text;
};
constexpr Special SPECIALS[] = {{ByteTokenizer::BOS, "<s>"}, {ByteTokenizer::EOS, "</s>"},
                                {ByteTokenizer::IM_START, "<|im_start|>"}, {ByteTokenizer::IM_END, "<|im_end|>"}};

}  // namespace

std::vector<int32_t> ByteTokenizer::encode(std::string_view text, bool add_special, bool parse_special) const {
    if (parse_special) return encode_literal(text, add_special, {});
    std::vector<int32_t> ids;
    if (add_special) ids.push_back(BOS);
    for (unsigned char c : text) ids.push_back(3 + c);
    return ids;
}

std::vector<tok::TextSpan> ByteTokenizer::control_spans(std::string_view text) const {
    std::vector<tok::TextSpan> spans;
    for (size_t i = 0; i < text.size(); i++)
        for (const auto& s : SPECIALS)
            if (text.substr(i).starts_with(s.text)) {
                spans.push_back({i, i + s.text.size()});
                i += s.text.size() - 1;
                break;
            }
    return spans;
}

std::vector<int32_t> ByteTokenizer::encode_literal(std::string_view text, bool add_special, const std::vector<tok::TextSpan>& literal) const {
    std::vector<int32_t> ids;
    if (add_special) ids.push_back(BOS);
    for (size_t i = 0; i < text.size();) {
        bool special = false;
        const bool in_literal = std::any_of(literal.begin(), literal.end(), [&](const tok::TextSpan& l) { return l.begin <= i && i < l.end; });
        for (const auto& s : SPECIALS)
            if (!in_literal && text.substr(i).starts_with(s.text)) {
                ids.push_back(s.id);
                i += s.text.size();
                special = true;
                break;
            }
        if (!special) ids.push_back(3 + static_cast<unsigned char>(text[i++]));
    }
    return ids;
}

std::string ByteTokenizer::token_text(int32_t id, bool) const { return id >= 3 && id < 259 ? std::string(1, char(id - 3)) : ""; }

std::string ByteTokenizer::piece(int32_t id) const {
    for (const auto& s : SPECIALS)
        if (s.id == id) return std::string(s.text);
    return id >= 3 && id < 259 ? std::string(1, char(id - 3)) : "<unk>";
}

std::string prompt_text(const std::vector<int32_t>& ids) {
    ByteTokenizer t;
    std::string out;
    for (int32_t id : ids) out += t.piece(id);
    return out;
}

ScriptedSession::ScriptedSession(int n_ctx) {
    info_.name = "fake-model";
    info_.path = "fake.gguf";
    info_.architecture = "fake";
    info_.n_ctx = n_ctx;
    info_.n_vocab = tokenizer_.n_vocab();
    info_.n_embd = 16;
    info_.pooling = llm::Pooling::MEAN;
}

std::vector<ScriptedSession::Call> ScriptedSession::calls() const {
    std::lock_guard lock(mutex_);
    return calls_;
}

int ScriptedSession::tokens_after(std::chrono::steady_clock::time_point since) const {
    std::lock_guard lock(mutex_);
    return int(std::count_if(token_times_.begin(), token_times_.end(), [&](auto t) { return t > since; }));
}

std::vector<float> ScriptedSession::embed(const std::vector<int32_t>& tokens, llm::Pooling pooling) {
    if (pooling == llm::Pooling::NONE) throw std::invalid_argument("[fake] no pooling");
    if (tokens.empty() || int(tokens.size()) > info_.n_ctx) throw std::length_error("[fake] input does not fit the context");
    std::vector<float> v(size_t(info_.n_embd), 0.0f);
    for (int32_t id : tokens) v[size_t(id) % v.size()] += 1.0f;
    double norm = 0;
    for (float x : v) norm += x * x;
    for (float& x : v) x = float(x / std::sqrt(norm));
    return v;
}

void ScriptedSession::reset() {
    std::lock_guard lock(mutex_);
    cached_.clear();
}

llm::GenerateResult ScriptedSession::generate(const std::vector<int32_t>& prompt, const llm::GenerateOptions& options) {
    if (int(prompt.size()) >= info_.n_ctx) throw std::length_error("[fake] prompt does not fit the context");
    int now_active = ++active_;
    max_concurrent_ = std::max(max_concurrent_.load(), now_active);
    struct Leave { std::atomic<int>& a; ~Leave() { --a; } } leave{active_};

    const std::string text = prompt_text(prompt);
    std::vector<int32_t> plan = tokenizer_.encode(reply ? reply(text) : reply_text, false, true);
    if (end_with_eos) plan.push_back(ByteTokenizer::EOS);

    llm::GenerateResult result;
    result.n_prompt = int(prompt.size());
    {
        std::lock_guard lock(mutex_);
        calls_.push_back({text, prompt, options.sampling, options.max_tokens, options.n_top_logprobs, options.grammar});
        token_times_.clear();
        // Like a KV cache: the shared prefix is kept, but the last prompt token is always recomputed.
        size_t common = 0;
        while (common < cached_.size() && common + 1 < prompt.size() && cached_[common] == prompt[common]) common++;
        result.n_reused = int(common);
        cached_ = prompt;
    }
    result.t_prefill_ms = 1.0;
    if (prefill_delay_ms > 0) {
        const int n = int(prompt.size());
        for (int done : {result.n_reused, (result.n_reused + n) / 2}) {
            if (options.on_prefill) options.on_prefill(done, n);
            std::this_thread::sleep_for(std::chrono::milliseconds(prefill_delay_ms));
        }
        if (options.on_prefill) options.on_prefill(n, n);
        result.t_prefill_ms = 2.0 * prefill_delay_ms;
    }
    auto t0 = std::chrono::steady_clock::now();
    result.finish = llm::FinishReason::LENGTH;
    for (size_t i = 0;; i++) {
        if (options.cancel && options.cancel->load()) { result.finish = llm::FinishReason::CANCELLED; break; }
        if (int(result.ids.size()) >= options.max_tokens || int(prompt.size() + result.ids.size()) >= info_.n_ctx) break;
        if (int(result.ids.size()) == fail_after_tokens) throw std::runtime_error("[fake] the device fell over");
        if (token_delay_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(token_delay_ms));
        int32_t id = i < plan.size() ? plan[i] : 3 + ' ';
        result.ids.push_back(id);
        {
            std::lock_guard lock(mutex_);
            cached_.push_back(id);
            token_times_.push_back(std::chrono::steady_clock::now());
        }
        llm::TokenStep step;
        step.id = id;
        step.logprob = -0.25f;
        for (int k = 0; k < options.n_top_logprobs; k++) step.top_logprobs.push_back({k == 0 ? id : 3 + 'a' + k, -0.25f - k});
        if (options.on_token && !options.on_token(step)) { result.finish = llm::FinishReason::CALLBACK; break; }
        if (options.stop_at_end && tokenizer_.is_end(id)) { result.finish = llm::FinishReason::STOP; break; }
    }
    result.t_decode_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    return result;
}

// A real Jinja template (rendered by llm::ChatTemplate, as a model's would be); JSON is written compactly.
const char* const CHATML_TEMPLATE = R"({%- if tools -%}
{{- '<|im_start|>system\n# Tools\n' + tools | tojson(separators=(',', ':')) + '<|im_end|>\n' -}}
{%- endif -%}
{%- for m in messages -%}
{{- '<|im_start|>' + m.role + '\n' -}}
{%- if m.content is string -%}{{- m.content -}}{%- endif -%}
{%- for call in (m.tool_calls or []) -%}
{{- '<tool_call>\n' + call.function | tojson(separators=(',', ':')) + '\n</tool_call>' -}}
{%- endfor -%}
{{- '<|im_end|>\n' -}}
{%- endfor -%}
{%- if add_generation_prompt -%}
{{- '<|im_start|>assistant\n' -}}
{%- if enable_thinking -%}{{- '<think>\n' -}}{%- endif -%}
{%- endif -%})";

std::string render_chatml(const nlohmann::ordered_json& context) {
    static const llm::ChatTemplate chatml(CHATML_TEMPLATE, "fake-chatml.jinja");
    return chatml.render(context);
}

}  // namespace fake
