// The generation interface every front end uses (server, terminal chat, `tinyllm run`): a Session is
// one sequence's state (KV cache, recurrent state) over a loaded model; generate() reuses the longest
// prefix it still holds, prefills the rest in chunks, then samples token by token.
// (Interface agreed between modules; llm owns it.)
#pragma once

#include "gguf/types.h"
#include "tokenizer/tokenizer.h"

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace llm {

struct Grammar;  // llm/grammar.h

// A grammar the sampler follows (llm/grammar.h): from the first token, or (lazy) from the first
// trigger on.
struct GrammarSpec {
    std::shared_ptr<const Grammar> grammar;  // null: unconstrained
    std::vector<std::string> trigger_words;  // lazy: constrain from where one of these appears in the text
    std::vector<int32_t> trigger_tokens;     // lazy: constrain from this token on
    bool trigger_at_start = false;           // trigger words count only where they begin the reply (after blank space)
    bool lazy() const { return !trigger_words.empty() || !trigger_tokens.empty(); }
};

struct SamplingParams {
    float temperature = 0.0f;  // 0: greedy (first maximum on ties)
    int top_k = 0;             // 0: off
    float top_p = 1.0f;        // 1: off
    float min_p = 0.0f;        // 0: off
    float presence_penalty = 0.0f;   // OpenAI semantics, over generated tokens
    float frequency_penalty = 0.0f;
    std::map<int32_t, float> logit_bias;
    uint64_t seed = 0;
};

// Where every front end starts (server requests without the field, `tinyllm run`, `tinyllm chat`):
// llama.cpp's defaults, which small local models need more than OpenAI's. SamplingParams{} is greedy.
inline SamplingParams default_sampling() {
    SamplingParams s;
    s.temperature = 0.8f;
    s.top_k = 40;
    s.top_p = 0.95f;
    s.min_p = 0.05f;
    return s;
}

// What happened at one generated step.
struct TokenStep {
    int32_t id = -1;
    float logprob = 0.0f;                                // log-softmax of the sampled id (raw logits), when
                                                         // GenerateOptions::logprobs or n_top_logprobs > 0
    std::vector<std::pair<int32_t, float>> top_logprobs;  // when GenerateOptions::n_top_logprobs > 0
    std::vector<std::pair<int32_t, float>> top_logits;    // raw logits, when n_top_logits > 0
    const float* logits = nullptr;  // all n_vocab raw logits of this step; valid only inside on_token
};

struct GenerateOptions {
    int max_tokens = 128;
    SamplingParams sampling;
    bool stop_at_end = true;           // stop after an end-of-generation token (it is reported)
    bool logprobs = false;             // fill TokenStep::logprob (implied by n_top_logprobs > 0)
    int n_top_logprobs = 0;
    int n_top_logits = 0;
    std::vector<int32_t> forced;        // teacher forcing: feed these instead of the sampled ids
    // Only tokens the grammar accepts are sampled; end-of-generation only where it may end. A
    // generation ends (STOP) when no token can continue it.
    GrammarSpec grammar;
    // Called for every generated token; return false to stop (e.g. a stop string matched).
    std::function<bool(const TokenStep&)> on_token;
    const std::atomic<bool>* cancel = nullptr;  // checked between tokens (client went away, Ctrl-C)
    // Polled (besides cancel) while a parallel session's sequence waits for its place or its prefill:
    // true ends the generation (CANCELLED) and frees its place within a step.
    std::function<bool()> abandoned;
    // Called before prefill and after each prefill chunk with the prompt tokens done so far (reused
    // ones included) and the prompt's length: streams send progress and keep-alives from here.
    std::function<void(int n_done, int n_total)> on_prefill;
};

enum class FinishReason { STOP, LENGTH, CANCELLED, CALLBACK };

struct GenerateResult {
    std::vector<int32_t> ids;   // generated ids
    FinishReason finish = FinishReason::LENGTH;
    int n_prompt = 0;           // prompt tokens
    int n_reused = 0;           // prompt tokens reused from the previous sequence (not recomputed)
    double t_prefill_ms = 0.0;
    double t_decode_ms = 0.0;
};

// How an embedding pools a text's final hidden states; the values are GGUF's <arch>.pooling_type.
enum class Pooling { NONE = 0, MEAN = 1, CLS = 2, LAST = 3 };

struct ModelInfo {
    std::string name;           // general.name or the file name
    std::string path;
    std::string architecture;
    std::string chat_template;  // tokenizer.chat_template, or "" when the model has none
    std::string tokenizer_pre;  // tokenizer.ggml.pre
    int n_ctx = 0;              // the context this session was created with
    int n_vocab = 0;
    int n_embd = 0;             // width of the hidden states (and of embeddings)
    Pooling pooling = Pooling::NONE;  // what the GGUF declares (<arch>.pooling_type)
};

// A session that runs several sequences at once: what runs, what waits, and its KV pool (GET /slots,
// /metrics).
struct SlotStatus {
    int id = -1;           // the sequence's number, in arrival order
    bool running = false;  // else waiting for a place in the batch
    int n_prompt = 0, n_cached = 0;  // prompt tokens; of those, shared from the prefix cache
    int n_past = 0;        // positions computed
    int n_generated = 0;
};
struct ServingStats {
    int parallel = 1;
    int running = 0, waiting = 0;
    int blocks_used = 0, blocks_cached = 0, blocks_free = 0, block_size = 0;  // the KV pool
    int64_t pool_bytes = 0;
    int64_t prefix_hit_tokens = 0;  // prompt tokens served from the prefix cache, since the start
    int checkpoints = 0;            // recurrent states kept for prefix sharing (hybrid models)
    std::vector<SlotStatus> slots;
};

class Session {
public:
    virtual ~Session() = default;
    // How many generate() calls may run at once (from different threads); 1: one at a time.
    virtual int max_parallel() const { return 1; }
    virtual ServingStats serving_stats() const { return {}; }
    virtual const ModelInfo& info() const = 0;
    virtual const tok::Tokenizer& tokenizer() const = 0;
    // Throws std::length_error when the prompt alone does not fit the context; generation stops with
    // LENGTH when the context fills up.
    virtual GenerateResult generate(const std::vector<int32_t>& prompt, const GenerateOptions& options) = 0;
    virtual void reset() = 0;  // forget all cached state
    // The embedding of `tokens`: the final hidden states (after output_norm) pooled as `pooling` says,
    // L2-normalized. Runs in a state of its own (a second cache, allocated by the first call), so the
    // next generate() still reuses its cached prefix.
    // Throws std::invalid_argument for NONE, an empty or oversized input.
    virtual std::vector<float> embed(const std::vector<int32_t>& tokens, Pooling pooling) = 0;
};

struct SessionOptions {
    std::string model_path;     // GGUF file (first part of a split set)
    int n_ctx = 0;              // 0: the model's context length, capped at 4096
    std::string device = "CPU"; // "CPU", "AMD", ...
    // KV cache type (llama.cpp's -ctk/-ctv): F16 (its default), F32, or Q8_0 / Q4_0 blocks of 32 values
    // along the head dimension, on a device that reads them (the CPU), for attention layers whose head
    // dims are multiples of 32 (MLA's latent cache stays F16/F32). open_session refuses the rest.
    gguf::Type kv_type = gguf::Type::F16;
    // Hybrid models (GatedDeltaNet, KDA): recurrent state cannot be rolled back to an earlier position,
    // so the session keeps this many snapshots of it at turn boundaries (end of a prompt, end of a
    // generation) to resume follow-ups and regenerations from. Each costs the recurrent state's size.
    int n_checkpoints = 4;
    // Sequences generated at once (attention-only architectures; the others run one at a time). With
    // more than one, n_ctx 0 means the model's own context up to 32768, and the sequences share one
    // paged KV pool of pool_tokens positions (0: parallel x n_ctx) whose full blocks are reused by
    // requests that start with the same tokens.
    int parallel = 1;
    int pool_tokens = 0;
};

// Loads the model and returns a session ready to generate. Throws with a clear message on any
// problem (missing file, corrupt GGUF, unsupported architecture, missing tensor).
std::unique_ptr<Session> open_session(const SessionOptions& options);

}  // namespace llm
