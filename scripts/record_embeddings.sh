#!/bin/sh
# Records llama.cpp's pooled embeddings of a few texts on two ../shared test models (qwen3 with last-token
# pooling, llama with mean pooling) into tests/fixtures/embeddings_llamacpp.json, through scripts/peer_embed.c
# built against the libllama of node-llama-cpp@3.21.1 (install: ../shared/tools/README.md). Run from the root.
set -eu
PEER=${PEER:-${PEER_DIR:-$HOME/.cache/tinyllm-peer}}
SRC=$PEER/llama-src
BINS=$PEER/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64
MODELS=${MODELS:-../shared/models}
mkdir -p "$PEER/bin"
gcc -O2 -std=c11 -Wall -I"$SRC/include" -I"$SRC/ggml/include" scripts/peer_embed.c \
    -L"$BINS" -l:libllama.v0.4.0.so -l:libggml.v0.4.0.so -l:libggml-base.so -Wl,-rpath,"$BINS" -lm -o "$PEER/bin/peer_embed"
TEXTS="Hello world|The quick brown fox jumps over the lazy dog.|Once upon a time, there was a little girl named Lily."
run() {
  old_ifs=$IFS; IFS='|'; set -- $TEXTS; IFS=$old_ifs
  PEER_BINS=$BINS "$PEER/bin/peer_embed" "$MODEL" "$POOLING" "$@"
}
out=tests/fixtures/embeddings_llamacpp.json
{
  echo '{"source": "llama.cpp 80fb11ac (node-llama-cpp 3.21.1) via scripts/peer_embed.c; L2-normalized", "cases": ['
  MODEL=$MODELS/random-qwen3-f32.gguf POOLING=last run
  echo ','
  MODEL=$MODELS/random-llama-f32.gguf POOLING=mean run
  echo ']}'
} > "$out"
echo "wrote $out"
