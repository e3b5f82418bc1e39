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
    pool_ = model.new_kv_pool(n_blocks, o.block_size, o.max_seqs, engine::DType::from_gguf(o.kv_type),
                              o.prefix_cache ? (o.n_checkpoints >= 0 ? o.n_checkpoints : 3 * o.max_seqs) : 0);
    recurrent_ = pool_.recurrent();
    checkpoints_.resize(size_t(pool_.n_checkpoints));
    // a row nobody wrote is read by nobody, but keep the pool free of NaN bits (block pools need nothing:
    // memory comes zero-filled, and a zero block reads as zeros)
    std::vector<Tensor> zeroed;
    for (auto* pools : {&pool_.k, &pool_.v, &pool_.conv, &pool_.ssm})
        for (Tensor& t : *pools)
            if (t.defined()) {
                if (!t.dtype().is_quantized()) zeroed.push_back(t.assign(Tensor::zeros(t.shape(), t.dtype())));
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
    for (Tensor* t : {&in_tokens_, &in_positions_, &in_slots_, &in_seq_, &in_load_, &in_save_}) *t = Tensor::empty({o.token_budget}, engine::i32);
    in_logit_rows_ = Tensor::empty({o.max_seqs}, engine::i32);
    jit_ = std::make_unique<engine::Jit>([this](const std::vector<Tensor>& in) {
        auto t = [&](int i) { return in[size_t(i)].slice(0, 0, n_tokens_); };
        PagedBatch b{t(1), t(2), t(3), in[5], block_size_, {}, {}};
        if (in.size() > 6) b.state_load = t(6), b.state_save = t(7);
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
        s.chains.push_back(h);
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
    std::vector<uint64_t> chains;
    if (o_.prefix_cache)
        for (int i = 0; (i + 1) * block_size_ <= s.n_prompt - 1; i++) {
            const int32_t* tokens = s.tokens.data() + size_t(i) * size_t(block_size_);
            const uint64_t h = chain_hash(chains.empty() ? hash_key_ : chains.back(), tokens);
            auto it = cache_.find(h);
            if (it == cache_.end() || !std::equal(tokens, tokens + block_size_, blocks_[size_t(it->second)].tokens.begin())) break;
            shared.push_back(it->second), chains.push_back(h);
        }
    int load = -1;  // recurrent: only as far as a checkpoint holds the state
    if (recurrent_) {
        while (!shared.empty()) {
            auto it = checkpoints_by_chain_.find(chains.back());
            if (it != checkpoints_by_chain_.end() && checkpoints_[size_t(it->second)].blocks == int(shared.size())) {
                load = it->second;
                break;
            }
            shared.pop_back(), chains.pop_back();
        }
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
    s.n_registered = int(shared.size()), s.chain = chains.empty() ? hash_key_ : chains.back(), s.chains = chains;
    prefix_hit_tokens_ += s.n_cached;
    if (recurrent_) {
        if (load >= 0) {
            Checkpoint& c = checkpoints_[size_t(load)];
            c.pins++, c.last_used = ++clock_;
            s.load_slot = load;
        }
        s.prompt_blocks = (s.n_prompt - 1) / block_size_;
        if (o_.prefix_cache && s.prompt_blocks * block_size_ > s.n_past) s.prompt_slot = take_checkpoint(s.id);
    }
    return true;
}

// --- recurrent checkpoints -------------------------------------------------------------------------

int BatchRunner::take_checkpoint(int owner) {
    int best = -1;
    for (int i = 0; i < int(checkpoints_.size()); i++) {
        const Checkpoint& c = checkpoints_[size_t(i)];
        if (c.owner >= 0 || c.pins > 0) continue;
        if (!c.saved) {
            best = i;
            break;
        }
        if (best < 0 || c.last_used < checkpoints_[size_t(best)].last_used) best = i;
    }
    if (best < 0) return -1;
    Checkpoint& c = checkpoints_[size_t(best)];
    unlist(c);
    c = Checkpoint{};
    c.owner = owner;
    return best;
}

void BatchRunner::unlist(Checkpoint& c) {
    if (c.listed) checkpoints_by_chain_.erase(c.chain);
    c.listed = false;
}

// The row the state after position pos is saved to: the prompt's last block boundary, or a later one.
int32_t BatchRunner::save_mark(Seq& s, int pos) {
    if (!recurrent_ || !o_.prefix_cache || (pos + 1) % block_size_) return -1;
    const int blocks = (pos + 1) / block_size_;
    if (blocks == s.prompt_blocks && s.prompt_slot >= 0) return int32_t(pool_.n_seqs + s.prompt_slot);
    if (blocks <= s.prompt_blocks) return -1;
    if (s.tail_slot < 0) s.tail_slot = take_checkpoint(s.id);
    if (s.tail_slot < 0) return -1;
    Checkpoint& c = checkpoints_[size_t(s.tail_slot)];
    c.saved = false, c.blocks = blocks;  // saved once the step ran
    return int32_t(pool_.n_seqs + s.tail_slot);
}

// A leaving sequence's checkpoints stay for later sequences: the prompt's (listed since it was saved)
// and the last one it generated past, unless an equal one is listed already.
void BatchRunner::release_checkpoints(Seq& s) {
    if (s.load_slot >= 0) checkpoints_[size_t(s.load_slot)].pins--, s.load_slot = -1;  // it never started
    for (int* slot : {&s.prompt_slot, &s.tail_slot}) {
        if (*slot < 0) continue;
        Checkpoint& c = checkpoints_[size_t(*slot)];
        c.owner = -1, c.last_used = ++clock_;
        if (c.saved && !c.listed && !checkpoints_by_chain_.contains(c.chain)) c.listed = true, checkpoints_by_chain_[c.chain] = *slot;
        if (!c.listed) c = Checkpoint{};
        *slot = -1;
    }
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
        release_checkpoints(**it);
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
    for (Checkpoint& c : checkpoints_)
        if (c.owner < 0 && c.pins == 0) unlist(c), c = Checkpoint{};
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
    p.checkpoints = int(std::count_if(checkpoints_.begin(), checkpoints_.end(), [](const Checkpoint& c) { return c.saved; }));
    return p;
}

std::vector<SeqLogits> BatchRunner::step() {
    while (!waiting_.empty() && admit(*waiting_.front())) running_.push_back(std::move(waiting_.front())), waiting_.erase(waiting_.begin());

    // Pack: decoding sequences' next tokens first, then prefill chunks in admission order.
    std::vector<int32_t> tokens, positions, slots, seq, logit_rows, load, save;
    std::vector<int> loaded;    // the checkpoints sequences start from in this step
    std::vector<Seq*> sampled;  // the sequence of each logit row
    auto push_token = [&](Seq& s) {
        const int p = s.n_past++;
        tokens.push_back(s.tokens[size_t(p)]), positions.push_back(p), seq.push_back(s.row);
        slots.push_back(s.blocks[size_t(p / block_size_)] * block_size_ + p % block_size_);
        load.push_back(s.load_slot >= 0 ? int32_t(pool_.n_seqs + s.load_slot) : -1);
        if (s.load_slot >= 0) loaded.push_back(s.load_slot), s.load_slot = -1;  // its first token only
        save.push_back(save_mark(s, p));
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
    // Packed: no checkpoint is taken for a save until the next step, so the ones loaded now may go then.
    for (int index : loaded) checkpoints_[size_t(index)].pins--;
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
    std::vector<Tensor> inputs = {in_tokens_, in_positions_, in_slots_, in_seq_, in_logit_rows_, block_table_};
    if (recurrent_) {
        in_load_.copy_from(load.data(), load.size() * 4), in_save_.copy_from(save.data(), save.size() * 4);
        inputs.push_back(in_load_), inputs.push_back(in_save_);
    }
    logits_ = (*jit_)(inputs)[0].to_vector<float>();

    for (auto& s : running_) register_full_blocks(*s);
    // The checkpoints this step saved: the prompt's is listed at once (it is never written again), a
    // later one when its sequence leaves (until then the next boundary overwrites it).
    for (size_t t = 0; t < save.size(); t++) {
        if (save[t] < 0) continue;
        const int index = save[t] - pool_.n_seqs;
        Checkpoint& c = checkpoints_[size_t(index)];
        const Seq* s = find(c.owner);
        c.blocks = (positions[t] + 1) / block_size_;
        c.chain = s->chains[size_t(c.blocks - 1)], c.saved = true, c.last_used = ++clock_;
        if (index == s->prompt_slot && !checkpoints_by_chain_.contains(c.chain)) c.listed = true, checkpoints_by_chain_[c.chain] = index;
    }
    const size_t V = size_t(model_.config().n_vocab);
    std::vector<SeqLogits> out;
    for (size_t r = 0; r < sampled.size(); r++) {
        sampled[r]->awaiting = true;
        out.push_back({sampled[r]->id, std::span<const float>(logits_.data() + r * V, V)});
    }
    return out;
}

}  // namespace llm
