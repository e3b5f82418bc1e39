// peer_embed.c - llama.cpp's pooled embeddings of a few texts, as JSON, for tests/fixtures/embeddings_llamacpp.json.
// Calls llama.cpp's public API (embeddings = true, a pooling type, llama_get_embeddings_seq) from the
// prebuilt libllama of node-llama-cpp (see ../shared/tools/README.md); the vectors are L2-normalized
// as llama-server returns them.
//
// Build and run (from the project root; scripts/record_embeddings.sh does both):
//   gcc -O2 -std=c11 -I$SRC/include -I$SRC/ggml/include scripts/peer_embed.c -L$BINS -l:libllama.v0.4.0.so
//       -l:libggml.v0.4.0.so -l:libggml-base.so -Wl,-rpath,$BINS -lm -o peer_embed
//   peer_embed MODEL.gguf mean|cls|last TEXT...
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ggml-backend.h"
#include "llama.h"

static void quiet(enum ggml_log_level level, const char *text, void *ud) {
    (void)ud;
    if (level == GGML_LOG_LEVEL_ERROR) fputs(text, stderr);
}

static void die(const char *what) {
    fprintf(stderr, "peer_embed: %s\n", what);
    exit(2);
}

static void json_string(const char *s) {
    putchar('"');
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\') printf("\\%c", *p);
        else if (*p < 0x20) printf("\\u%04x", *p);
        else putchar(*p);
    }
    putchar('"');
}

int main(int argc, char **argv) {
    if (argc < 4) die("usage: peer_embed MODEL.gguf mean|cls|last TEXT...");
    enum llama_pooling_type pooling = !strcmp(argv[2], "mean")   ? LLAMA_POOLING_TYPE_MEAN
                                      : !strcmp(argv[2], "cls")  ? LLAMA_POOLING_TYPE_CLS
                                      : !strcmp(argv[2], "last") ? LLAMA_POOLING_TYPE_LAST
                                                                 : LLAMA_POOLING_TYPE_UNSPECIFIED;
    if (pooling == LLAMA_POOLING_TYPE_UNSPECIFIED) die("pooling must be mean, cls or last");

    llama_log_set(quiet, NULL);
    const char *bins = getenv("PEER_BINS");
    if (bins) ggml_backend_load_all_from_path(bins);
    else ggml_backend_load_all();
    llama_backend_init();

    struct llama_model_params mp = llama_model_default_params();
    struct llama_model *model = llama_model_load_from_file(argv[1], mp);
    if (!model) die("cannot load the model");
    struct llama_context_params cp = llama_context_default_params();
    cp.n_ctx = 512;
    cp.n_batch = cp.n_ubatch = 512;
    cp.n_threads = cp.n_threads_batch = 1;
    cp.embeddings = true;
    cp.pooling_type = pooling;
    struct llama_context *ctx = llama_init_from_model(model, cp);
    if (!ctx) die("cannot create a context");
    const struct llama_vocab *vocab = llama_model_get_vocab(model);
    const int n_embd = llama_model_n_embd(model);

    printf("{\"model\": ");
    json_string(strrchr(argv[1], '/') ? strrchr(argv[1], '/') + 1 : argv[1]);
    printf(", \"pooling\": \"%s\", \"inputs\": [", argv[2]);
    for (int i = 3; i < argc; i++) {
        llama_token ids[512];
        // add_special and parse_special, as llama-server tokenizes embedding inputs
        const int n = llama_tokenize(vocab, argv[i], (int)strlen(argv[i]), ids, 512, true, true);
        if (n <= 0) die("cannot tokenize an input (empty, or over 512 tokens)");
        llama_memory_clear(llama_get_memory(ctx), true);
        struct llama_batch batch = llama_batch_init(n, 0, 1);
        for (int k = 0; k < n; k++) {
            batch.token[k] = ids[k];
            batch.pos[k] = k;
            batch.n_seq_id[k] = 1;
            batch.seq_id[k][0] = 0;
            batch.logits[k] = 1;  // every token's output: pooling reads them
        }
        batch.n_tokens = n;
        if (llama_decode(ctx, batch) != 0) die("llama_decode failed");
        const float *e = llama_get_embeddings_seq(ctx, 0);
        if (!e) die("no pooled embedding (pooling type none?)");
        double norm = 0;
        for (int d = 0; d < n_embd; d++) norm += (double)e[d] * e[d];
        norm = sqrt(norm);
        printf("%s\n  {\"text\": ", i > 3 ? "," : "");
        json_string(argv[i]);
        printf(", \"ids\": [");
        for (int k = 0; k < n; k++) printf("%s%d", k ? ", " : "", ids[k]);
        printf("], \"embedding\": [");
        for (int d = 0; d < n_embd; d++) printf("%s%.7g", d ? ", " : "", norm > 0 ? e[d] / norm : 0.0);
        printf("]}");
        llama_batch_free(batch);
    }
    printf("\n]}\n");
    llama_free(ctx);
    llama_model_free(model);
    llama_backend_free();
    return 0;
}
