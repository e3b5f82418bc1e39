// The Session behind every front end: prefix reuse of the KV cache (and of recurrent state through
// checkpoints), chunked prefill, then a decode loop. Prefill and decode each run as a captured engine
// graph (one compile, then replays), with the position and the chunk length as bound Vars.
#include "gguf/gguf.h"
#include "llm/model.h"
#include "llm/session_impl.h"
#include "llm/token_picker.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <stdexcept>

namespace llm {

namespace {

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

constexpr int PREFILL_CHUNK = 512;  // tokens per prefill graph launch (llama.cpp's default ubatch)

// Recurrent state (GatedDeltaNet / KDA layers) after `tokens`, with the logits that followed the last
// of them: a prompt equal to `tokens` (a regenerate) needs no forward pass at all.
struct Checkpoint {
    std::vector<int32_t> tokens;
    std::vector<float> logits;
    std::vector<Tensor> state;  // copies of the recurrent layers' conv and ssm tensors, in layer order
    uint64_t last_used = 0;
};

bool is_prefix(const std::vector<int32_t>& p, const std::vector<int32_t>& of) {
    return p.size() <= of.size() && std::equal(p.begin(), p.end(), of.begin());
}

class ModelSession final : public Session {
public:
    explicit ModelSession(const SessionOptions& o)
        : model_(Model::load(o.model_path)), tokenizer_(tok::Tokenizer::from_gguf(model_->file())),
          start_pos_("start_pos", 0, 1), n_tokens_("n_tokens", 1, PREFILL_CHUNK) {
        const ModelConfig& c = model_->config();
        // Several sequences at once (a BatchedSession over this model) get the model's own context.
        const int n_ctx = o.n_ctx > 0 ? o.n_ctx : std::min(c.n_ctx_train, o.parallel > 1 ? 32768 : 4096);
        info_.path = o.model_path;
        info_.name = c.name.empty() ? std::filesystem::path(o.model_path).stem().string() : c.name;
        info_.architecture = c.arch;
        info_.chat_template = model_->file().get_or<std::string>("tokenizer.chat_template", "");
        info_.tokenizer_pre = model_->file().get_or<std::string>("tokenizer.ggml.pre", "");
        info_.n_ctx = n_ctx;
        info_.n_vocab = c.n_vocab;
        info_.n_embd = c.n_embd;
        info_.pooling = c.pooling_type >= 1 && c.pooling_type <= 3 ? Pooling(c.pooling_type) : Pooling::NONE;
        start_pos_ = engine::Var("start_pos", 0, n_ctx - 1);
        n_checkpoints_ = std::max(0, o.n_checkpoints);
        chunk_tokens_ = Tensor::empty({PREFILL_CHUNK}, engine::i32);
        one_token_ = Tensor::empty({1}, engine::i32);
        prefill_ = std::make_unique<engine::Jit>([this](const std::vector<Tensor>& in) {
            return std::vector<Tensor>{model_->forward(in[0].slice(0, 0, n_tokens_), start_pos_, state_, false)};
        });
        decode_ = std::make_unique<engine::Jit>([this](const std::vector<Tensor>& in) {
            return std::vector<Tensor>{model_->forward(in[0], start_pos_, state_, false)};
        });
        kv_dtype_ = engine::DType::from_gguf(o.kv_type);
        model_->check_kv_cache(kv_dtype_);  // refused at open, not at the first request
    }

    const ModelInfo& info() const override { return info_; }
    const tok::Tokenizer& tokenizer() const override { return *tokenizer_; }
    void reset() override {
        cached_.clear();
        live_logits_.clear();
        checkpoints_.clear();
    }

    GenerateResult generate(const std::vector<int32_t>& prompt, const GenerateOptions& opt) override {
        check_prompt(prompt, info_);
        if (state_.layers.empty()) init_state();
        GenerateResult r;
        r.n_prompt = static_cast<int>(prompt.size());
        auto t0 = Clock::now();
        std::vector<float> logits;
        size_t reused = resume(prompt, logits);
        live_logits_.clear();  // set again once the state ends a generation
        r.n_reused = static_cast<int>(reused);
        if (reused < prompt.size()) {
            logits = prefill(prompt, reused, opt.on_prefill);
            save_checkpoint(logits);  // end of the prompt: where a regenerate or an edited follow-up resumes
        }
        r.t_prefill_ms = ms_since(t0);

        auto t1 = Clock::now();
        TokenPicker picker(opt, *tokenizer_, opt.grammar.grammar ? &grammar_vocab() : nullptr);
        while (picker.next(logits, r)) {
            if (static_cast<int>(cached_.size()) >= info_.n_ctx) break;  // context full: LENGTH
            logits = decode(r.ids.back());
        }
        r.t_decode_ms = ms_since(t1);
        live_logits_ = std::move(logits);  // the live state is the end-of-generation checkpoint
        return r;
    }

