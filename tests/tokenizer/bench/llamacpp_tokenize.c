/* llama.cpp's tokenizer on the same prompt as bench_tokenizer, for a side-by-side number. Built
   against the llama.cpp that node-llama-cpp@3.21.1 ships (see ../shared/tools/README.md), not by CMake:
     P=$HOME/.cache/tinyllm-peer; B=$P/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64
     gcc -O2 -I$P/llama-src/include -I$P/llama-src/ggml/include tests/tokenizer/bench/llamacpp_tokenize.c
         -L$B -l:libllama.v0.4.0.so -l:libggml.v0.4.0.so -l:libggml-base.so -Wl,-rpath,$B -o build/llamacpp_tokenize
     build/bench_tokenizer --dump-prompt /tmp/prompt.txt && build/llamacpp_tokenize VOCAB.gguf /tmp/prompt.txt 9
   Prints the median time and tokens/s of llama_tokenize(add_special=false, parse_special=true). */
#include "llama.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void quiet(enum ggml_log_level level, const char* text, void* user) {
    (void)level, (void)text, (void)user;
}

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static int by_value(const void* a, const void* b) {
    const double x = *(const double*)a, y = *(const double*)b;
    return (x > y) - (x < y);
}

int main(int argc, char** argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s VOCAB.gguf PROMPT_FILE [REPS]\n", argv[0]);
        return 1;
    }
    const int reps = argc > 3 ? atoi(argv[3]) : 9;
    FILE* f = fopen(argv[2], "rb");
    if (!f) return perror(argv[2]), 1;
    fseek(f, 0, SEEK_END);
    const long n_bytes = ftell(f);
    fseek(f, 0, SEEK_SET);
    char* text = malloc(n_bytes);
    if (fread(text, 1, n_bytes, f) != (size_t)n_bytes) return fprintf(stderr, "short read\n"), 1;
    fclose(f);

    llama_log_set(quiet, NULL);
    llama_backend_init();
    struct llama_model_params mp = llama_model_default_params();
    mp.vocab_only = true;
    double t0 = now_ms();
    struct llama_model* model = llama_model_load_from_file(argv[1], mp);
    if (!model) return fprintf(stderr, "cannot load %s\n", argv[1]), 1;
    const double load_ms = now_ms() - t0;
    const struct llama_vocab* vocab = llama_model_get_vocab(model);

    llama_token* tokens = malloc(sizeof(llama_token) * (n_bytes + 16));
    double* ms = malloc(sizeof(double) * reps);
    int n = 0;
    for (int r = 0; r < reps; r++) {
        t0 = now_ms();
        n = llama_tokenize(vocab, text, (int32_t)n_bytes, tokens, (int32_t)n_bytes + 16, false, true);
        ms[r] = now_ms() - t0;
    }
    qsort(ms, reps, sizeof(double), by_value);
    const char* name = strrchr(argv[1], '/') ? strrchr(argv[1], '/') + 1 : argv[1];
    printf("%-22s load %.1f ms  tokens %d  median %.2f ms  %.0f tok/s\n", name, load_ms, n, ms[reps / 2], n / ms[reps / 2] * 1e3);
    llama_model_free(model);
    return 0;
}
