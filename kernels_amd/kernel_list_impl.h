// Every kernel with its kernarg struct, in one list (X-macro) so the emulated twins of each target and
// the kernel table cannot drift apart. X(name, Args).
#pragma once

#define TINYLLM_AMD_KERNEL_LIST(X)            \
    X(q8_quantize, Q8QuantizeArgs)             \
    X(gemv_q4_k_q8, GemvQ8Args)                \
    X(gemv_q5_k_q8, GemvQ8Args)                \
    X(gemv_q6_k_q8, GemvQ8Args)                \
    X(gemv_iq4_xs_q8, GemvQ8Args)              \
    X(gemv_q8_0_q8, GemvQ8Args)                \
    X(gemv_q4_0_q8, GemvQ8Args)                \
    X(gemv_f16, GemvF16Args)                   \
    X(gemm_f16, GemmArgs)                      \
    X(gemm_q4_k, GemmArgs)                     \
    X(gemm_q5_k, GemmArgs)                     \
    X(gemm_q6_k, GemmArgs)                     \
    X(gemm_iq4_xs, GemmArgs)                   \
    X(gemm_q8_0, GemmArgs)                     \
    X(gemm_q4_0, GemmArgs)                     \
    X(attn_decode_partial_d8, AttnDecodeArgs)   \
    X(attn_decode_partial_d16, AttnDecodeArgs)  \
    X(attn_decode_partial_d32, AttnDecodeArgs)  \
    X(attn_decode_partial_d64, AttnDecodeArgs)  \
    X(attn_decode_partial_d128, AttnDecodeArgs) \
    X(attn_decode_partial_d256, AttnDecodeArgs) \
    X(attn_decode_combine, AttnCombineArgs)     \
    X(kv_store_f16, KvStoreArgs)
