#!/usr/bin/env bash
# Builds one libFuzzer target (clang-19, ASAN+UBSAN, in build-fuzz/) and runs it for SECONDS on a corpus
# seeded from the repository's fixtures. Fails on any crash, leak, timeout or out-of-memory.
#   scripts/fuzz.sh gguf|jinja|request|tokenizer|grammar SECONDS [extra libFuzzer flags]
set -euo pipefail
cd "$(dirname "$0")/.."
target=${1:?usage: scripts/fuzz.sh gguf|jinja|request|tokenizer|grammar SECONDS}
seconds=${2:?usage: scripts/fuzz.sh TARGET SECONDS}
shift 2
case "$target" in gguf|jinja|request|tokenizer|grammar) ;; *) echo "[fuzz] unknown target '$target'" >&2; exit 2 ;; esac
FUZZ_DIR=${FUZZ_BUILD_DIR:-build-fuzz}
if [ ! -f "$FUZZ_DIR/CMakeCache.txt" ]; then
  CC=clang-19 CXX=clang++-19 cmake -S . -B "$FUZZ_DIR" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTINYLLM_FUZZ=ON \
    -DTINYLLM_SANITIZE=ON -DTINYLLM_AMD=OFF -DTINYLLM_TESTS=OFF ${CMAKE_ARGS:-} >/dev/null
fi
cmake --build "$FUZZ_DIR" -j"$(nproc)" --target "fuzz_$target" >/dev/null

# Seeds: files the repository already has for each input kind (a small copy; the corpus grows beside).
seeds="$FUZZ_DIR/fuzz/seeds/$target"
corpus="$FUZZ_DIR/fuzz/corpus/$target"
mkdir -p "$seeds" "$corpus"
case "$target" in
  gguf) cp models/stories260K.gguf "$seeds/" ;;
  jinja)
    for f in ../shared/golden/templates/templates/*.jinja; do [ -f "$f" ] && cp "$f" "$seeds/"; done
    printf '%s' '{% for m in messages %}{{ m.role }}: {{ m.content | trim }}{% endfor %}' > "$seeds/min.jinja" ;;
  request)
    printf '%s' '{"messages":[{"role":"user","content":"Hi"}],"stream":true,"max_tokens":5}' > "$seeds/chat.json"
    printf '%s' '{"prompt":"Once upon","max_tokens":3,"stop":["x"],"logprobs":2,"temperature":0.5}' > "$seeds/completion.json"
    printf '%s' '{"messages":[{"role":"user","content":[{"type":"text","text":"a"}]}],"tools":[{"type":"function","function":{"name":"f","parameters":{}}}],"tool_choice":"auto"}' > "$seeds/tools.json"
    printf '%s' '{"model":"m","max_tokens":2,"system":[{"type":"text","text":"s"}],"messages":[{"role":"user","content":"Hi"},{"role":"assistant","content":[{"type":"thinking","thinking":"t"},{"type":"tool_use","id":"t1","name":"f","input":{"a":"x"}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"r","is_error":false}]}],"tools":[{"name":"f","input_schema":{"type":"object","properties":{"a":{"type":["string","null"],"minLength":1}}}}],"tool_choice":{"type":"any"}}' > "$seeds/anthropic.json"
    printf '%s' '{"instructions":"s","input":[{"type":"message","role":"user","content":[{"type":"input_text","text":"Hi"}]},{"type":"function_call","call_id":"c1","name":"f","arguments":"{}"},{"type":"function_call_output","call_id":"c1","output":"r"}],"tools":[{"type":"function","name":"f","parameters":{"type":"object"}}],"text":{"format":{"type":"json_schema","name":"n","schema":{"type":"object"}}}}' > "$seeds/responses.json"
    printf '%s' '{"model":"m","stream":false,"options":{"num_predict":2,"stop":["x"]},"messages":[{"role":"user","content":"Hi"},{"role":"assistant","content":"","tool_calls":[{"function":{"name":"f","arguments":{"a":"x"}}}]},{"role":"tool","content":"r","tool_name":"f"}],"format":"json","prompt":"Hi","raw":false}' > "$seeds/ollama.json"
    printf '%s' '{"input":["Hi",[1,2]],"encoding_format":"base64","dimensions":4,"truncate":true}' > "$seeds/embeddings.json" ;;
  tokenizer)
    head -c 4096 tests/fixtures/stories260K-f32.golden.json > "$seeds/golden.txt"
    printf '%s' 'Hello <|im_start|>user wörld 中文 😀  tabs	and
newlines 12345' > "$seeds/mixed.txt" ;;
  grammar)  # the structured-output corpus: '\0' + GBNF + NUL + an accepted string, or '\1' + a JSON Schema
    printf '\0root ::= "yes" | "no"\0yes' > "$seeds/min.gbnf"
    node --input-type=module -e '
      import { writeFileSync } from "node:fs";
      import { SCHEMAS, GRAMMARS } from "./tests/node/schemas.mjs";
      const dir = process.argv[1];
      for (const g of GRAMMARS) writeFileSync(`${dir}/${g.name}.gbnf`, "\0" + g.gbnf + "\0" + g.good[0]);
      for (const s of SCHEMAS) writeFileSync(`${dir}/${s.name}.schema`, "\x01" + JSON.stringify(s.schema));
    ' "$seeds" || echo "[fuzz] node could not read tests/node/schemas.mjs: seeding grammar with one grammar only" ;;
esac

# The committed corpus (fuzz/corpus/TARGET.tar.gz: earlier long runs' inputs, minimized) starts even a
# short run deep in the parsers. FUZZ_SAVE_CORPUS=1 writes it anew after the run: the corpus and the
# seeds merged down to the inputs that add coverage (libFuzzer -merge=1), as a reproducible archive.
saved="fuzz/corpus/$target.tar.gz"
if [ -f "$saved" ]; then tar xzf "$saved" -C "$seeds" --strip-components=1; fi

# Inputs stay small so that each execution is fast (the seeds are truncated to this).
case "$target" in gguf) max_len=16384 ;; *) max_len=4096 ;; esac

echo "[fuzz] $target for ${seconds}s (corpus $corpus)"
# -rss_limit_mb / -timeout: a single input using 2 GB or 10 s is a finding, as is any leak (ASAN).
"$FUZZ_DIR/fuzz/fuzz_$target" "$corpus" "$seeds" -max_total_time="$seconds" -rss_limit_mb=2048 -timeout=10 -max_len="$max_len" \
  -print_final_stats=1 -artifact_prefix="$FUZZ_DIR/fuzz/crash-$target-" "$@"

if [ "${FUZZ_SAVE_CORPUS:-0}" = "1" ]; then
  merged=$(mktemp -d)
  mkdir "$merged/$target"
  "$FUZZ_DIR/fuzz/fuzz_$target" -merge=1 -rss_limit_mb=2048 -timeout=10 -max_len="$max_len" "$merged/$target" "$corpus" "$seeds" 2>&1 | tail -1
  mkdir -p fuzz/corpus
  tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -C "$merged" -cf - "$target" | gzip -n -9 > "$saved"
  echo "[fuzz] $saved: $(ls "$merged/$target" | wc -l) inputs, $(stat -c %s "$saved") bytes"
  rm -rf "$merged"
fi
