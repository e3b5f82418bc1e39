// The HTTP server: a route table over cpp-httplib. Every handler is wrapped so that an exception
// becomes an OpenAI-shaped error and the server keeps serving; generation requests go through the
// queue of the model the request names (model_registry.h); streaming is SSE.
#include "llm/chat_template.h"
#include "server/model_registry.h"
#include "server/server_impl.h"
#include "web_ui/web_ui.h"

#include <httplib.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <thread>

namespace server {

namespace {

using Clock = std::chrono::steady_clock;

// What the request logger adds for the request this thread is handling (handler, stream and logger
// all run on the connection's thread).
thread_local std::string t_log_detail;
thread_local Clock::time_point t_request_start;

double ms_since(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

std::string format(const char* fmt, auto... args) {
    char buf[256];
    std::snprintf(buf, sizeof buf, fmt, args...);
    return buf;
}

std::string generation_log(const Job& job, const Outcome& o) {
    const auto& r = o.result;
    const int n_new = r.n_prompt - r.n_reused;
    std::string line = format(" · prompt %d tok (cached %d, new %d) · prefill %.1f tok/s · decode %.1f tok/s · output %zu tok",
                              r.n_prompt, r.n_reused, n_new, r.t_prefill_ms > 0 ? n_new * 1000.0 / r.t_prefill_ms : 0.0,
                              r.t_decode_ms > 0 ? r.ids.size() * 1000.0 / r.t_decode_ms : 0.0, r.ids.size());
    line += job.stream ? " · stream" : "";
    line += o.client_gone ? " · client went away" : " · " + o.finish_reason;
    return line;
}

}  // namespace

struct Server::Impl {
    ServerOptions options;
    httplib::Server http;
    std::unique_ptr<ModelRegistry> registry_owner;
    std::atomic<ModelRegistry*> registry{nullptr};  // set once the model (or model list) is ready
    hub::Settings hub = hub::Settings::from_env();  // where POST /api/pull fetches into
    std::thread thread;
    int port = -1;

    struct Metrics {
        std::mutex mutex;
        uint64_t requests = 0, generations = 0, prompt_tokens = 0, cached_tokens = 0, generated_tokens = 0;
        double prefill_ms = 0, decode_ms = 0;
    } metrics;

    explicit Impl(ServerOptions o) : options(std::move(o)) {}

    ModelRegistry& require_registry() {
        ModelRegistry* r = registry.load();
        if (!r) throw ApiError(503, "[server] the model is still loading", "", "model_loading");
        return *r;
    }
    // The model a request's `model` field names, loaded and held for the request ("" = the default
    // model). Every handler that runs a model goes through this.
    std::shared_ptr<ModelRegistry::Lease> require_model(const json& body) {
        std::string name;
        if (body.contains("model") && !body["model"].is_null()) {
            if (!body["model"].is_string()) throw ApiError(400, "[server] 'model' must be a string", "model");
            name = body["model"].get<std::string>();
        }
        return require_registry().acquire(name);
    }

    void count(const Outcome& o) {
        std::lock_guard lock(metrics.mutex);
        metrics.generations++;
        metrics.prompt_tokens += o.result.n_prompt;
        metrics.cached_tokens += o.result.n_reused;
        metrics.generated_tokens += o.result.ids.size();
        metrics.prefill_ms += o.result.t_prefill_ms;
        metrics.decode_ms += o.result.t_decode_ms;
    }

    void send_json(httplib::Response& res, int status, const json& body) {
        res.status = status;
        res.set_content(dump(body), "application/json");
    }

