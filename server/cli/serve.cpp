// tinyllm serve: the OpenAI-compatible HTTP server (and the web UI at /) on one model, or on every
// model of a folder and the Hub cache, picked by each request's `model`.
#include "server/cli/cli.h"
#include "server/server.h"

#include <csignal>
#include <filesystem>
#include <memory>
#include <thread>
#include <cstdio>
#include <string>

namespace cli {

namespace {

constexpr const char* USAGE = R"(usage: tinyllm serve [--model M] [--host 127.0.0.1] [--port 8080] [--api-key K] [--cors ORIGIN]
                     [--max-context N] [--queue N] [--device CPU] [--threads N]
                     [--models-dir DIR] [--models-max N] [--idle-unload SECONDS] [--allow-pull]
  --model M        one GGUF model, or a Hub name OWNER/REPO[:QUANT] (pulled on first use)
                   (default: the built-in stories260K, or several models when the options below
                   or the Hub cache give some)
  --models-dir DIR serve every *.gguf in DIR (and the Hub cache's models), by file name
  --models-max N   models resident at once (default 2); the least recently used idle one unloads
  --idle-unload S  unload a model unused for S seconds (default: never)
  --allow-pull     requests may name Hub models not in the cache yet (OWNER/REPO[:QUANT]): pulled
  --host, --port   where to listen (--port 0: any free port; the URL is printed when ready)
  --api-key K      require 'Authorization: Bearer K' (not for / and /health)
  --cors ORIGIN    allow browser pages from ORIGIN ("*": any) to call the API
  --max-context N  context length in tokens (default: the model's, capped at 4096)
  --queue N        requests that may wait for each model (default 64); more get 503
)";

int parse_int(Args& args, const std::string& flag, int fallback) {
    std::string v;
    if (!args.value(flag, v)) return fallback;
    try {
        size_t used = 0;
        int n = std::stoi(v, &used);
        if (used == v.size() && n >= 0) return n;
    } catch (const std::exception&) {
    }
    args.usage_error(flag + " needs a non-negative integer, not '" + v + "'");
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
    args.value("--api-key", options.api_key);
    args.value("--cors", options.cors_origin);
    session_options.n_ctx = parse_int(args, "--max-context", 0);
    options.queue_size = parse_int(args, "--queue", 64);
    args.value("--device", session_options.device);
    session_options.n_threads = parse_int(args, "--threads", 0);
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
    const int port = server.bind();  // listen first: /health says 503 while the model loads
    std::thread loop([&] { server.run(); });
    if (several) {
        if (models.models_dir.empty()) models.builtin_path = builtin_model_path();
        models.session = session_options;
        server.serve_models(models);
        std::printf("tinyllm serving several models (GET /v1/models lists them; at most %d loaded) at http://%s:%d\n",
                    models.models_max, options.host.c_str(), port);
        std::fflush(stdout);
        loop.join();
        return 0;
    }
    std::unique_ptr<llm::Session> session;
    try {
        session_options.model_path = resolve_model(session_options.model_path);
        session = llm::open_session(session_options);
        server.attach(*session, server::model_chat_renderer(*session));
    } catch (...) {
        server.stop();
        loop.join();
        throw;
    }
    const llm::ModelInfo& info = session->info();
    std::printf("tinyllm serving %s (%s, context %d) at http://%s:%d\n", info.name.c_str(), info.architecture.c_str(),
                info.n_ctx, options.host.c_str(), port);
    std::fflush(stdout);
    loop.join();
    return 0;
}

}  // namespace cli
