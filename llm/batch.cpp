// The batch runner: a block table row and blocks per running sequence, a prefix cache of full blocks
// keyed by the hash of their content and everything before it; each step packs every decoding
// sequence's next token, then prefill chunks up to the token budget, and replays one captured graph
// whose token and logit-row counts are bound Vars, so no step after the first compiles anything.
#include "llm/batch.h"

#include <algorithm>
#include <random>
#include <stdexcept>

namespace llm {

namespace {
[[noreturn]] void fail(const std::string& what) { throw std::invalid_argument("[batch] " + what); }
int div_up(int a, int b) { return (a + b - 1) / b; }

uint64_t mix(uint64_t x) {  // splitmix64's finalizer
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}
}  // namespace

BatchRunner::BatchRunner(const Model& model, const BatchOptions& o) : model_(model), o_(o) {
    if (o.block_size <= 0 || o.n_ctx <= 0 || o.max_seqs <= 0) fail("block_size, n_ctx and max_seqs must be positive");
    if (o.token_budget < o.max_seqs || o.token_budget > 512)
        fail("token_budget " + std::to_string(o.token_budget) + " must hold a token of every sequence (max_seqs " +
             std::to_string(o.max_seqs) + ") and stay within 512");
    block_size_ = o.block_size;
    blocks_per_seq_ = div_up(o.n_ctx, o.block_size);
    const int n_blocks = o.n_blocks > 0 ? o.n_blocks : o.max_seqs * blocks_per_seq_;
    pool_ = model.new_kv_pool(n_blocks, o.block_size, o.max_seqs, o.kv_f16 ? engine::f16 : engine::f32);
    // A recurrent state sums up every position before it: no prefix of it can be shared by blocks.
    if (pool_.recurrent()) o_.prefix_cache = false;
    std::vector<Tensor> zeroed;  // a row nobody wrote is read by nobody, but keep the pool free of NaN bits
    for (auto* pools : {&pool_.k, &pool_.v, &pool_.conv, &pool_.ssm})
        for (Tensor& t : *pools)
            if (t.defined()) {
                zeroed.push_back(t.assign(Tensor::zeros(t.shape(), t.dtype())));
                pool_bytes_ += int64_t(t.dtype().nbytes(t.numel().value()));
            }
    engine::realize(zeroed);
    blocks_.resize(size_t(n_blocks));
    for (int32_t b = n_blocks - 1; b >= 0; b--) free_blocks_.push_back(b);
    for (int r = o.max_seqs - 1; r >= 0; r--) free_rows_.push_back(r);
    table_.assign(size_t(o.max_seqs) * size_t(blocks_per_seq_), 0);  // entries past a sequence's blocks are never read
    // A secret key: which prompts share blocks must not be something a client can steer by collisions.
    hash_key_ = (uint64_t(std::random_device{}()) << 32) ^ std::random_device{}();
    // One capture serves every step: the inputs have room for a full step, n_tokens and n_rows say how
    // much of them this step uses.
    n_tokens_ = engine::Var("n_tokens", 1, o.token_budget);
    n_rows_ = engine::Var("n_rows", 1, o.max_seqs);
    for (Tensor* t : {&in_tokens_, &in_positions_, &in_slots_, &in_seq_}) *t = Tensor::empty({o.token_budget}, engine::i32);
    in_logit_rows_ = Tensor::empty({o.max_seqs}, engine::i32);
    jit_ = std::make_unique<engine::Jit>([this](const std::vector<Tensor>& in) {
        auto t = [&](int i) { return in[size_t(i)].slice(0, 0, n_tokens_); };
        PagedBatch b{t(1), t(2), t(3), in[5], block_size_};
        return std::vector<Tensor>{model_.forward_batch(t(0), b, in[4].slice(0, 0, n_rows_), pool_)};
    });
}

BatchRunner::~BatchRunner() = default;

int BatchRunner::add(BatchRequest r) {
    if (r.prompt.empty()) fail("empty prompt");
    if (r.max_tokens <= 0) fail("max_tokens must be positive");
    const int n_prompt = int(r.prompt.size());
    if (n_prompt > o_.n_ctx) fail("the prompt has " + std::to_string(n_prompt) + " tokens, more than n_ctx " + std::to_string(o_.n_ctx));
    auto s = std::make_unique<Seq>();
    s->id = next_id_++;
    s->n_prompt = n_prompt;
    s->n_reserved = int(std::min<int64_t>(int64_t(n_prompt) + r.max_tokens, o_.n_ctx));
    if (div_up(s->n_reserved, block_size_) > int(blocks_.size())) fail("the request needs more blocks than the pool has");
    s->tokens = std::move(r.prompt);
    s->chain = hash_key_;
    waiting_.push_back(std::move(s));
    return waiting_.back()->id;
}

// --- blocks: free, held, cached -------------------------------------------------------------------

int32_t BatchRunner::take_block() {  // a free block, else the least recently used cached one
    if (!free_blocks_.empty()) {
        const int32_t b = free_blocks_.back();
        free_blocks_.pop_back();
        return b;
    }
    const int32_t b = evictable_.begin()->second;
    evictable_.erase(evictable_.begin());
    Block& k = blocks_[size_t(b)];
    cache_.erase(k.hash);
    k.cached = false, k.tokens.clear();
    return b;
}

void BatchRunner::ref(int32_t b) {
    Block& k = blocks_[size_t(b)];
    if (k.refs++ == 0 && k.cached) evictable_.erase({k.last_used, b});
}

void BatchRunner::unref(int32_t b) {
    Block& k = blocks_[size_t(b)];
    if (--k.refs > 0) return;
    if (k.cached) k.last_used = ++clock_, evictable_.insert({k.last_used, b});
    else free_blocks_.push_back(b);
}

uint64_t BatchRunner::chain_hash(uint64_t parent, const int32_t* tokens) const {
    uint64_t h = parent;
    for (int i = 0; i < block_size_; i++) h = mix(h ^ (uint64_t(uint32_t(tokens[i])) + 0x9e3779b97f4a7c15ull));
    return h;
}

// Blocks that filled up (their positions all written) join the cache, unless an equal one is there.
void BatchRunner::register_full_blocks(Seq& s) {
    if (!o_.prefix_cache) return;
    while ((s.n_registered + 1) * block_size_ <= s.n_past) {
        const int32_t* tokens = s.tokens.data() + size_t(s.n_registered) * size_t(block_size_);
        const uint64_t h = chain_hash(s.chain, tokens);
        Block& k = blocks_[size_t(s.blocks[size_t(s.n_registered)])];
        if (!k.cached && !cache_.contains(h)) {
            k.cached = true, k.hash = h, k.tokens.assign(tokens, tokens + block_size_);
            cache_[h] = s.blocks[size_t(s.n_registered)];
        }
        s.chain = h, s.n_registered++;
    }
}

// A table row and blocks for every position it may reach: the cached blocks of its prompt's longest
// cached prefix (at least its last prompt token is computed again, for the logits), then fresh ones.
bool BatchRunner::admit(Seq& s) {
    if (free_rows_.empty()) return false;
    std::vector<int32_t> shared;
    uint64_t chain = hash_key_;
    if (o_.prefix_cache)
        for (int i = 0; (i + 1) * block_size_ <= s.n_prompt - 1; i++) {
            const int32_t* tokens = s.tokens.data() + size_t(i) * size_t(block_size_);
            const uint64_t h = chain_hash(chain, tokens);
            auto it = cache_.find(h);
            if (it == cache_.end() || !std::equal(tokens, tokens + block_size_, blocks_[size_t(it->second)].tokens.begin())) break;
            shared.push_back(it->second), chain = h;
        }
    for (int32_t b : shared) ref(b);  // now they cannot be evicted for the fresh ones
    const int n_fresh = div_up(s.n_reserved, block_size_) - int(shared.size());
    if (int(free_blocks_.size() + evictable_.size()) < n_fresh) {
        for (int32_t b : shared) unref(b);
        return false;
    }
    s.blocks = shared;
    for (int i = 0; i < n_fresh; i++) {
        const int32_t b = take_block();
        ref(b);
        s.blocks.push_back(b);
    }
    s.row = free_rows_.back(), free_rows_.pop_back();
    std::copy(s.blocks.begin(), s.blocks.end(), table_.begin() + ptrdiff_t(s.row) * blocks_per_seq_);
    s.n_past = s.n_cached = int(shared.size()) * block_size_;
    s.n_registered = int(shared.size()), s.chain = chain;
    prefix_hit_tokens_ += s.n_cached;
    return true;
}

void BatchRunner::release(Seq& s) {
    // later blocks first: an evicted prefix's continuation is useless, so it should go before it
    for (auto it = s.blocks.rbegin(); it != s.blocks.rend(); ++it) unref(*it);
    std::fill_n(table_.begin() + ptrdiff_t(s.row) * blocks_per_seq_, blocks_per_seq_, 0);
    free_rows_.push_back(s.row);
    s.blocks.clear(), s.row = -1;
}

// --- sequences ---------------------------------------------------------------------------------------

BatchRunner::Seq* BatchRunner::find(int id) const {
    for (const auto* list : {&running_, &waiting_})
        for (const auto& s : *list)
            if (s->id == id) return s.get();
    return nullptr;
}

bool BatchRunner::push(int id, int32_t token) {
    Seq* s = find(id);
    if (!s || !s->awaiting) fail("push: sequence " + std::to_string(id) + " is not waiting for a token");
    if (int(s->tokens.size()) >= s->n_reserved) return false;
    s->tokens.push_back(token);
    s->awaiting = false;
    return true;
}

void BatchRunner::finish(int id) {
    for (auto* list : {&running_, &waiting_}) {
        auto it = std::find_if(list->begin(), list->end(), [id](const std::unique_ptr<Seq>& s) { return s->id == id; });
        if (it == list->end()) continue;
        if ((*it)->row >= 0) release(**it);
        list->erase(it);
        return;
    }
}

bool BatchRunner::has_input() const {
    for (const auto& s : running_)
        if (!s->awaiting && int(s->tokens.size()) > s->n_past) return true;
    if (waiting_.empty() || free_rows_.empty()) return false;
    // enough blocks even if none were shared: then admit() takes it (sharing may let it in sooner)
    return int(free_blocks_.size() + evictable_.size()) >= div_up(waiting_.front()->n_reserved, block_size_);
}

void BatchRunner::drop_cache() {
    for (const auto& [last_used, b] : evictable_) {
        Block& k = blocks_[size_t(b)];
        cache_.erase(k.hash);
        k.cached = false, k.tokens.clear();
        free_blocks_.push_back(b);
    }
    evictable_.clear();
}

int BatchRunner::n_awaiting() const {
    return int(std::count_if(running_.begin(), running_.end(), [](const std::unique_ptr<Seq>& s) { return s->awaiting; }));
}

std::optional<SeqStatus> BatchRunner::status(int id) const {
    const Seq* s = find(id);
    if (!s) return std::nullopt;
    return SeqStatus{s->row >= 0, s->n_prompt, s->n_cached, s->n_past, int(s->tokens.size()) - s->n_prompt};
}

PoolStats BatchRunner::stats() const {
    PoolStats p;
    p.running = int(running_.size()), p.waiting = int(waiting_.size());
    p.blocks_free = int(free_blocks_.size()), p.blocks_cached = int(evictable_.size());
    p.blocks_used = int(blocks_.size()) - p.blocks_free - p.blocks_cached;
    p.block_size = block_size_;
    p.prefix_hit_tokens = prefix_hit_tokens_;
    p.pool_bytes = pool_bytes_;
    return p;
}

std::vector<SeqLogits> BatchRunner::step() {
    while (!waiting_.empty() && admit(*waiting_.front())) running_.push_back(std::move(waiting_.front())), waiting_.erase(waiting_.begin());

    // Pack: decoding sequences' next tokens first, then prefill chunks in admission order.
    std::vector<int32_t> tokens, positions, slots, seq, logit_rows;
    std::vector<Seq*> sampled;  // the sequence of each logit row
    auto push_token = [&](Seq& s) {
        const int p = s.n_past++;
        tokens.push_back(s.tokens[size_t(p)]), positions.push_back(p), seq.push_back(s.row);
        slots.push_back(s.blocks[size_t(p / block_size_)] * block_size_ + p % block_size_);
    };
    for (auto& s : running_)
        if (!s->awaiting && s->n_past >= s->n_prompt && int(s->tokens.size()) > s->n_past) {
            push_token(*s);
            logit_rows.push_back(int32_t(tokens.size() - 1)), sampled.push_back(s.get());
        }
    for (auto& s : running_) {
        const int left = s->n_prompt - s->n_past, n = std::min(left, o_.token_budget - int(tokens.size()));
        if (left <= 0 || n <= 0) continue;
        for (int i = 0; i < n; i++) push_token(*s);
        if (n == left) logit_rows.push_back(int32_t(tokens.size() - 1)), sampled.push_back(s.get());
    }
    if (tokens.empty()) return {};

    // At least one logit row (a step of prefill chunks that end no prompt reads row 0 and drops it).
    const int T = int(tokens.size()), R = std::max<int>(1, int(logit_rows.size()));
    logit_rows.resize(size_t(R), 0);
    n_tokens_.bind(T), n_rows_.bind(R);
    in_tokens_.copy_from(tokens.data(), tokens.size() * 4);
    in_positions_.copy_from(positions.data(), positions.size() * 4);
    in_slots_.copy_from(slots.data(), slots.size() * 4);
    in_seq_.copy_from(seq.data(), seq.size() * 4);
    in_logit_rows_.copy_from(logit_rows.data(), logit_rows.size() * 4);
    if (!block_table_.defined()) block_table_ = Tensor::empty({o_.max_seqs, blocks_per_seq_}, engine::i32);
    block_table_.copy_from(table_.data(), table_.size() * 4);
    logits_ = (*jit_)({in_tokens_, in_positions_, in_slots_, in_seq_, in_logit_rows_, block_table_})[0].to_vector<float>();

    for (auto& s : running_) register_full_blocks(*s);
    const size_t V = size_t(model_.config().n_vocab);
    std::vector<SeqLogits> out;
    for (size_t r = 0; r < sampled.size(); r++) {
        sampled[r]->awaiting = true;
        out.push_back({sampled[r]->id, std::span<const float>(logits_.data() + r * V, V)});
    }
    return out;
}

}  // namespace llm