    // Wraps a handler: whatever it throws becomes an OpenAI-shaped error response.
    httplib::Server::Handler guarded(std::function<void(const httplib::Request&, httplib::Response&)> handler) {
        return [this, handler](const httplib::Request& req, httplib::Response& res) {
            try {
                handler(req, res);
            } catch (const ApiError& e) {
                send_json(res, e.status, error_json(e));
            } catch (const llm::TemplateError& e) {  // e.g. the template's raise_exception on bad roles
                send_json(res, 400, error_json(ApiError(400, std::string("[server] chat template: ") + e.what(), "messages")));
            } catch (const nlohmann::json::exception& e) {  // a field of an unexpected type
                send_json(res, 400, error_json(ApiError(400, std::string("[server] invalid request: ") + e.what())));
            } catch (const tok::Error& e) {
                send_json(res, 400, error_json(ApiError(400, e.what())));
            } catch (const std::length_error& e) {
                send_json(res, 400, error_json(ApiError(400, std::string("[server] ") + e.what(), "messages", "context_length_exceeded")));
            } catch (const std::exception& e) {
                send_json(res, 500, error_json(ApiError(500, std::string("[server] internal error: ") + e.what())));
            }
        };
    }

    void generate(const httplib::Request& req, httplib::Response& res, Endpoint endpoint);
    void pull(const httplib::Request& req, httplib::Response& res);
    void routes();
};

void Server::Impl::generate(const httplib::Request& req, httplib::Response& res, Endpoint endpoint) {
    const json body = parse_body(req.body);
    std::shared_ptr<ModelRegistry::Lease> model = require_model(body);  // held until the reply is sent
    llm::Session& s = model->session();
    auto job = std::make_shared<Job>(endpoint == Endpoint::CHAT ? parse_chat_request(body, s, model->render_chat(), model->name())
                                                                : parse_completion_request(body, s, model->name()));
    std::shared_ptr<RequestQueue::Ticket> ticket = model->queue().enter();
    if (!ticket)
        throw ApiError(503, "[server] the queue is full (" + std::to_string(options.queue_size) + " waiting); retry later", "", "queue_full");
    auto watch = std::make_shared<ClientWatch>(req.remote_port, req.local_port);
    auto gone = [watch] { return watch->gone(); };

    if (!job->stream) {
        if (!ticket->wait_turn(gone)) {
            t_log_detail = " · client went away while queued";
            return;
        }
        Delta reply;
        Outcome o = generate_reply(s, *job, [&](Delta&& d) {
            reply.text.append(std::move(d.text));
            for (auto& e : d.logprobs) reply.logprobs.push_back(std::move(e));
            return true;
        }, gone);
        ticket.reset();
        count(o);
        t_log_detail = generation_log(*job, o);
        send_json(res, 200, whole_response(*job, reply, o));
        return;
    }

    res.set_header("Cache-Control", "no-cache");
    res.set_chunked_content_provider("text/event-stream", [this, job, ticket, gone, model, &s](size_t, httplib::DataSink& sink) mutable {
        auto write = [&](const std::string& event) { return sink.write(event.data(), event.size()); };
        auto write_json = [&](const json& j) { return write("data: " + dump(j) + "\n\n"); };
        if (!ticket->wait_turn(gone)) {
            t_log_detail = " · client went away while queued";
            return false;
        }
        StreamFormatter formatter(*job);
        for (const json& c : formatter.start()) write_json(c);
        try {
            Outcome o = generate_reply(s, *job, [&](Delta&& d) {
                for (const json& c : formatter.on_delta(d))
                    if (!write_json(c)) return false;
                return true;
            }, gone);
            ticket.reset();
            count(o);
            t_log_detail = generation_log(*job, o);
            if (o.client_gone) return false;
            for (const json& c : formatter.finish(o)) write_json(c);
            write("data: [DONE]\n\n");
        } catch (const std::length_error& e) {  // an error after the stream began is an event
            write_json(error_json(ApiError(400, std::string("[server] ") + e.what(), "messages", "context_length_exceeded")));
        } catch (const std::exception& e) {
            write_json(error_json(ApiError(500, std::string("[server] generation failed: ") + e.what())));
        }
        ticket.reset();
        sink.done();
        return true;
    });
}

// POST /api/pull as ollama answers it: NDJSON progress lines ({"status": "pulling manifest"}, then
// {"status", "digest", "total", "completed"} per file, "verifying sha256 digest", "success"), or with
// "stream": false one {"status": "success"}. A failure mid-stream is a final {"error": ...} line.
void Server::Impl::pull(const httplib::Request& req, httplib::Response& res) {
    const json body = parse_body(req.body);
    const json& field = body.contains("model") ? body["model"] : body.contains("name") ? body["name"] : json();
    if (!field.is_string()) throw ApiError(400, "[server] 'model' must be a Hub model name (OWNER/REPO[:QUANT])", "model");
    const std::string name = field.get<std::string>();
    const std::optional<hub::ModelRef> ref = hub::ModelRef::parse(name);
    if (!ref) throw ApiError(400, "[server] '" + name + "' is not a Hub model name (OWNER/REPO[:QUANT] or OWNER/REPO/FILE.gguf)", "model");
    if (body.contains("stream") && !body["stream"].is_boolean()) throw ApiError(400, "[server] 'stream' must be true or false", "stream");
    auto finish = [this, name](const hub::PullResult& r) {
        if (ModelRegistry* reg = registry.load()) reg->add(name, r.path.string());
        t_log_detail = " · pulled " + name + (r.downloaded ? "" : " (cached)");
    };
    if (!body.value("stream", true)) {
        try {
            finish(hub::pull(hub, *ref));
        } catch (const hub::Error& e) {
            const std::string what = e.what();
            const bool missing = what.find("no such") != std::string::npos || what.find("has no") != std::string::npos;
            throw ApiError(missing ? 404 : 500, what, "model", missing ? "model_not_found" : "pull_failed");
        }
        send_json(res, 200, {{"status", "success"}});
        return;
    }
    res.set_chunked_content_provider("application/x-ndjson", [this, ref = *ref, finish](size_t, httplib::DataSink& sink) {
        auto write = [&](const json& j) {
            std::string line = dump(j) + "\n";
            return sink.write(line.data(), line.size());
        };
        try {
            finish(hub::pull(hub, ref, [&](const hub::Progress& p) {
                json line = {{"status", p.status}};
                if (!p.digest.empty() && p.status != "verifying sha256 digest")
                    line.update({{"digest", p.digest}, {"total", p.total}, {"completed", p.completed}});
                write(line);
            }));
        } catch (const std::exception& e) {
            write({{"error", e.what()}});
        }
        sink.done();
        return true;
    });
}

void Server::Impl::routes() {
    http.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
        t_request_start = Clock::now();
        t_log_detail.clear();
        if (!options.cors_origin.empty()) {
            res.set_header("Access-Control-Allow-Origin", options.cors_origin);
            if (options.cors_origin != "*") res.set_header("Vary", "Origin");
        }
        if (req.method == "OPTIONS") {  // CORS preflight: answered here, no key needed
            if (!options.cors_origin.empty()) {
                res.set_header("Access-Control-Allow-Methods", "GET, POST, OPTIONS");
                res.set_header("Access-Control-Allow-Headers", "Authorization, Content-Type");
                res.set_header("Access-Control-Max-Age", "86400");
            }
            res.status = 204;
            return httplib::Server::HandlerResponse::Handled;
        }
        const bool open_route = req.path == "/" || req.path == "/health";
        if (!options.api_key.empty() && !open_route && req.get_header_value("Authorization") != "Bearer " + options.api_key) {
            const bool missing = !req.has_header("Authorization");
            send_json(res, 401, error_json(ApiError(401, missing ? "[server] missing API key: send 'Authorization: Bearer KEY'"
                                                                 : "[server] invalid API key", "", "invalid_api_key")));
            return httplib::Server::HandlerResponse::Handled;
        }
        return httplib::Server::HandlerResponse::Unhandled;
    });
    http.set_error_handler([this](const httplib::Request& req, httplib::Response& res) {
        if (!res.body.empty()) return;  // our own error, already OpenAI-shaped
        if (res.status == 404)
            send_json(res, 404, error_json(ApiError(404, "[server] no route " + req.method + " " + req.path)));
        else
            send_json(res, res.status, error_json(ApiError(res.status, "[server] HTTP " + std::to_string(res.status))));
    });
    http.set_exception_handler([this](const httplib::Request&, httplib::Response& res, std::exception_ptr) {
        send_json(res, 500, error_json(ApiError(500, "[server] internal error")));
    });
    if (options.log_requests)
        http.set_logger([](const httplib::Request& req, const httplib::Response& res) {
            std::fprintf(stderr, "[server] %s %s %d · %.1f ms%s\n", req.method.c_str(), req.path.c_str(), res.status,
                         ms_since(t_request_start), t_log_detail.c_str());
        });

