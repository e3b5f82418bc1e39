// Many sequences at once (issue #14, the engine side): one paged KV pool whose blocks the sequences
// hold through block tables, and a runner that packs every decoding sequence's next token plus
// prefill chunks into one forward per step, replayed from one capture whose token count is symbolic. Full
// blocks stay cached by their content after their sequence leaves: a new sequence whose prompt starts
// with the same tokens shares them (reference-counted) instead of recomputing them; unreferenced
// cached blocks are reused least recently used first when the pool has no free one. A model with
// recurrent layers shares a prefix only where a checkpoint holds the recurrent state after it: each
// sequence saves its state at the last block boundary of its prompt (a regenerate or an edited message
// resumes there) and at every block boundary it generates past (the next turn of a chat resumes at the
// last one); checkpoints are kept least recently used.
//
// The runner computes logits; choosing tokens is the caller's (llm/batched_session.cpp gives each
// sequence its own sampler, grammar and callbacks).
#pragma once

#include "llm/model.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <set>
#include <span>
#include <unordered_map>
#include <vector>

namespace engine { class Jit; }

namespace llm {

struct BatchOptions {
    int block_size = 16;      // pool rows per block (a multiple of 16 keeps attention bit-identical to a contiguous cache)
    int n_blocks = 0;         // pool blocks; 0: enough for max_seqs sequences of n_ctx positions
    int n_ctx = 1024;         // positions one sequence may reach (prompt + generated)
    int max_seqs = 8;         // sequences running at once (rows of the block table)
    int token_budget = 64;    // tokens per step (at most 512): every decoding sequence's next token, then prefill chunks
    gguf::Type kv_type = gguf::Type::F16;  // the pool's attention rows (SessionOptions::kv_type)
    bool prefix_cache = true;  // share full blocks of equal prompt prefixes
    int n_checkpoints = -1;    // recurrent models: saved states kept for prefix sharing (-1: 3 per sequence)
};

struct BatchRequest {
    std::vector<int32_t> prompt;
    int max_tokens = 128;  // positions prompt + max_tokens (at most n_ctx) are reserved when it starts
};

// The distribution of one sequence's next token, computed by a step; valid until the next step.
struct SeqLogits {
    int id = -1;
    std::span<const float> logits;  // (n_vocab) raw
};

// Where a sequence stands (GET /slots).
struct SeqStatus {
    bool running = false;  // admitted (holds a table row and its blocks); else waiting
    int n_prompt = 0;
    int n_cached = 0;      // prompt positions shared from the prefix cache
    int n_past = 0;        // positions whose keys are in the pool
    int n_generated = 0;   // tokens pushed after the prompt
};

struct PoolStats {
    int running = 0, waiting = 0;
    int blocks_used = 0;    // held by a sequence
    int blocks_cached = 0;  // unreferenced, kept for their prefix
    int blocks_free = 0;
    int block_size = 0;
    int64_t pool_bytes = 0;         // keys and values of every layer
    int64_t prefix_hit_tokens = 0;  // prompt positions served from the cache, since the start
    int checkpoints = 0;            // recurrent states saved at block boundaries, kept for prefix sharing
};

class BatchRunner {
public:
    BatchRunner(const Model& model, const BatchOptions& options);
    ~BatchRunner();

    // Queues a sequence; it starts when a table row and blocks for its positions are free. Throws if it
    // could never fit (a prompt longer than n_ctx or than the whole pool).
    int add(BatchRequest request);
    // One forward over the running sequences that have input; returns the sequences whose next-token
    // logits it computed. Such a sequence takes no part in later steps until push() or finish().
    std::vector<SeqLogits> step();
    // The next token of a sequence whose logits a step returned; false when its reserved positions are
    // used up (the caller ends it).
    bool push(int id, int32_t token);
    // The sequence leaves, waiting or running: its blocks return to the pool at once (full ones stay
    // cached for their prefix).
    void finish(int id);
    void drop_cache();  // forgets every cached block no sequence holds

