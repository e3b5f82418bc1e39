#!/usr/bin/python3
"""A random-weight deepseek2 (multi-head latent attention) perf model, for MLA speed tests beside llama.cpp.

The attention is DeepSeek-V2's at 16 heads: a query LoRA of rank 1536 (llama.cpp takes the LoRA-less
query only at V2-Lite's 26 or 27 blocks), a KV LoRA of rank 512 with a 64-wide RoPE part (one cached row of 576 values a token and layer), per-head
no-RoPE keys of 128 and values of 128 (attn_k_b / attn_v_b, the split form of a current llama.cpp
conversion). Embedding 2048; every block dense (leading_dense_block_count = block_count) with a
feed-forward of 5632, so the weights stay ~0.5B parameters (8 blocks) and decode at depth shows the attention.
Weights and tokenizer follow ../shared/tools/make_perf_gguf.py (random codes, fp16 scales giving std
~0.02; stories260K's vocabulary padded to --vocab), whose writer this reuses.
  --type q8_0   : every matrix Q8_0
  --type q4_k_m : Q4_K; token_embd and output Q6_K; attn_k_b / attn_v_b Q8_0 (their rows of 128 values
                  are not whole 256-element super-blocks, where llama-quantize falls back too)
usage: /usr/bin/python3 scripts/perf_gguf_mla.py --type q4_k_m -o mla1b-q4_k_m.gguf [--layers 8]
(needs numpy and ../shared/tools/make_perf_gguf.py, or $PERF_GGUF_TOOL)
"""
import argparse
import os
import struct

import numpy as np

import shared_perf_gguf

g = shared_perf_gguf.load("perf_gguf_mla")

FTYPE = {"q8_0": 7, "q4_k_m": 15}


