#!/usr/bin/python3
"""Perf models of more weight types: ../shared/tools/make_perf_gguf.py with q5_k_m, iq4_xs, q4_1 and q5_0.

The shared generator writes random-weight llama GGUFs of F16, Q8_0, Q4_0, Q4_K(_M) and Q6_K. This adds the
other types people download, with the same recipe (random codes, fp16 scales giving weights of std ~0.02):
  q5_k_m : Q5_K, and Q6_K for token_embd (tied output) and attn_v / ffn_down where llama.cpp's
           use_more_bits(i, n) holds (as q4_k_m)
  iq4_xs : IQ4_XS, token_embd Q6_K
  q4_1   : every matrix Q4_1 (m = -7.5 d: centred)
  q5_0   : every matrix Q5_0
usage: /usr/bin/python3 scripts/perf_gguf_types.py --shape 1b --type q5_k_m -o llama1b-q5_k_m.gguf
(the shared generator's options; needs numpy and ../shared/tools/make_perf_gguf.py, or $PERF_GGUF_TOOL)
"""
import numpy as np

import shared_perf_gguf

g = shared_perf_gguf.load("perf_gguf_types")

Q4_1, Q5_0, Q5_K, IQ4_XS = 3, 6, 13, 23


def gen_q4_1(rng, n):
    nb = n // 32
    blk = np.empty(nb, dtype=np.dtype([("d", "<f2"), ("m", "<f2"), ("qs", "u1", 16)]))
    blk["qs"] = rng.integers(0, 256, size=(nb, 16), dtype=np.uint8)
    d = g.jitter(rng, nb, g.STD / 4.61)  # w = d * q + m, q in 0..15
    blk["d"], blk["m"] = g.f16(d), g.f16(-7.5 * d)
    return blk.tobytes()


def gen_q5_0(rng, n):
    nb = n // 32
    blk = np.empty(nb, dtype=np.dtype([("d", "<f2"), ("qh", "u1", 4), ("qs", "u1", 16)]))
    blk["qh"] = rng.integers(0, 256, size=(nb, 4), dtype=np.uint8)
    blk["qs"] = rng.integers(0, 256, size=(nb, 16), dtype=np.uint8)
    blk["d"] = g.f16(g.jitter(rng, nb, g.STD / 9.23))  # w = d * (q - 16), std of U{0..31} = 9.23
    return blk.tobytes()


def gen_q5_k(rng, n):
    nb = n // 256
    blk = np.empty(nb, dtype=np.dtype([("d", "<f2"), ("dmin", "<f2"), ("scales", "u1", 12), ("qh", "u1", 32),
                                       ("qs", "u1", 128)]))
    sc = rng.integers(16, 64, size=(nb, 8), dtype=np.uint8)  # mean 39.5
    d = g.jitter(rng, nb, g.STD / (39.5 * 9.23))              # w = d*sc*q - dmin*m, q in 0..31
    blk["d"], blk["dmin"] = g.f16(d), g.f16(15.5 * d)          # m = sc: centred
    blk["scales"] = g.pack_q4k_scales(sc, sc)
    blk["qh"] = rng.integers(0, 256, size=(nb, 32), dtype=np.uint8)
    blk["qs"] = rng.integers(0, 256, size=(nb, 128), dtype=np.uint8)
    return blk.tobytes()


def gen_iq4_xs(rng, n):
    nb = n // 256
    blk = np.empty(nb, dtype=np.dtype([("d", "<f2"), ("scales_h", "<u2"), ("scales_l", "u1", 4), ("qs", "u1", 128)]))
    ls = rng.integers(36, 56, size=(nb, 8), dtype=np.uint8)  # 6-bit scales; the sub-block's scale is ls - 32
    blk["scales_l"] = (ls[:, 0::2] & 15) | ((ls[:, 1::2] & 15) << 4)
    h = np.zeros(nb, dtype=np.uint32)
    for j in range(8):
        h |= (ls[:, j].astype(np.uint32) >> 4) << (2 * j)
    blk["scales_h"] = h.astype(np.uint16)
    blk["d"] = g.f16(g.jitter(rng, nb, g.STD / (13.5 * 60.0)))  # mean ls - 32 13.5; codebook std ~60
    blk["qs"] = rng.integers(0, 256, size=(nb, 128), dtype=np.uint8)
    return blk.tobytes()


g.BLOCK.update({Q4_1: (32, 20), Q5_0: (32, 22), Q5_K: (256, 176), IQ4_XS: (256, 136)})
g.TYPE_NAME.update({Q4_1: "Q4_1", Q5_0: "Q5_0", Q5_K: "Q5_K", IQ4_XS: "IQ4_XS"})
g.GEN.update({Q4_1: gen_q4_1, Q5_0: gen_q5_0, Q5_K: gen_q5_k, IQ4_XS: gen_iq4_xs})
g.FTYPE.clear()
g.FTYPE.update({"q4_1": 3, "q5_0": 8, "q5_k_m": 17, "iq4_xs": 30})  # llama_ftype


def tensor_plan(h, qtype):
    base = {"q4_1": Q4_1, "q5_0": Q5_0, "q5_k_m": Q5_K, "iq4_xs": IQ4_XS}[qtype]
    embd_t = {"q4_1": Q4_1, "q5_0": Q5_0, "q5_k_m": g.Q6_K, "iq4_xs": g.Q6_K}[qtype]
    d, f, L = h["dim"], h["ffn"], h["layers"]
    kv = h["kv_heads"] * (d // h["heads"])
    plan = [("token_embd.weight", [d, h["vocab"]], embd_t)]
    for i in range(L):
        more = qtype == "q5_k_m" and g.use_more_bits(i, L)
        p = "blk.%d." % i
        plan += [(p + "attn_norm.weight", [d], g.F32),
                 (p + "attn_q.weight", [d, d], base),
                 (p + "attn_k.weight", [d, kv], base),
                 (p + "attn_v.weight", [d, kv], g.Q6_K if more else base),
                 (p + "attn_output.weight", [d, d], base),
                 (p + "ffn_norm.weight", [d], g.F32),
                 (p + "ffn_gate.weight", [d, f], base),
                 (p + "ffn_down.weight", [f, d], g.Q6_K if more else base),
                 (p + "ffn_up.weight", [d, f], base)]
    plan.append(("output_norm.weight", [d], g.F32))
    return plan


g.tensor_plan = tensor_plan
if __name__ == "__main__":
    g.main()