    bool idle() const { return waiting_.empty() && running_.empty(); }
    // True when step() would run a forward: a running sequence with input, or a waiting one that fits.
    bool has_input() const;
    int n_awaiting() const;  // running sequences whose logits are out and whose next token is not pushed yet
    std::optional<SeqStatus> status(int id) const;  // none for an unknown or finished id
    PoolStats stats() const;
    int n_ctx() const { return o_.n_ctx; }

private:
    struct Seq {
        int id = -1;
        std::vector<int32_t> tokens;   // the prompt, then the pushed tokens: what positions 0.. hold
        int n_prompt = 0;
        int n_reserved = 0;            // positions it may reach
        int row = -1;                  // block table row (running)
        std::vector<int32_t> blocks;   // block ids, in position order
        int n_past = 0;                // positions whose keys are in the pool
        int n_cached = 0;              // prompt positions shared from the cache
        int n_registered = 0;          // leading blocks that are in the prefix cache
        uint64_t chain = 0;            // the content hash of those blocks
        std::vector<uint64_t> chains;  // the content hash of blocks 0..i, for each registered block i
        bool awaiting = false;         // its logits are out; it waits for push()
        // Recurrent layers: the checkpoint its first step starts from, the last block boundary of its
        // prompt, the checkpoints it saves at that boundary and at later ones (the latest only).
        int load_slot = -1, prompt_blocks = 0, prompt_slot = -1, tail_slot = -1, tail_blocks = 0;
    };
    struct Checkpoint {               // pool state row n_seqs + index
        int owner = -1;                // the running sequence that saves into it, or -1
        bool saved = false;            // holds the state after `blocks` blocks of content hash `chain`
        bool listed = false;           // in checkpoints_by_chain_ (a sequence may start from it)
        int pins = 0;                  // admitted sequences that have yet to start from it
        int blocks = 0;
        uint64_t chain = 0, last_used = 0;
    };
    struct Block {
        int refs = 0;
        bool cached = false;          // in cache_ under hash
        uint64_t hash = 0, last_used = 0;
        std::vector<int32_t> tokens;  // its content, when cached (checked on every hit)
    };

    bool admit(Seq& s);
    void release(Seq& s);
    int32_t take_block();
    void ref(int32_t b);
    void unref(int32_t b);
    uint64_t chain_hash(uint64_t parent, const int32_t* tokens) const;
    void register_full_blocks(Seq& s);
    int take_checkpoint(int owner);      // a free or least recently used unowned checkpoint, or -1
    void unlist(Checkpoint& c);
    void release_checkpoints(Seq& s);    // its checkpoints stay, listed, for later sequences
    int32_t save_mark(Seq& s, int pos);  // the checkpoint row the state after position pos goes to, or -1
    Seq* find(int id) const;

    const Model& model_;
    BatchOptions o_;
    KvPool pool_;
    int blocks_per_seq_ = 0;
    std::vector<Block> blocks_;
    std::vector<int32_t> free_blocks_;                // unreferenced and uncached, taken from the back
    std::set<std::pair<uint64_t, int32_t>> evictable_;  // unreferenced cached blocks by last use
    std::unordered_map<uint64_t, int32_t> cache_;      // content hash of a block and all before it -> block
    uint64_t hash_key_ = 0, clock_ = 0;
    int64_t prefix_hit_tokens_ = 0, pool_bytes_ = 0;
    std::vector<int> free_rows_;
    std::vector<int32_t> table_;        // (max_seqs, blocks_per_seq) block ids of each running sequence
    bool recurrent_ = false;
    std::vector<Checkpoint> checkpoints_;
    std::unordered_map<uint64_t, int> checkpoints_by_chain_;
    std::vector<std::unique_ptr<Seq>> waiting_, running_;
    int next_id_ = 0;
    int block_size_ = 0;
    std::vector<float> logits_;         // the last step's (R, V)
    Tensor in_tokens_, in_positions_, in_slots_, in_seq_;  // (token_budget) i32: the step's tokens, their positions,
                                                           // pool rows and table rows
    Tensor in_logit_rows_;                                 // (max_seqs) i32: the tokens whose logits are read
    Tensor in_load_, in_save_;                             // (token_budget) i32: checkpoint rows (recurrent)
    Tensor block_table_;                // (max_seqs, blocks_per_seq) i32, table_ on the device
    engine::Var n_tokens_{"n_tokens", 1, 1}, n_rows_{"n_rows", 1, 1};  // how much of the inputs a step uses
    std::unique_ptr<engine::Jit> jit_;
};

}  // namespace llm