def tensor_plan(h, qtype):
    base = {"q8_0": g.Q8_0, "q4_k_m": g.Q4_K}[qtype]
    big = {"q8_0": g.Q8_0, "q4_k_m": g.Q6_K}[qtype]
    d, f, L, H = h["dim"], h["ffn"], h["layers"], h["heads"]
    nope, rope, v, r = h["nope"], h["rope"], h["v"], h["kv_lora"]
    plan = [("token_embd.weight", [d, h["vocab"]], big)]
    for i in range(L):
        p = "blk.%d." % i
        plan += [(p + "attn_norm.weight", [d], g.F32),
                 (p + "attn_q_a.weight", [d, h["q_lora"]], base),
                 (p + "attn_q_a_norm.weight", [h["q_lora"]], g.F32),
                 (p + "attn_q_b.weight", [h["q_lora"], H * (nope + rope)], base),
                 (p + "attn_kv_a_mqa.weight", [d, r + rope], base),
                 (p + "attn_kv_a_norm.weight", [r], g.F32),
                 (p + "attn_k_b.weight", [nope, r, H], g.Q8_0),
                 (p + "attn_v_b.weight", [r, v, H], g.Q8_0),
                 (p + "attn_output.weight", [H * v, d], base),
                 (p + "ffn_norm.weight", [d], g.F32),
                 (p + "ffn_gate.weight", [d, f], base),
                 (p + "ffn_up.weight", [d, f], base),
                 (p + "ffn_down.weight", [f, d], base)]
    plan += [("output_norm.weight", [d], g.F32), ("output.weight", [d, h["vocab"]], big)]
    return plan


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--type", choices=sorted(FTYPE), default="q4_k_m")
    ap.add_argument("-o", "--out", required=True)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--ctx", type=int, default=32768)
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--vocab", type=int, default=32000)
    a = ap.parse_args()
    h = dict(dim=2048, layers=a.layers, heads=16, ffn=5632, vocab=a.vocab, nope=128, rope=64, v=128, kv_lora=512, q_lora=1536)

    toks, scores, types = g.read_spm_vocab(g.STORIES)
    for i in range(len(toks), h["vocab"]):
        toks.append("<dummy%05d>" % i)
        scores.append(-1e9)
        types.append(5)  # unused
    U32, F32V, STR, BOOL, I32 = g.U32, g.F32V, g.STR, g.BOOL, g.I32
    arch = "deepseek2"
    kvs = [
        g.kv_scalar("general.architecture", STR, arch),
        g.kv_scalar("general.name", STR, "perf-mla-%s (random weights)" % a.type),
        g.kv_scalar("general.file_type", U32, FTYPE[a.type]),
        g.kv_scalar("general.quantization_version", U32, 2),
        g.kv_scalar(arch + ".vocab_size", U32, h["vocab"]),
        g.kv_scalar(arch + ".context_length", U32, a.ctx),
        g.kv_scalar(arch + ".embedding_length", U32, h["dim"]),
        g.kv_scalar(arch + ".feed_forward_length", U32, h["ffn"]),
        g.kv_scalar(arch + ".block_count", U32, h["layers"]),
        g.kv_scalar(arch + ".attention.head_count", U32, h["heads"]),
        g.kv_scalar(arch + ".attention.head_count_kv", U32, 1),
        g.kv_scalar(arch + ".rope.dimension_count", U32, h["rope"]),
        g.kv_scalar(arch + ".rope.freq_base", F32V, 10000.0),
        g.kv_scalar(arch + ".attention.layer_norm_rms_epsilon", F32V, 1e-6),
        g.kv_scalar(arch + ".attention.key_length", U32, h["kv_lora"] + h["rope"]),
        g.kv_scalar(arch + ".attention.value_length", U32, h["kv_lora"]),
        g.kv_scalar(arch + ".attention.key_length_mla", U32, h["nope"] + h["rope"]),
        g.kv_scalar(arch + ".attention.value_length_mla", U32, h["v"]),
        g.kv_scalar(arch + ".attention.kv_lora_rank", U32, h["kv_lora"]),
        g.kv_scalar(arch + ".attention.q_lora_rank", U32, h["q_lora"]),
        g.kv_scalar(arch + ".leading_dense_block_count", U32, h["layers"]),
        g.kv_scalar(arch + ".expert_count", U32, 64),
        g.kv_scalar(arch + ".expert_used_count", U32, 6),
        g.kv_scalar(arch + ".expert_shared_count", U32, 2),
        g.kv_scalar(arch + ".expert_feed_forward_length", U32, 1408),
        g.kv_scalar(arch + ".expert_weights_scale", F32V, 1.0),
        g.kv_scalar("tokenizer.ggml.model", STR, "llama"),
        g.kv_array("tokenizer.ggml.tokens", STR, toks),
        g.kv_array("tokenizer.ggml.scores", F32V, scores),
        g.kv_array("tokenizer.ggml.token_type", I32, types),
        g.kv_scalar("tokenizer.ggml.unknown_token_id", U32, 0),
        g.kv_scalar("tokenizer.ggml.bos_token_id", U32, 1),
        g.kv_scalar("tokenizer.ggml.eos_token_id", U32, 2),
        g.kv_scalar("tokenizer.ggml.add_bos_token", BOOL, True),
        g.kv_scalar("tokenizer.ggml.add_eos_token", BOOL, False),
    ]
    plan = tensor_plan(h, a.type)
    align = 32
    head = bytearray(b"GGUF" + struct.pack("<IQQ", 3, len(plan), len(kvs)) + b"".join(kvs))
    off, sizes = 0, []
    for name, ne, t in plan:
        head += g.s_(name) + struct.pack("<I", len(ne)) + struct.pack("<%dQ" % len(ne), *ne) + struct.pack("<IQ", t, off)
        sz = g.nbytes(ne, t)
        sizes.append(sz)
        off += (sz + align - 1) // align * align
    head += b"\0" * ((-len(head)) % align)
    rng = np.random.default_rng(a.seed)
    with open(a.out + ".tmp", "wb") as f:
        f.write(head)
        for (name, ne, t), sz in zip(plan, sizes):
            n = int(np.prod(ne))
            data = g.gen_norm(rng, n) if t == g.F32 else g.GEN[t](rng, n)
            assert len(data) == sz, (name, len(data), sz)
            f.write(data)
            f.write(b"\0" * ((-sz) % align))
    os.replace(a.out + ".tmp", a.out)
    n_params = sum(int(np.prod(ne)) for _, ne, _ in plan)
    print("%s: deepseek2 MLA %s, %d layers, %.1f M params, %d bytes" % (a.out, a.type, h["layers"], n_params / 1e6,
                                                                      os.path.getsize(a.out)))


if __name__ == "__main__":
    main()