    std::vector<float> embed(const std::vector<int32_t>& tokens, Pooling pooling) override {
        if (pooling == Pooling::NONE) throw std::invalid_argument("[embed] no pooling: the model declares none (serve --pooling mean|cls|last)");
        if (tokens.empty()) throw std::invalid_argument("[embed] the input is empty");
        if (static_cast<int>(tokens.size()) > info_.n_ctx)
            throw std::length_error("[embed] the input has " + std::to_string(tokens.size()) + " tokens, more than the context of " +
                                    std::to_string(info_.n_ctx));
        for (int32_t id : tokens)
            if (id < 0 || id >= info_.n_vocab)
                throw std::invalid_argument("[embed] token id " + std::to_string(id) + " is outside the vocabulary");
        if (!embed_) {
            // Embeddings run in their own state, made on first use, so the chat's cached prefix (K/V rows
            // and recurrent checkpoints) survives them; position 0 restarts its recurrent state.
            embed_state_ = model_->new_state(info_.n_ctx + PREFILL_CHUNK, kv_dtype_);
            // A chunk's hidden states, reduced in the graph to what each pooling needs (static shapes):
            // the first row (cls), the last row (last) and the sum of the rows (mean).
            embed_ = std::make_unique<engine::Jit>([this](const std::vector<Tensor>& in) {
                Tensor h = model_->hidden(in[0].slice(0, 0, n_tokens_), start_pos_, embed_state_);  // (T, D)
                return std::vector<Tensor>{h.slice(0, 0, 1), h.slice(0, h.dim(0) - 1, 1), h.sum(0, true)};
            });
        }
        const size_t D = size_t(info_.n_embd);
        std::vector<float> pooled(D, 0.0f);
        for (size_t pos = 0; pos < tokens.size();) {
            const size_t n = std::min<size_t>(PREFILL_CHUNK, tokens.size() - pos);
            chunk_tokens_.copy_from(tokens.data() + pos, n * sizeof(int32_t));
            start_pos_.bind(static_cast<int64_t>(pos));
            n_tokens_.bind(static_cast<int64_t>(n));
            std::vector<Tensor> out = (*embed_)({chunk_tokens_});
            const bool first = pos == 0, last = pos + n == tokens.size();
            if (pooling == Pooling::MEAN) {
                std::vector<float> sum = out[2].to_vector<float>();
                for (size_t i = 0; i < D; i++) pooled[i] += sum[i];
            } else if ((pooling == Pooling::CLS && first) || (pooling == Pooling::LAST && last)) {
                pooled = out[pooling == Pooling::CLS ? 0 : 1].to_vector<float>();
            }
            pos += n;
        }
        double norm = 0.0;
        for (float v : pooled) norm += double(v) * v;  // the mean's 1/n cancels in the normalization
        const float scale = norm > 0.0 ? float(1.0 / std::sqrt(norm)) : 0.0f;
        for (float& v : pooled) v *= scale;
        return pooled;
    }

    const Model& model() const { return *model_; }

private:
    // The caches generate() runs in, made by the first generation (a session that only embeds, or only
    // lends its model to a BatchedSession, never makes them).
    void init_state() {
        // PREFILL_CHUNK spare rows: the graph must be valid for every bound of start_pos + n_tokens.
        state_ = model_->new_state(info_.n_ctx + PREFILL_CHUNK, kv_dtype_);
        for (LayerState& l : state_.layers)
            for (Tensor* t : {&l.conv, &l.ssm})
                if (t->defined()) recurrent_.push_back(*t);
        if (recurrent_.empty()) n_checkpoints_ = 0;
        checkpoints_.reserve(size_t(n_checkpoints_));  // never reallocates: resume() holds pointers into it
    }

    const GrammarVocab& grammar_vocab() {
        if (!grammar_vocab_) grammar_vocab_ = std::make_unique<GrammarVocab>(*tokenizer_);  // once per model
        return *grammar_vocab_;
    }