    http.Get("/", [](const httplib::Request&, httplib::Response& res) {
        std::string_view page = web_ui::index_html();
        res.set_content(page.data(), page.size(), "text/html; charset=utf-8");
    });
    http.Get("/health", [this](const httplib::Request&, httplib::Response& res) {
        if (registry.load()) send_json(res, 200, {{"status", "ok"}});
        else send_json(res, 503, {{"status", "loading"}});
    });
    auto models = guarded([this](const httplib::Request&, httplib::Response& res) {
        json data = json::array();
        for (const ModelRegistry::Listed& m : require_registry().list()) {
            json model = {{"id", m.name}, {"object", "model"}, {"created", 0}, {"owned_by", "tinyllm"}, {"state", state_name(m.state)}};
            if (m.info)
                model["meta"] = {{"architecture", m.info->architecture}, {"n_ctx", m.info->n_ctx}, {"n_vocab", m.info->n_vocab}};
            data.push_back(model);
        }
        send_json(res, 200, {{"object", "list"}, {"data", data}});
    });
    http.Get("/v1/models", models);
    http.Get("/models", models);
    auto chat = guarded([this](const httplib::Request& req, httplib::Response& res) { generate(req, res, Endpoint::CHAT); });
    auto completion = guarded([this](const httplib::Request& req, httplib::Response& res) { generate(req, res, Endpoint::COMPLETION); });
    http.Post("/v1/chat/completions", chat);
    http.Post("/chat/completions", chat);
    http.Post("/v1/completions", completion);
    http.Post("/completions", completion);

