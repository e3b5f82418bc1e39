// The session that serves several callers at once. generate() may run on many threads: a scheduler
// thread owns the BatchRunner and runs one forward per step over every running sequence, handing each
// caller the logits of its own sequence; the caller chooses its token (its own sampler, grammar,
// logprobs and callbacks, as in the single-sequence session: TokenPicker) and hands it back. A step
// waits briefly for the callers it just served, so the sequences keep decoding together; one that is
// slow (a client reading slowly) is left for a later step, and not waited for again until it answers
// in time.
#include "llm/batch.h"
#include "llm/session_impl.h"
#include "llm/token_picker.h"

#include <chrono>
#include <condition_variable>
#include <exception>
#include <fstream>
#include <mutex>
#include <set>
#include <stdexcept>
#include <thread>
#include <unordered_map>

namespace llm {

namespace {

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

constexpr auto STRAGGLER_WAIT = std::chrono::milliseconds(10);  // a step waits this long for the callers it served last
constexpr auto POLL = std::chrono::milliseconds(50);            // a waiting caller checks for cancellation this often
constexpr int BLOCK_SIZE = 16;
constexpr int TOKEN_BUDGET = 256;  // tokens per step: the decoding sequences' next tokens, then prefill chunks

// One generate() call's side of the conversation with the scheduler (under the session's mutex).
struct Mailbox {
    std::vector<int32_t> prompt;
    int max_tokens = 0;
    int id = -1;                    // the runner's sequence, once added
    bool ready = false;             // logits hold the distribution of its next token
    Clock::time_point delivered;    // when they were handed over
    std::vector<float> logits;
    bool running = false;           // admitted into the batch
    int n_cached = 0, n_past = 0;   // prefix-cache hit, positions computed
    std::exception_ptr error;
};

struct Command {
    enum Kind { ADD, PUSH, FINISH, DROP_CACHE } kind;
    std::shared_ptr<Mailbox> box;
    int32_t token = -1;
};

// Memory the system could still give us, from /proc/meminfo (0 when unknown).
int64_t available_bytes() {
    std::ifstream f("/proc/meminfo");
    std::string key;
    int64_t kb = 0;
    std::string unit;
    while (f >> key >> kb >> unit)
        if (key == "MemAvailable:") return kb * 1024;
    return 0;
}

// The pool's default size: every sequence its whole context, and at least four contexts (a prefix
// cache needs room beyond the running sequences), within half of the memory available.
int64_t default_pool_tokens(const ModelConfig& c, const SessionOptions& o, int n_ctx) {
    int64_t per_token = 0;
    for (int il = 0; il < c.n_layer; il++) {
        const int values = c.layer_kind[il] == LayerKind::MLA ? c.mla.kv_lora_rank + c.mla.rope_dim : c.n_head_kv * (c.head_dim_k + c.head_dim_v);
        per_token += int64_t(gguf::row_bytes(o.kv_type, values).value_or(0));
    }
    const int64_t wanted = int64_t(std::max(o.parallel, 4)) * n_ctx, budget = available_bytes() / 2 / std::max<int64_t>(per_token, 1);
    return budget > 0 ? std::max<int64_t>(std::min(wanted, budget), n_ctx) : wanted;
}

class BatchedSession final : public Session {
public:
    BatchedSession(std::unique_ptr<Session> single, const Model& model, const SessionOptions& o)
        : single_(std::move(single)), info_(single_->info()), parallel_(o.parallel) {
        BatchOptions bo;
        bo.block_size = BLOCK_SIZE;
        bo.max_seqs = o.parallel;
        bo.token_budget = std::max(TOKEN_BUDGET, o.parallel);
        bo.kv_type = o.kv_type;
        const int64_t pool = o.pool_tokens > 0 ? o.pool_tokens : default_pool_tokens(model.config(), o, info_.n_ctx);
        bo.n_blocks = int((pool + BLOCK_SIZE - 1) / BLOCK_SIZE);
        info_.n_ctx = int(std::min<int64_t>(info_.n_ctx, int64_t(bo.n_blocks) * BLOCK_SIZE));  // one sequence fits the pool
        bo.n_ctx = info_.n_ctx;
        runner_ = std::make_unique<BatchRunner>(model, bo);
        snapshot();
        scheduler_ = std::thread([this] { schedule(); });
    }

    ~BatchedSession() override {
        {
            std::lock_guard lock(mu_);
            stop_ = true;
        }
        work_.notify_all();
        scheduler_.join();
    }