    // Brings the state to the longest reusable prefix of `prompt` and returns its length. Attention
    // caches are valid up to the common prefix with what they hold (cached_); recurrent state only at
    // the live position or at a checkpoint within that prefix (a checkpoint past it would need K/V rows
    // that were overwritten since). At least the last prompt token is recomputed, unless a checkpoint
    // holds the logits that follow it.
    size_t resume(const std::vector<int32_t>& prompt, std::vector<float>& logits) {
        size_t common = 0;
        while (common < cached_.size() && common < prompt.size() && cached_[common] == prompt[common]) common++;
        if (recurrent_.empty()) {
            cached_.resize(std::min(common, prompt.size() - 1));
            return cached_.size();
        }
        auto usable = [&](const std::vector<int32_t>& tokens, const std::vector<float>& with_logits) {
            return tokens.size() <= common && is_prefix(tokens, prompt) &&
                   (tokens.size() < prompt.size() || !with_logits.empty());
        };
        const bool live_ok = !cached_.empty() && usable(cached_, live_logits_);
        Checkpoint* best = nullptr;
        for (Checkpoint& c : checkpoints_)
            if (usable(c.tokens, c.logits) && c.tokens.size() > (best ? best->tokens.size() : live_ok ? cached_.size() : 0))
                best = &c;
        if (!best && live_ok) {
            if (cached_.size() == prompt.size()) {
                logits = live_logits_;
            } else if (!live_logits_.empty()) {
                // Extending the end of the last generation: keep it, so an edited follow-up (the same
                // history, another next message) resumes here instead of at the end of the last prompt.
                save_checkpoint(live_logits_);
            }
            return cached_.size();
        }
        if (!best) {  // from scratch: position 0 resets the recurrent state
            cached_.clear();
            return 0;
        }
        best->last_used = ++clock_;
        for (size_t i = 0; i < recurrent_.size(); i++) recurrent_[i].assign(best->state[i]);
        engine::realize(recurrent_);
        cached_ = best->tokens;
        if (cached_.size() == prompt.size()) logits = best->logits;
        return cached_.size();
    }

    // Snapshots the recurrent state after cached_ (with the logits that follow it), replacing the least
    // recently used checkpoint when all n_checkpoints_ are taken; a snapshot of the same tokens is refreshed.
    void save_checkpoint(const std::vector<float>& logits) {
        if (n_checkpoints_ == 0) return;
        Checkpoint* slot = nullptr;
        for (Checkpoint& c : checkpoints_)
            if (c.tokens == cached_) slot = &c;
        if (!slot && static_cast<int>(checkpoints_.size()) < n_checkpoints_) {
            Checkpoint& c = checkpoints_.emplace_back();
            for (const Tensor& t : recurrent_) c.state.push_back(Tensor::empty(t.shape(), t.dtype()));
            slot = &c;
        }
        if (!slot)
            slot = &*std::min_element(checkpoints_.begin(), checkpoints_.end(),
                                      [](const Checkpoint& a, const Checkpoint& b) { return a.last_used < b.last_used; });
        slot->tokens = cached_;
        slot->logits = logits;
        slot->last_used = ++clock_;
        for (size_t i = 0; i < recurrent_.size(); i++) slot->state[i].assign(recurrent_[i]);
        engine::realize(slot->state);
    }

    // Evaluates prompt[from:] (positions from..) and returns the last token's logits.
    std::vector<float> prefill(const std::vector<int32_t>& prompt, size_t from,
                               const std::function<void(int, int)>& on_progress) {
        std::vector<float> logits;
        for (size_t pos = from; pos < prompt.size();) {
            if (on_progress) on_progress(int(pos), int(prompt.size()));
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
        if (on_progress) on_progress(int(prompt.size()), int(prompt.size()));
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
    State embed_state_;  // embed()'s own caches, allocated by the first embedding
    engine::DType kv_dtype_ = engine::f16;
    std::vector<int32_t> cached_;  // the tokens whose K/V the cache holds (and the live state follows), in order
    std::vector<float> live_logits_;  // the logits after cached_, when the last generate() ended there
    std::vector<Tensor> recurrent_;   // the recurrent layers' state tensors (empty for attention-only models)
    std::vector<Checkpoint> checkpoints_;
    int n_checkpoints_ = 0;
    uint64_t clock_ = 0;  // for least-recently-used replacement
    engine::Var start_pos_, n_tokens_;
    Tensor chunk_tokens_, one_token_;
    std::unique_ptr<engine::Jit> prefill_, decode_, embed_;
    std::unique_ptr<GrammarVocab> grammar_vocab_;  // the vocabulary trie, built by the first grammar request
};

}  // namespace

std::unique_ptr<Session> open_session(const SessionOptions& options) {
    engine::set_default_device(options.device);  // the model's weights and state go there
    auto single = std::make_unique<ModelSession>(options);
    if (options.parallel <= 1) return single;
    // Several sequences at once over the same model; the single-sequence session keeps embeddings.
    const Model& model = single->model();
    return open_batched_session(std::move(single), model, options);
}

}  // namespace llm