    http.Post("/api/pull", guarded([this](const httplib::Request& req, httplib::Response& res) { pull(req, res); }));

    http.Post("/tokenize", guarded([this](const httplib::Request& req, httplib::Response& res) {
        const json body = parse_body(req.body);
        auto model = require_model(body);
        const tok::Tokenizer& tokenizer = model->session().tokenizer();
        if (!body.contains("content") || !body["content"].is_string()) throw ApiError(400, "[server] 'content' must be a string", "content");
        const bool add_special = body.value("add_special", false), with_pieces = body.value("with_pieces", false);
        json tokens = json::array();
        for (int32_t id : tokenizer.encode(body["content"].get<std::string>(), add_special, true)) {
            if (with_pieces) tokens.push_back({{"id", id}, {"piece", tokenizer.decode({id})}});
            else tokens.push_back(id);
        }
        send_json(res, 200, {{"tokens", tokens}});
    }));
    http.Post("/detokenize", guarded([this](const httplib::Request& req, httplib::Response& res) {
        const json body = parse_body(req.body);
        auto model = require_model(body);
        const tok::Tokenizer& tokenizer = model->session().tokenizer();
        if (!body.contains("tokens") || !body["tokens"].is_array()) throw ApiError(400, "[server] 'tokens' must be a list of token ids", "tokens");
        std::vector<int32_t> ids;
        for (const auto& id : body["tokens"]) {
            if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() >= tokenizer.n_vocab())
                throw ApiError(400, "[server] 'tokens' must hold token ids below " + std::to_string(tokenizer.n_vocab()), "tokens");
            ids.push_back(id.get<int32_t>());
        }
        send_json(res, 200, {{"content", tokenizer.decode(ids)}});
    }));

    http.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
        std::string out;
        auto metric = [&](const char* name, const char* type, const char* help, double value) {
            out += format("# HELP %s %s\n# TYPE %s %s\n%s %.6g\n", name, help, name, type, name, value);
        };
        std::lock_guard lock(metrics.mutex);
        const auto& m = metrics;
        metric("tinyllm_requests_total", "counter", "Generation requests completed.", double(m.generations));
        metric("tinyllm_prompt_tokens_total", "counter", "Prompt tokens processed, cached ones included.", double(m.prompt_tokens));
        metric("tinyllm_prompt_tokens_cached_total", "counter", "Prompt tokens reused from the previous request.", double(m.cached_tokens));
        metric("tinyllm_generated_tokens_total", "counter", "Tokens generated.", double(m.generated_tokens));
        metric("tinyllm_prompt_tokens_per_second", "gauge", "Average prefill throughput.",
               m.prefill_ms > 0 ? (m.prompt_tokens - m.cached_tokens) * 1000.0 / m.prefill_ms : 0.0);
        metric("tinyllm_generated_tokens_per_second", "gauge", "Average decode throughput.",
               m.decode_ms > 0 ? m.generated_tokens * 1000.0 / m.decode_ms : 0.0);
        ModelRegistry* r = registry.load();
        metric("tinyllm_queue_depth", "gauge", "Requests waiting for a model.", r ? r->waiting() : 0);
        metric("tinyllm_requests_processing", "gauge", "Requests on a model now.", r ? r->running() : 0);
        res.set_content(out, "text/plain; version=0.0.4");
    });
}