    const ModelInfo& info() const override { return info_; }
    const tok::Tokenizer& tokenizer() const override { return single_->tokenizer(); }
    int max_parallel() const override { return parallel_; }
    ServingStats serving_stats() const override {
        std::lock_guard lock(mu_);
        return stats_;
    }
    void reset() override {  // returns once the cache is empty
        auto box = std::make_shared<Mailbox>();
        post({Command::DROP_CACHE, box});
        std::unique_lock lock(mu_);
        ready_.wait(lock, [&] { return box->ready || box->error; });
    }

    std::vector<float> embed(const std::vector<int32_t>& tokens, Pooling pooling) override {
        std::lock_guard lock(engine_mu_);  // between two steps
        return single_->embed(tokens, pooling);
    }

    GenerateResult generate(const std::vector<int32_t>& prompt, const GenerateOptions& opt) override {
        check_prompt(prompt, info_);
        GenerateResult r;
        r.n_prompt = int(prompt.size());
        const int n_steps = opt.forced.empty() ? opt.max_tokens : std::min<int>(opt.max_tokens, int(opt.forced.size()));
        if (n_steps <= 0) return r;
        TokenPicker picker(opt, tokenizer(), opt.grammar.grammar ? &grammar_vocab() : nullptr);

        auto box = std::make_shared<Mailbox>();
        box->prompt = prompt, box->max_tokens = n_steps;
        post({Command::ADD, box});
        struct Leave {  // however generate() ends, the sequence leaves the batch at the next step
            BatchedSession& s;
            std::shared_ptr<Mailbox> box;
            ~Leave() { s.post({Command::FINISH, box}); }
        } leave{*this, box};

        const auto t0 = Clock::now();
        std::vector<float> logits;
        if (!await_logits(*box, opt, logits, true)) {
            r.finish = FinishReason::CANCELLED;
            return r;
        }
        {
            std::lock_guard lock(mu_);
            r.n_reused = box->n_cached;
        }
        r.t_prefill_ms = ms_since(t0);
        const auto t1 = Clock::now();
        while (picker.next(logits, r)) {
            if (r.n_prompt + int(r.ids.size()) - 1 >= info_.n_ctx) break;  // context full: LENGTH
            post({Command::PUSH, box, r.ids.back()});
            if (!await_logits(*box, opt, logits, false)) {
                r.finish = FinishReason::CANCELLED;
                break;
            }
        }
        r.t_decode_ms = ms_since(t1);
        return r;
    }

private:
    void post(Command c) {
        {
            std::lock_guard lock(mu_);
            commands_.push_back(std::move(c));
        }
        work_.notify_one();
    }

    // Waits for the next logits of the caller's sequence (reporting the prefill's progress); false when
    // the caller was cancelled first. Rethrows what the scheduler met running it.
    bool await_logits(Mailbox& box, const GenerateOptions& opt, std::vector<float>& logits, bool prefill) {
        int reported = -1;
        std::unique_lock lock(mu_);
        for (;;) {
            if (box.error) std::rethrow_exception(box.error);
            if (prefill && opt.on_prefill && box.running) {  // first what the cache held, then each step's progress
                const int n_total = int(box.prompt.size());
                const int n_done = reported < 0 ? box.n_cached : box.ready ? n_total : box.n_past;
                if (n_done != reported) {
                    reported = n_done;
                    lock.unlock();
                    opt.on_prefill(n_done, n_total);
                    lock.lock();
                    continue;
                }
            }
            if (box.ready) break;
            if (opt.cancel && opt.cancel->load()) return false;
            if (opt.abandoned) {
                lock.unlock();
                const bool gone = opt.abandoned();
                lock.lock();
                if (gone) return false;
                if (box.ready || box.error) continue;
            }
            ready_.wait_for(lock, POLL);
        }
        box.ready = false;
        logits.swap(box.logits);
        return true;
    }

