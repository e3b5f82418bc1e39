// The CPU loops behind the hot ops that kernels.h does not cover (table rows, top-k, experts, the
// recurrences), each over work items [begin, end) of its op's typed arguments (devices/ops.h).
#pragma once

#include "devices/ops.h"

#include <cstdint>

namespace cpu_kernels {

namespace ops = devices::ops;

// Row r (k values) of a matrix stored as `type`, as f32: f32 rows in place, others converted into `buf`.
const float* row_f32(const void* base, gguf::Type type, int64_t r, int64_t k, float* buf);
float dot_f32(const float* a, const float* b, int64_t n);  // vectorized per ISA

void rows(const ops::Rows& a, int64_t begin, int64_t end);    // over output rows
void topk(const ops::TopK& a, int64_t begin, int64_t end);    // over rows

// Output rows per work item of linear_experts: the tile of an expert's weight rows streamed for all its tokens.
constexpr int64_t kExpertRowTile = 16;
void expert_plan(const ops::ExpertPlan& a);                              // one work item
void linear_experts(const ops::LinearExperts& a, int64_t begin, int64_t end);  // items tile * E + e
// y[j * n + r] = MXFP4 weight row r (rows w_row bytes apart) . Q8_0 activation row x[j], for n rows and
// count rows of x of n_blocks blocks each (experts_mxfp4.cpp).
void mxfp4_q8_0_tile(const uint8_t* w, int64_t w_row, int64_t n, const uint8_t* const* x, int64_t count, int64_t n_blocks, float* y);

void conv1d(const ops::Conv1d& a, int64_t begin, int64_t end);          // over channels
void delta_rule(const ops::DeltaRule& a, int64_t begin, int64_t end);    // over v heads

}  // namespace cpu_kernels