Server::Server(ServerOptions options) : impl_(std::make_unique<Impl>(std::move(options))) {
    // Every connection holds a thread while it waits in the queue: enough threads that /health and
    // a full queue's 503 still get through.
    const size_t n_threads = size_t(std::max(impl_->options.queue_size, 0)) + 8;
    impl_->http.new_task_queue = [n_threads] { return new httplib::ThreadPool(n_threads); };
    impl_->http.set_payload_max_length(64 << 20);
    impl_->routes();
}

Server::~Server() {
    stop();
    impl_->registry.store(nullptr);
}

void Server::attach(llm::Session& session, ChatRenderer render_chat) {
    const std::string name = impl_->options.model_name.empty() ? session.info().name : impl_->options.model_name;
    impl_->registry_owner = std::make_unique<ModelRegistry>(session, std::move(render_chat), name, impl_->options.queue_size);
    impl_->registry.store(impl_->registry_owner.get());
}

void Server::serve_models(const ModelsOptions& options) {
    impl_->hub = options.hub;
    impl_->registry_owner = std::make_unique<ModelRegistry>(options, impl_->options.queue_size);
    impl_->registry.store(impl_->registry_owner.get());
}

int Server::bind() {
    const auto& o = impl_->options;
    impl_->port = o.port == 0 ? impl_->http.bind_to_any_port(o.host) : (impl_->http.bind_to_port(o.host, o.port) ? o.port : -1);
    if (impl_->port < 0)
        throw std::runtime_error("[server] cannot listen on " + o.host + ":" + std::to_string(o.port) + " (in use, or not an address of this machine)");
    return impl_->port;
}

void Server::run() { impl_->http.listen_after_bind(); }

void Server::start() {
    bind();
    impl_->thread = std::thread([this] { run(); });
    for (int i = 0; i < 5000 && !impl_->http.is_running(); i++) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    if (!impl_->http.is_running()) throw std::runtime_error("[server] the listener did not start");
}

void Server::stop() {
    impl_->http.stop();
    if (impl_->thread.joinable()) impl_->thread.join();
}

int Server::port() const { return impl_->port; }

}  // namespace server