    // The scheduler: applies the callers' commands, then runs a step when some sequence has input and
    // the callers served by the last step have answered (or had STRAGGLER_WAIT to).
    void schedule() {
        std::unique_lock lock(mu_);
        auto deadline = Clock::now();
        for (;;) {
            for (Command& c : commands_) {
                try {
                    apply(c);
                } catch (...) {  // a command the runner refuses ends that request, never the scheduler
                    if (c.box) c.box->error = std::current_exception();
                }
            }
            commands_.clear();
            snapshot();
            if (stop_) {
                for (auto& [id, box] : boxes_) box->error = std::make_exception_ptr(std::runtime_error("[session] closed while generating"));
                ready_.notify_all();
                return;
            }
            ready_.notify_all();
            if (!runner_->has_input()) {
                work_.wait(lock);
                continue;
            }
            if (!served_.empty() && Clock::now() < deadline) {
                work_.wait_until(lock, deadline);
                continue;
            }
            lock.unlock();
            std::vector<SeqLogits> out;
            std::exception_ptr failure;
            try {
                std::lock_guard engine(engine_mu_);
                out = runner_->step();
            } catch (...) {
                failure = std::current_exception();
            }
            lock.lock();
            late_.insert(served_.begin(), served_.end());  // missed the wait: not waited for again until they answer
            served_.clear();
            if (failure) {  // every running sequence ends with the error
                for (auto& [id, box] : boxes_)
                    if (auto st = runner_->status(id); st && st->running) box->error = failure;
                for (auto it = boxes_.begin(); it != boxes_.end();)
                    if (it->second->error) runner_->finish(it->first), it = boxes_.erase(it);
                    else ++it;
            }
            for (const SeqLogits& l : out) {
                Mailbox& box = *boxes_.at(l.id);
                box.logits.assign(l.logits.begin(), l.logits.end());
                box.ready = true, box.delivered = Clock::now();
                if (!late_.contains(l.id)) served_.insert(l.id);
            }
            for (auto& [id, box] : boxes_)
                if (auto st = runner_->status(id)) box->running = st->running, box->n_cached = st->n_cached, box->n_past = st->n_past;
            deadline = Clock::now() + STRAGGLER_WAIT;
        }
    }

    void apply(const Command& c) {
        switch (c.kind) {
        case Command::ADD:
            try {
                c.box->id = runner_->add({c.box->prompt, c.box->max_tokens});
                boxes_[c.box->id] = c.box;
            } catch (...) {
                c.box->error = std::current_exception();
            }
            break;
        case Command::PUSH:
            if (c.box->id < 0 || !boxes_.contains(c.box->id)) break;
            if (!runner_->push(c.box->id, c.token)) c.box->error = std::make_exception_ptr(std::logic_error("[batch] a sequence outran its reserved positions"));
            served_.erase(c.box->id);
            if (Clock::now() - c.box->delivered <= STRAGGLER_WAIT) late_.erase(c.box->id);  // in time again
            break;
        case Command::FINISH:
            if (c.box->id < 0) break;
            runner_->finish(c.box->id);
            boxes_.erase(c.box->id);
            served_.erase(c.box->id), late_.erase(c.box->id);
            break;
        case Command::DROP_CACHE:
            runner_->drop_cache();
            c.box->ready = true;
            break;
        }
    }

    void snapshot() {  // what serving_stats() reports, taken while the runner is still
        const PoolStats p = runner_->stats();
        stats_ = {parallel_, p.running, p.waiting, p.blocks_used, p.blocks_cached, p.blocks_free, p.block_size, p.pool_bytes,
                  p.prefix_hit_tokens, p.checkpoints, {}};
        for (const auto& [id, box] : boxes_)
            if (auto st = runner_->status(id)) stats_.slots.push_back({id, st->running, st->n_prompt, st->n_cached, st->n_past, st->n_generated});
    }

    const GrammarVocab& grammar_vocab() {
        std::call_once(grammar_once_, [this] { grammar_vocab_ = std::make_unique<GrammarVocab>(tokenizer()); });
        return *grammar_vocab_;
    }

    std::unique_ptr<Session> single_;  // owns the model; embeds
    ModelInfo info_;
    int parallel_;
    std::unique_ptr<BatchRunner> runner_;  // the scheduler's (and the constructor's)
    std::mutex engine_mu_;                 // one graph at a time: a step or an embedding

    mutable std::mutex mu_;  // everything below
    std::condition_variable work_;   // the scheduler waits for commands
    std::condition_variable ready_;  // callers wait for logits
    std::vector<Command> commands_;
    std::unordered_map<int, std::shared_ptr<Mailbox>> boxes_;  // running and waiting sequences by runner id
    std::set<int> served_;   // sequences the last step gave logits to that have not answered yet
    std::set<int> late_;     // sequences that let a step start without them (a slow reader): not waited for
                             // until they answer within STRAGGLER_WAIT again
    ServingStats stats_;
    bool stop_ = false;
    std::thread scheduler_;

    std::once_flag grammar_once_;
    std::unique_ptr<GrammarVocab> grammar_vocab_;
};

}  // namespace

std::unique_ptr<Session> open_batched_session(std::unique_ptr<Session> single, const Model& model, const SessionOptions& options) {
    return std::make_unique<BatchedSession>(std::move(single), model, options);
}

}  // namespace llm
