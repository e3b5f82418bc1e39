#!/bin/sh
# Records llama.cpp's reference logits for the derived MLA / RoPE-scaling test models
# (tests/llm/mla_models.h) in the golden schema (../shared/golden/llamacpp/README.md), with the settings
# of the goldens' high-precision reference: KV cache F32, flash attention off, one thread, greedy.
# Needs the peer llama.cpp (../shared/tools/README.md: $PEER_DIR/bin/peer_logits) and a built test_llm.
# Run from the repository root:  sh tests/llm/mla_refs/make.sh [build dir]
set -e
build=${1:-build}
peer=${PEER_DIR:-$HOME/.cache/tinyllm-peer}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# The goldens' CPU backend (Zen 4) alone: on other CPUs llama.cpp would load its own best variant (the
# Sapphire Rapids one fails an assertion on F16/Q8_0 deepseek2 files).
bins=$peer/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64
export PEER_BINS=$tmp/bins
mkdir "$PEER_BINS"
for lib in libggml-base.so libggml.v0.4.0.so libllama.v0.4.0.so libllama-common.so libggml-cpu-zen4.so; do ln -s "$bins/$lib" "$PEER_BINS/"; done
MLA_MODELS_DIR=$tmp "$build/tests/test_llm" "mla: write the derived models to MLA_MODELS_DIR" > /dev/null
for model in "$tmp"/*.gguf; do
  name=$(basename "$model" .gguf)
  i=0
  for prompt in "Hello world" "The quick brown fox jumps over the lazy dog." "12345 + 678 = ?" \
      "Once upon a time, in a quiet village by the sea, there lived an old fisherman who told stories to every child that passed his door, and the children loved him."; do
    "$peer/bin/peer_logits" "$model" --prompt "$prompt" --n 16 --ctx 512 --threads 1 --kv f32 --fa off --topk 10 > "$tmp/$name.$i.json"
    i=$((i + 1))
  done
  python3 - "$tmp" "$name" > "tests/llm/mla_refs/$name.json" <<'PY'
import glob, json, sys
tmp, name = sys.argv[1], sys.argv[2]
cases = []
for path in sorted(glob.glob(f"{tmp}/{name}.*.json")):
    p = json.load(open(path))
    cases.append({
        "prompt": p["prompt"], "prompt_ids": p["prompt_ids"], "prompt_ids_no_special": p["prompt_ids_no_special"],
        "n_gen": len(p["generated_ids"]), "generated_ids": p["generated_ids"],
        "steps": [{"step": i, "token": p["generated_ids"][i], "logit_std": s["std"], "gap12": s["gap12"],
                   "top_logits_hp": s["top"]} for i, s in enumerate(p["steps"])]})
# One line per step: small diffs when the references are recorded again.
head = {"schema": "peer-golden/1", "model_file": name + ".gguf", "reference": p["config"]}
out = ["{" + ", ".join(f"{json.dumps(k)}: {json.dumps(v)}" for k, v in head.items()) + ', "cases": [']
for ci, c in enumerate(cases):
    fields = ", ".join(f"{json.dumps(k)}: {json.dumps(v)}" for k, v in c.items() if k != "steps")
    out.append(" {" + fields + ', "steps": [')
    out += ["  " + json.dumps(s) + ("," if si + 1 < len(c["steps"]) else "") for si, s in enumerate(c["steps"])]
    out.append(" ]}" + ("," if ci + 1 < len(cases) else ""))
out.append("]}")
print("\n".join(out))
PY
done
