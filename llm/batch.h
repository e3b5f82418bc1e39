// Many sequences decoding at once (issue #14, the engine side): one paged KV pool whose blocks the
// sequences hold through block tables, and a runner that packs every decoding sequence's next token
// plus prefill chunks into one forward per step, replayed from a capture per token-count bucket.
#pragma once

#include "llm/model.h"
#include "llm/sampler.h"

#include <map>
#include <memory>
#include <optional>
#include <vector>

namespace engine { class Jit; }

namespace llm {

struct BatchOptions {
    int block_size = 16;      // pool rows per block (a multiple of 16 keeps attention bit-identical to a contiguous cache)
    int n_blocks = 0;         // pool blocks; 0: enough for max_seqs sequences of n_ctx positions (plus a scratch block)
    int n_ctx = 1024;         // positions a sequence may reach (prompt + generated)
    int max_seqs = 8;         // sequences running at once (rows of the block table)
    int token_budget = 64;    // tokens per step: every decoding sequence's next token, then prefill chunks
    bool kv_f16 = true;
    std::vector<int32_t> end_ids;  // tokens that end a sequence whose request has stop_at_end
};

struct BatchRequest {
    std::vector<int32_t> prompt;
    SamplingParams sampling;
    int max_tokens = 128;
    bool stop_at_end = true;
};

struct BatchResult {
    int id = -1;                 // what add() returned
    std::vector<int32_t> ids;    // generated ids (an end id included, as Session reports it)
};

class BatchRunner {
public:
    // Throws for architectures forward_batch does not run (MLA, recurrent layers).
    BatchRunner(const Model& model, const BatchOptions& options);
    ~BatchRunner();

    // Queues a request; it starts when a table row and blocks for its prompt + max_tokens are free.
    // Throws if it could never fit (longer than n_ctx, or than the whole pool).
    int add(BatchRequest request);
    // One forward over the running sequences; returns those that finished in it.
    std::vector<BatchResult> step();
    bool idle() const { return waiting_.empty() && running_.empty(); }
    int n_free_blocks() const { return int(free_blocks_.size()); }
    static int bucket(int n_tokens);  // the padded token count a step of n_tokens runs at: 1, 2, 4, ... 512

private:
    struct Seq {
        int id = -1;
        BatchRequest request;
        Sampler sampler;
        int row = -1;                   // block table row
        std::vector<int32_t> blocks;    // block ids, in position order
        int n_past = 0;                 // positions whose keys are in the pool
        std::vector<int32_t> generated;
    };
    struct Inputs;  // one bucket's input tensors

    bool admit(Seq& s);
    void release(Seq& s);
    Inputs& inputs(int bucket);

    const Model& model_;
    BatchOptions o_;
    KvPool pool_;
    int blocks_per_seq_ = 0, scratch_block_ = 0, scratch_row_ = 0;  // padding's block and table row
    std::vector<int32_t> free_blocks_;  // taken from the back
    std::vector<int> free_rows_;
    std::vector<int32_t> table_;        // (max_seqs + 1, blocks_per_seq): the last row is padding's, all scratch
    std::vector<std::unique_ptr<Seq>> waiting_, running_;
    int next_id_ = 0;
    int block_size_ = 0;
    std::map<int, std::unique_ptr<Inputs>> inputs_;
    Tensor block_table_;                // (max_seqs + 1, blocks_per_seq) i32, table_ on the device
    std::unique_ptr<engine::Jit> jit_;
};

}  // namespace llm
