// tinyllm serve: the OpenAI-compatible HTTP server (and the web UI at /) on one model, or on every
// model of a folder and the Hub cache, picked by each request's `model`.
#include "cli/cli.h"
#include "server/server.h"

#include <csignal>
#include <filesystem>
#include <memory>
#include <thread>
#include <cstdio>
#include <climits>
#include <cstdlib>
#include <string>

namespace cli {

namespace {

constexpr const char* USAGE = R"(usage: tinyllm serve [--model M] [--host 127.0.0.1] [--port 8080] [--api-key K | --api-key-file F]
                     [--cors ORIGIN] [--allow-host H] [--max-context N] [--parallel N] [--ctx-size N]
                     [--queue N] [--max-body BYTES]
                     [--shutdown-timeout S] [--device NAME] [--threads N] [--kv f16|f32|q8_0|q4_0]
                     [--chat-template FILE] [--pooling mean|cls|last]
                     [--models-dir DIR] [--models-max N] [--idle-unload SECONDS] [--allow-pull]
  --model M        one GGUF model, or a Hub name OWNER/REPO[:QUANT] (pulled on first use)
                   (default: the built-in stories260K, plus every model of the Hub cache when it has some)
  --models-dir DIR serve every *.gguf in DIR (and the Hub cache's models), by file name
  --models-max N   models resident at once (default 2); the least recently used idle one unloads
  --idle-unload S  unload a model unused for S seconds (default: never)
  --allow-pull     requests may name Hub models not in the cache yet (OWNER/REPO[:QUANT]): pulled
  --host, --port   where to listen (--port 0: any free port; the URL is printed when ready)
  --api-key K      require 'Authorization: Bearer K' or 'x-api-key: K' (not for / and /health)
  --api-key-file F the key from the first line of F (or set TINYLLM_API_KEY): not visible in ps
  --cors ORIGIN    allow browser pages from ORIGIN ("*": any) to call the API; without it,
                   cross-origin requests are refused
  --allow-host H   accept 'Host: H' too (bound to loopback, only loopback Host names are accepted)
  --max-context N  context length of one request in tokens (default: the model's, up to 32768;
                   4096 for a model that runs one request at a time)
  --parallel N     requests a model runs at once, decoded together in one batch (default 4);
                   recurrent architectures (qwen3next, qwen35, kimi-linear) run one at a time
  --ctx-size N     the KV pool the parallel requests share, in tokens (default: 4 x the context,
                   or parallel x the context if more, within half of the available memory);
                   what no request holds stays cached for prompts that start the same way
  --queue N        requests that may wait for each model (default 64); more get 503 with Retry-After
  --max-body BYTES largest request body (default 33554432); more get 413
  --shutdown-timeout S  SIGTERM/SIGINT: seconds running requests get to end (default 10)
  --device NAME    CPU, or AMD / AMD:0 (the first AMD GPU) (default: $TINYLLM_DEVICE, else CPU)
  --threads N      CPU threads (default: all)
  --kv TYPE        KV cache type of every model (llama-server's --cache-type-k/-v): f16 (default), f32,
                   q8_0 or q4_0 (blocks of 32 values, 0.53 and 0.28 of f16's bytes: more context in the
                   pool; CPU only, head dims multiples of 32, not MLA models)
  --chat-template FILE  use this Jinja chat template instead of the model's (llama-server's --chat-template-file)
  --pooling P      how embeddings pool hidden states (mean, cls, last); default: the model's
                   <arch>.pooling_type, and a model without one cannot embed
)";

// A count or size: an integer from 0 to INT_MAX.
int parse_int(Args& args, const std::string& flag, int fallback) {
    long long n = fallback;
    if (args.number(flag, n) && (n < 0 || n > INT_MAX)) args.usage_error(flag + " needs a non-negative integer, not '" + std::to_string(n) + "'");
    return int(n);
}

}  // namespace

int cmd_serve(const std::vector<std::string>& argv) {
    Args args(argv, "serve");
    if (args.flag("--help") || args.flag("-h")) {
        std::fputs(USAGE, stdout);
        return 0;
    }
    llm::SessionOptions session_options;
    server::ServerOptions options;
    const bool one_model = args.value("--model", "-m", session_options.model_path);
    server::ModelsOptions models;
    args.value("--models-dir", models.models_dir);
    models.models_max = parse_int(args, "--models-max", 2);
    models.idle_unload_s = parse_int(args, "--idle-unload", 0);
    models.allow_pull = args.flag("--allow-pull");
    args.value("--host", options.host);
    options.port = parse_int(args, "--port", 8080);
    std::string api_key, api_key_file, host;
    args.value("--api-key", api_key);
    args.value("--api-key-file", api_key_file);
    options.api_key = server::resolve_api_key(api_key, api_key_file);
    args.value("--cors", options.cors_origin);
    while (args.value("--allow-host", host)) options.allowed_hosts.push_back(host);
    options.max_body = size_t(parse_int(args, "--max-body", int(options.max_body)));
    if (args.number("--shutdown-timeout", options.shutdown_timeout_s) && !(options.shutdown_timeout_s >= 0))
        args.usage_error("--shutdown-timeout needs a number of seconds, not " + std::to_string(options.shutdown_timeout_s));
    session_options.n_ctx = parse_int(args, "--max-context", 0);
    options.queue_size = parse_int(args, "--queue", 64);
    session_options.parallel = options.parallel = parse_int(args, "--parallel", 4);
    session_options.pool_tokens = parse_int(args, "--ctx-size", 0);
    if (options.parallel < 1 || options.parallel > 64) args.usage_error("--parallel needs 1 to 64, not " + std::to_string(options.parallel));
    session_options.device = device_flag(args);
    session_options.kv_type = kv_flag(args);
    if (const int n_threads = parse_int(args, "--threads", 0); n_threads > 0)
        setenv("TINYLLM_THREADS", std::to_string(n_threads).c_str(), 1);  // read when the CPU device starts
    const std::string chat_template = chat_template_flag(args);
    options.chat_template = chat_template;
    std::string pooling;
    if (args.value("--pooling", pooling)) {
        if (pooling == "mean") options.pooling = llm::Pooling::MEAN;
        else if (pooling == "cls") options.pooling = llm::Pooling::CLS;
        else if (pooling == "last") options.pooling = llm::Pooling::LAST;
        else args.usage_error("--pooling must be mean, cls or last, not '" + pooling + "'");
    }
    if (!args.positionals().empty()) args.usage_error("takes no positional arguments");
    if (models.models_max < 1) args.usage_error("--models-max needs at least 1");
    if (one_model && !models.models_dir.empty()) args.usage_error("give --model or --models-dir, not both");
    if (!models.models_dir.empty() && !std::filesystem::is_directory(models.models_dir))
        throw std::runtime_error("[serve] --models-dir " + models.models_dir + " is not a folder");
    // Several models when asked for, or when the Hub cache has some; otherwise the one built-in model.
    const bool several = !one_model && (!models.models_dir.empty() || models.allow_pull || !hub::list_cached(models.hub).empty());
    if (!one_model) session_options.model_path = builtin_model_path();

    std::signal(SIGPIPE, SIG_IGN);  // a client that hangs up must not end the server
    server::Server server(options);
    server::shut_down_on_signal(server);
    const int port = server.bind();  // listen first: /health says 503 while the model loads
    std::thread loop([&] { server.run(); });
    if (several) {
        if (models.models_dir.empty()) models.builtin_path = builtin_model_path();
        models.session = session_options;
        models.chat_template = chat_template;
        server.serve_models(models);
        std::printf("tinyllm serving several models (GET /v1/models lists them; at most %d loaded) at http://%s:%d\n",
                    models.models_max, options.host.c_str(), port);
        std::fflush(stdout);
        loop.join();
        server::await_signal_shutdown();
        return 0;
    }
    std::unique_ptr<llm::Session> session;
    try {
        session_options.model_path = resolve_model(session_options.model_path);
        session = llm::open_session(session_options);
        server.attach(*session, server::model_chat_renderer(*session, chat_template));
    } catch (...) {
        server.stop();
        loop.join();
        server::await_signal_shutdown();
        throw;
    }
    const llm::ModelInfo& info = session->info();
    const llm::ServingStats st = session->serving_stats();
    std::string batch = " · one request at a time";
    if (session->max_parallel() > 1) {
        const int64_t pool = int64_t(st.blocks_used + st.blocks_cached + st.blocks_free) * st.block_size;
        batch = " · " + std::to_string(session->max_parallel()) + " requests at once, KV pool " + std::to_string(pool) + " tokens (" +
                std::to_string(st.pool_bytes >> 20) + " MiB)";
    }
    std::printf("tinyllm serving %s (%s, context %d%s) at http://%s:%d\n", info.name.c_str(), info.architecture.c_str(),
                info.n_ctx, batch.c_str(), options.host.c_str(), port);
    std::fflush(stdout);
    loop.join();
    server::await_signal_shutdown();
    return 0;
}

}  // namespace cli
