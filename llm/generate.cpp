// The Session behind every front end: prefix reuse of the KV cache, chunked prefill, then a decode
// loop. Prefill and decode each run as a captured engine graph (one compile, then replays), with the
// position and the chunk length as bound Vars.
#include "gguf/gguf.h"
#include "llm/model.h"
#include "llm/sampler.h"
#include "llm/session.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <stdexcept>

namespace llm {

namespace {

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

constexpr int PREFILL_CHUNK = 512;  // tokens per prefill graph launch (llama.cpp's default ubatch)

class ModelSession final : public Session {
public:
    explicit ModelSession(const SessionOptions& o)
        : model_(Model::load(o.model_path)), tokenizer_(tok::Tokenizer::from_gguf(model_->file())),
          start_pos_("start_pos", 0, 1), n_tokens_("n_tokens", 1, PREFILL_CHUNK) {
        const ModelConfig& c = model_->config();
        int n_ctx = o.n_ctx > 0 ? o.n_ctx : std::min(c.n_ctx_train, 4096);
        info_.path = o.model_path;
        info_.name = c.name.empty() ? std::filesystem::path(o.model_path).stem().string() : c.name;
        info_.architecture = c.arch;
        info_.chat_template = model_->file().get_or<std::string>("tokenizer.chat_template", "");
        info_.tokenizer_pre = model_->file().get_or<std::string>("tokenizer.ggml.pre", "");
        info_.n_ctx = n_ctx;
        info_.n_vocab = c.n_vocab;
        start_pos_ = engine::Var("start_pos", 0, n_ctx - 1);
        // PREFILL_CHUNK spare rows: the graph must be valid for every bound of start_pos + n_tokens.
        state_ = model_->new_state(n_ctx + PREFILL_CHUNK, o.kv_f16 ? engine::f16 : engine::f32);
        chunk_tokens_ = Tensor::empty({PREFILL_CHUNK}, engine::i32);
        one_token_ = Tensor::empty({1}, engine::i32);
        prefill_ = std::make_unique<engine::Jit>([this](const std::vector<Tensor>& in) {
            return std::vector<Tensor>{model_->forward(in[0].slice(0, 0, n_tokens_), start_pos_, state_, false)};
        });
        decode_ = std::make_unique<engine::Jit>([this](const std::vector<Tensor>& in) {
            return std::vector<Tensor>{model_->forward(in[0], start_pos_, state_, false)};
        });
    }

    const ModelInfo& info() const override { return info_; }
    const tok::Tokenizer& tokenizer() const override { return *tokenizer_; }
    void reset() override { cached_.clear(); }

    GenerateResult generate(const std::vector<int32_t>& prompt, const GenerateOptions& opt) override {
        if (prompt.empty()) throw std::invalid_argument("[generate] the prompt is empty");
        if (static_cast<int>(prompt.size()) > info_.n_ctx)
            throw std::length_error("[generate] the prompt has " + std::to_string(prompt.size()) +
                                    " tokens, more than the context of " + std::to_string(info_.n_ctx));
        for (int32_t id : prompt)
            if (id < 0 || id >= info_.n_vocab)
                throw std::invalid_argument("[generate] token id " + std::to_string(id) + " is outside the vocabulary");

        GenerateResult r;
        r.n_prompt = static_cast<int>(prompt.size());
        // Reuse the longest common prefix, but always recompute at least the last prompt token: its
        // logits start the generation.
        size_t common = 0;
        while (common < cached_.size() && common < prompt.size() && cached_[common] == prompt[common]) common++;
        common = std::min(common, prompt.size() - 1);
        cached_.resize(common);
        r.n_reused = static_cast<int>(common);

        auto t0 = Clock::now();
        std::vector<float> logits = prefill(prompt, common);
        r.t_prefill_ms = ms_since(t0);

        Sampler sampler(opt.sampling);
        auto t1 = Clock::now();
        int n_steps = opt.forced.empty() ? opt.max_tokens : std::min<int>(opt.max_tokens, opt.forced.size());
        for (int step = 0; step < n_steps; step++) {
            if (opt.cancel && opt.cancel->load()) {
                r.finish = FinishReason::CANCELLED;
                break;
            }
            int32_t id = opt.forced.empty() ? sampler.sample(logits) : opt.forced[step];
            sampler.accept(id);
            TokenStep s = describe_step(logits, id, opt.n_top_logprobs, opt.n_top_logits);
            s.logits = logits.data();
            r.ids.push_back(id);
            bool go_on = !opt.on_token || opt.on_token(s);
            if (!go_on) {
                r.finish = FinishReason::CALLBACK;
                break;
            }
            if (opt.stop_at_end && opt.forced.empty() && tokenizer_->is_end(id)) {
                r.finish = FinishReason::STOP;
                break;
            }
            if (step + 1 == n_steps) break;  // the last token needs no forward pass
            if (static_cast<int>(cached_.size()) >= info_.n_ctx) break;  // context full: LENGTH
            logits = decode(id);
        }
        r.t_decode_ms = ms_since(t1);
        return r;
    }

private:
    // Evaluates prompt[from:] (positions from..) and returns the last token's logits.
    std::vector<float> prefill(const std::vector<int32_t>& prompt, size_t from) {
        std::vector<float> logits;
        for (size_t pos = from; pos < prompt.size();) {
            size_t n = std::min<size_t>(PREFILL_CHUNK, prompt.size() - pos);
            if (n == 1) {
                logits = decode(prompt[pos]);
                pos += 1;
                continue;
            }
            chunk_tokens_.copy_from(prompt.data() + pos, n * sizeof(int32_t));
            start_pos_.bind(static_cast<int64_t>(pos));
            n_tokens_.bind(static_cast<int64_t>(n));
            logits = (*prefill_)({chunk_tokens_})[0].to_vector<float>();
            cached_.insert(cached_.end(), prompt.begin() + pos, prompt.begin() + pos + n);
            pos += n;
        }
        return logits;
    }

    // Evaluates one token at the next position and returns its logits.
    std::vector<float> decode(int32_t id) {
        one_token_.copy_from(&id, sizeof id);
        start_pos_.bind(static_cast<int64_t>(cached_.size()));
        std::vector<float> logits = (*decode_)({one_token_})[0].to_vector<float>();
        cached_.push_back(id);
        return logits;
    }

    std::unique_ptr<Model> model_;
    std::unique_ptr<tok::Tokenizer> tokenizer_;
    ModelInfo info_;
    State state_;
    std::vector<int32_t> cached_;  // the tokens whose K/V the cache holds, in order
    engine::Var start_pos_, n_tokens_;
    Tensor chunk_tokens_, one_token_;
    std::unique_ptr<engine::Jit> prefill_, decode_;
};

}  // namespace

std::unique_ptr<Session> open_session(const SessionOptions& options) {
    engine::set_default_device(options.device);  // the model's weights and state go there
    return std::make_unique<ModelSession>(options);
}

}  // namespace llm
