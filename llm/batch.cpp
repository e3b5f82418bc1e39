// The batch runner: a free list of pool blocks and a block table row per running sequence; each step
// packs every decoding sequence's next token, then prefill chunks up to the token budget, pads the
// batch to its bucket (padding reads a scratch block, stores nothing, its logits are not read), and
// runs it as a captured graph, so steady-state decode with a given number of sequences compiles nothing.
#include "llm/batch.h"

#include <algorithm>
#include <stdexcept>

namespace llm {

namespace {
[[noreturn]] void fail(const std::string& what) { throw std::invalid_argument("[batch] " + what); }
int div_up(int a, int b) { return (a + b - 1) / b; }
}  // namespace

// One bucket's inputs, overwritten each step: tokens, positions, slots, seq (bucket) and logit rows.
struct BatchRunner::Inputs {
    Tensor tokens, positions, slots, seq, logit_rows;
};

int BatchRunner::bucket(int n_tokens) {
    int b = 1;
    while (b < n_tokens) b *= 2;
    return b;
}

BatchRunner::BatchRunner(const Model& model, const BatchOptions& o) : model_(model), o_(o) {
    if (o.block_size <= 0 || o.n_ctx <= 0 || o.max_seqs <= 0) fail("block_size, n_ctx and max_seqs must be positive");
    if (o.token_budget < o.max_seqs || bucket(o.token_budget) > 512)
        fail("token_budget " + std::to_string(o.token_budget) + " must hold a token of every sequence (max_seqs " +
             std::to_string(o.max_seqs) + ") and stay within 512");
    block_size_ = o.block_size;
    blocks_per_seq_ = div_up(o.n_ctx, o.block_size);
    const int n_blocks = o.n_blocks > 0 ? o.n_blocks : o.max_seqs * blocks_per_seq_ + 1;
    pool_ = model.new_kv_pool(n_blocks, o.block_size, o.kv_f16 ? engine::f16 : engine::f32);
    std::vector<Tensor> zeroed;  // a row nobody wrote is read by nobody, but keep the pool free of NaN bits
    for (size_t il = 0; il < pool_.k.size(); il++) {
        zeroed.push_back(pool_.k[il].assign(Tensor::zeros(pool_.k[il].shape(), pool_.k[il].dtype())));
        zeroed.push_back(pool_.v[il].assign(Tensor::zeros(pool_.v[il].shape(), pool_.v[il].dtype())));
    }
    engine::realize(zeroed);
    scratch_block_ = n_blocks - 1;  // padding's keys and values go here
    for (int32_t b = scratch_block_ - 1; b >= 0; b--) free_blocks_.push_back(b);
    for (int r = o.max_seqs - 1; r >= 0; r--) free_rows_.push_back(r);
    scratch_row_ = o.max_seqs;
    table_.assign(size_t(o.max_seqs + 1) * size_t(blocks_per_seq_), scratch_block_);
    jit_ = std::make_unique<engine::Jit>([this](const std::vector<Tensor>& in) {
        PagedBatch b{in[1], in[2], in[3], in[5], block_size_};
        return std::vector<Tensor>{model_.forward_batch(in[0], b, in[4], pool_)};
    });
}

BatchRunner::~BatchRunner() = default;

int BatchRunner::add(BatchRequest r) {
    if (r.prompt.empty()) fail("empty prompt");
    if (r.max_tokens <= 0) fail("max_tokens must be positive");
    const int n_pos = int(r.prompt.size()) + r.max_tokens;
    if (n_pos > o_.n_ctx) fail("prompt + max_tokens = " + std::to_string(n_pos) + " exceeds n_ctx " + std::to_string(o_.n_ctx));
    if (div_up(n_pos, block_size_) > pool_.n_blocks - 1) fail("the request needs more blocks than the pool has");
    Sampler sampler(r.sampling);
    auto s = std::make_unique<Seq>(Seq{next_id_++, std::move(r), std::move(sampler), -1, {}, 0, {}});
    waiting_.push_back(std::move(s));
    return waiting_.back()->id;
}

// A table row and blocks for every position the sequence can reach (no preemption yet).
bool BatchRunner::admit(Seq& s) {
    const int n_blocks = div_up(int(s.request.prompt.size()) + s.request.max_tokens, block_size_);
    if (free_rows_.empty() || int(free_blocks_.size()) < n_blocks) return false;
    s.row = free_rows_.back(), free_rows_.pop_back();
    for (int i = 0; i < n_blocks; i++) {
        s.blocks.push_back(free_blocks_.back()), free_blocks_.pop_back();
        table_[size_t(s.row) * size_t(blocks_per_seq_) + size_t(i)] = s.blocks.back();
    }
    return true;
}

void BatchRunner::release(Seq& s) {
    for (auto it = s.blocks.rbegin(); it != s.blocks.rend(); ++it) free_blocks_.push_back(*it);
    std::fill_n(table_.begin() + ptrdiff_t(s.row) * blocks_per_seq_, blocks_per_seq_, scratch_block_);
    free_rows_.push_back(s.row);
    s.blocks.clear(), s.row = -1;
}

BatchRunner::Inputs& BatchRunner::inputs(int n) {
    std::unique_ptr<Inputs>& in = inputs_[n];
    if (!in) {
        in = std::make_unique<Inputs>();
        for (Tensor* t : {&in->tokens, &in->positions, &in->slots, &in->seq}) *t = Tensor::empty({n}, engine::i32);
        in->logit_rows = Tensor::empty({std::min(n, o_.max_seqs)}, engine::i32);
    }
    return *in;
}

std::vector<BatchResult> BatchRunner::step() {
    while (!waiting_.empty() && admit(*waiting_.front())) running_.push_back(std::move(waiting_.front())), waiting_.erase(waiting_.begin());
    if (running_.empty()) return {};

    // Pack: decoding sequences' next tokens first, then prefill chunks in admission order.
    std::vector<int32_t> tokens, positions, slots, seq, logit_rows;
    std::vector<Seq*> sampled;  // the sequence of each logit row
    auto push = [&](Seq& s, int32_t token) {
        const int p = s.n_past++;
        tokens.push_back(token), positions.push_back(p), seq.push_back(s.row);
        slots.push_back(s.blocks[size_t(p / block_size_)] * block_size_ + p % block_size_);
    };
    for (auto& s : running_)
        if (s->n_past >= int(s->request.prompt.size())) {
            push(*s, s->generated.back());
            logit_rows.push_back(int32_t(tokens.size() - 1)), sampled.push_back(s.get());
        }
    for (auto& s : running_) {
        const int left = int(s->request.prompt.size()) - s->n_past, n = std::min(left, o_.token_budget - int(tokens.size()));
        if (left <= 0 || n <= 0) continue;
        for (int i = 0; i < n; i++) push(*s, s->request.prompt[size_t(s->n_past)]);
        if (n == left) logit_rows.push_back(int32_t(tokens.size() - 1)), sampled.push_back(s.get());
    }

    // Pad to the bucket: token 0 at position 0 of the scratch row (which reads the scratch block), its
    // keys stored nowhere (slot -1: kv_store skips it).
    const int T = bucket(int(tokens.size())), R = std::min(T, o_.max_seqs);
    for (int i = int(tokens.size()); i < T; i++) tokens.push_back(0), positions.push_back(0), seq.push_back(scratch_row_), slots.push_back(-1);
    logit_rows.resize(size_t(R), 0);
    Inputs& in = inputs(T);
    in.tokens.copy_from(tokens.data(), tokens.size() * 4);
    in.positions.copy_from(positions.data(), positions.size() * 4);
    in.slots.copy_from(slots.data(), slots.size() * 4);
    in.seq.copy_from(seq.data(), seq.size() * 4);
    in.logit_rows.copy_from(logit_rows.data(), logit_rows.size() * 4);
    if (!block_table_.defined()) block_table_ = Tensor::empty({o_.max_seqs + 1, blocks_per_seq_}, engine::i32);
    block_table_.copy_from(table_.data(), table_.size() * 4);
    const std::vector<float> logits = (*jit_)({in.tokens, in.positions, in.slots, in.seq, in.logit_rows, block_table_})[0].to_vector<float>();

    // Sample each sequence that had its last prompt token or a decode token in the batch.
    const size_t V = size_t(model_.config().n_vocab);
    std::vector<BatchResult> done;
    for (size_t r = 0; r < sampled.size(); r++) {
        Seq& s = *sampled[r];
        const int32_t id = s.sampler.sample(std::span<const float>(logits.data() + r * V, V));
        s.sampler.accept(id);
        s.generated.push_back(id);
        const bool end = s.request.stop_at_end && std::find(o_.end_ids.begin(), o_.end_ids.end(), id) != o_.end_ids.end();
        if (end || int(s.generated.size()) >= s.request.max_tokens) {
            done.push_back({s.id, s.generated});
            release(s);
        }
    }
    std::erase_if(running_, [](const std::unique_ptr<Seq>& s) { return s->row < 0; });
    return done;
}

}  // namespace llm
