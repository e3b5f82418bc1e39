// tinyllm's front ends over an llm::Session: the OpenAI-compatible HTTP server (server::Server; its
// tests run it in-process on an ephemeral port) and the interactive terminal chat.
#pragma once

#include "hub/hub.h"
#include "llm/chat_prompt.h"
#include "llm/session.h"
#include "llm/stream_router.h"

#include <nlohmann/json.hpp>

#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace server {

using llm::ChatRenderer;  // the chat template as a function: context -> prompt text

// The model's own chat template (or the fallback for its tokenizer preset), through llm::ChatTemplate;
// `source`, when given, replaces it (--chat-template FILE).
ChatRenderer model_chat_renderer(const llm::Session& session, const std::string& source = "");

struct ServerOptions {
    std::string host = "127.0.0.1";
    int port = 8080;             // 0: any free port (see Server::port())
    std::string api_key;         // "": no authentication
    std::string cors_origin;     // "": no CORS headers, cross-origin requests refused; "*" or an origin
    std::vector<std::string> allowed_hosts;  // Host names accepted besides loopback ones (--allow-host)
    int queue_size = 64;         // requests that may wait behind a model's running ones; more get 503
    int parallel = 1;            // requests a model runs at once at most (its session's max_parallel())
    std::string model_name;      // "": the session's model name (one attached session)
    bool log_requests = true;    // one line per request on stderr
    size_t max_body = 32 << 20;  // request body bytes, however framed; more get 413
    int max_connections = 512;   // open connections; the longest-idle one makes room, else 503
    int idle_timeout_ms = 5000, header_timeout_ms = 10000, request_timeout_ms = 60000;
    double shutdown_timeout_s = 10;  // shutdown(): how long running requests may take to end
    // How embeddings pool the hidden states: NONE uses what the GGUF declares (<arch>.pooling_type);
    // anything else overrides it (serve --pooling), e.g. for a model without pooling metadata.
    llm::Pooling pooling = llm::Pooling::NONE;
    std::string chat_template;   // the Jinja source replacing the model's (serve --chat-template), for what
                                 // /v1/models and /api/show report; "": the model's own
    int keep_alive_ms = 15000;   // a stream silent this long while the prompt is prefilled gets an SSE comment
};

// Several models in one server (tinyllm serve without --model): the request's `model` picks one.
struct ModelsOptions {
    std::string models_dir;       // every *.gguf in it, named by its file name without .gguf
    std::string builtin_path;     // a model always listed (named by its file stem), "" for none
    bool hub_cache = true;        // also every model in the Hub cache, as OWNER/REPO:QUANT
    bool allow_pull = false;      // unknown OWNER/REPO[:QUANT] names are pulled from the Hub on first use
    int models_max = 2;           // resident at most; the least recently used idle one is unloaded first
    int idle_unload_s = 0;        // unload a model unused this long (0: never)
    llm::SessionOptions session;  // context, device, threads of every model (model_path is set per model)
    std::string chat_template;    // Jinja source replacing every model's own template ("": each model's)
    hub::Settings hub = hub::Settings::from_env();
};

class Server {
public:
    explicit Server(ServerOptions options);
    ~Server();
    Server(const Server&) = delete;
    Server& operator=(const Server&) = delete;

    // Until a session is attached the server answers /health with 503 (loading) and model routes too.
    void attach(llm::Session& session, ChatRenderer render_chat);
    // Serves the models `options` lists instead of one attached session (see model_registry.h).
    void serve_models(const ModelsOptions& options);

    int bind();    // binds host:port, returns the port; throws std::runtime_error when it cannot
    void run();    // serves until stop() (call bind() first)
    void start();  // bind() and run() on a background thread
    void stop();   // stops accepting, waits for the background thread
    // Graceful stop: no new connections; queued requests end with a 503 (or an error event and
    // [DONE] on a stream); the running one may go on until shutdown_timeout_s minus a second, then
    // ends like a reply cut short (finish_reason "length", [DONE]). Returns once run() has returned
    // or the timeout passed (false).
    bool shutdown();
    int port() const;

    struct Impl;

private:
    std::unique_ptr<Impl> impl_;
};

// SIGTERM/SIGINT end the process through server.shutdown(): exit 0 once it returns in time, 1 if
// requests were still running at the timeout. Call once, before run().
void shut_down_on_signal(Server& server);
// Call when run() has returned: if a signal's shutdown is under way, waits for it to end the process.
void await_signal_shutdown();

// The API key to require: --api-key, else the first line of --api-key-file, else $TINYLLM_API_KEY
// (a key on the command line is visible to every user in ps). Throws std::runtime_error naming the
// file it cannot read or an empty key.
std::string resolve_api_key(const std::string& from_flag, const std::string& key_file);

struct ChatOptions {
    std::string system_prompt;
    llm::SamplingParams sampling;
    int max_tokens = 1024;
    bool dim_reasoning = false;   // reasoning shown dimmed (stdout is a terminal); otherwise not shown
    bool show_prompt = false;     // print "> " before reading (stdin is a terminal)
    llm::GrammarSpec grammar;     // every answer follows it (--grammar / --json-schema)
};

// The terminal chat: one message per input line, /reset, /system TEXT, /exit, EOF exits. `cancel` is
// set by the caller's Ctrl-C handler and stops the current answer only. Returns the exit code.
int run_terminal_chat(llm::Session& session, const ChatRenderer& render_chat, std::FILE* in, std::FILE* out,
                      const ChatOptions& options, std::atomic<bool>& cancel);

}  // namespace server
