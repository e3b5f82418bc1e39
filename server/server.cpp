// The HTTP server: a route table over cpp-httplib. Every handler is wrapped so that an exception
// becomes an error in the API's shape and the server keeps serving; generation requests lease the model
// their `model` field names (model_registry.h) and go through its queue; streaming is SSE.
#include "llm/chat_template.h"
#include "llm/grammar.h"
#include "server/http_acceptor.h"
#include "server/model_registry.h"
#include "server/server_impl.h"
#include "web_ui/web_ui.h"

#include <malloc.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <thread>

namespace server {

namespace {

using Clock = std::chrono::steady_clock;
using Lease = std::shared_ptr<ModelRegistry::Lease>;

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
    HttpCore http;
    HttpAcceptor acceptor;
    std::unique_ptr<ModelRegistry> registry_owner;
    std::atomic<ModelRegistry*> registry{nullptr};  // set once the model (or the model list) is ready
    hub::Settings hub = hub::Settings::from_env();  // where POST /api/pull fetches into
    PromptSlots prompt_slots{2};
    std::thread thread;
    int port = -1;
    // Shutdown: no new generations; queued ones end; the running one stops at cut_at.
    std::atomic<bool> stopping{false};
    std::atomic<Clock::rep> cut_at{Clock::time_point::max().time_since_epoch().count()};
    bool cut() const { return Clock::now().time_since_epoch().count() >= cut_at.load(); }

    struct Metrics {
        std::mutex mutex;
        uint64_t requests = 0, generations = 0, prompt_tokens = 0, cached_tokens = 0, generated_tokens = 0;
        double prefill_ms = 0, decode_ms = 0;
        Histogram ttft{{0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30}};              // seconds to the first token
        Histogram itl{{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5}};      // seconds between tokens
    } metrics;

    explicit Impl(ServerOptions o) : options(std::move(o)), acceptor(http, acceptor_options(options)) {}

    static AcceptorOptions acceptor_options(const ServerOptions& o) {
        AcceptorOptions a;
        a.max_body = o.max_body;
        a.max_connections = o.max_connections;
        // Every request waiting in the queue holds a worker: enough that /health and a full queue's
        // 503 still get through.
        a.n_workers = std::max(o.queue_size, 0) + std::max(o.parallel, 1) + 8;
        a.idle_timeout_ms = o.idle_timeout_ms;
        a.header_timeout_ms = o.header_timeout_ms;
        a.request_timeout_ms = o.request_timeout_ms;
        a.policy.api_key = o.api_key;
        a.policy.cors_origin = o.cors_origin;
        a.policy.loopback_only_hosts = is_loopback_host(o.host);
        a.policy.allowed_hosts = o.allowed_hosts;
        if (o.log_requests) a.log = [](const std::string& line) { std::fprintf(stderr, "%s\n", line.c_str()); };
        return a;
    }

    ModelRegistry& require_registry() {
        ModelRegistry* r = registry.load();
        if (!r) throw ApiError(503, "[server] the model is still loading", "", "model_loading");
        return *r;
    }
    // The model a request's `model` field names ("" or absent: the default), loaded and held while the
    // lease lives. Every handler that uses a model goes through this; an unknown name is a 404.
    Lease lease(const json& body) {
        std::string name;
        if (present(body, "model")) {
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
        if (o.ttft_ms >= 0) metrics.ttft.add(o.ttft_ms / 1000);
        for (float ms : o.token_gaps_ms) metrics.itl.add(ms / 1000);
    }

    void send_json(httplib::Response& res, int status, const json& body) {
        res.status = status;
        res.set_content(dump(body), "application/json");
    }

    // Wraps a handler: whatever it throws becomes an error response in the API's shape.
    httplib::Server::Handler guarded(std::function<void(const httplib::Request&, httplib::Response&)> handler,
                                     ErrorShape shape = ErrorShape::OPENAI) {
        return [this, handler, shape](const httplib::Request& req, httplib::Response& res) {
            auto fail = [&](const ApiError& e) {
                if (e.code == "queue_full" || e.code == "model_loading") res.set_header("Retry-After", "1");
                send_json(res, e.status, error_json(e, shape));
            };
            try {
                handler(req, res);
            } catch (const ApiError& e) {
                fail(e);
            } catch (const llm::TemplateError& e) {  // e.g. the template's raise_exception on bad roles
                fail(ApiError(400, std::string("[server] chat template: ") + e.what(), "messages"));
            } catch (const nlohmann::json::exception& e) {  // a field of an unexpected type
                fail(ApiError(400, std::string("[server] invalid request: ") + e.what()));
            } catch (const tok::Error& e) {
                fail(ApiError(400, e.what()));
            } catch (const llm::GrammarError& e) {  // a grammar past the matcher's budget in a later state
                fail(ApiError(400, std::string("[server] ") + e.what(), "grammar"));
            } catch (const std::length_error& e) {
                fail(ApiError(400, std::string("[server] ") + e.what(), "messages", "context_length_exceeded"));
            } catch (const std::invalid_argument& e) {  // e.g. [embed] on a model without pooling
                fail(ApiError(400, std::string("[server] ") + e.what()));
            } catch (const std::exception& e) {
                fail(ApiError(500, std::string("[server] internal error: ") + e.what()));
            }
        };
    }

    void generate(const httplib::Request& req, httplib::Response& res, Endpoint endpoint);
    // Runs a parsed job on its model with one API's reply format: queued, then answered whole or
    // streamed. The lease keeps the model resident until the reply is sent.
    void run_job(const httplib::Request& req, httplib::Response& res, const Lease& model, std::shared_ptr<Job> job,
                 std::shared_ptr<ReplyFormat> format);
    // A request's place in its model's queue, and what ends it early: its client leaving, the server
    // stopping (queued requests) or cutting running replies short.
    struct Turn {
        std::shared_ptr<RequestQueue::Ticket> ticket;
        std::shared_ptr<ClientWatch> watch;
        std::function<bool()> gone, gone_or_stopping, cut_now;
    };
    // Throws 503 when the model's queue is full or the server stops.
    Turn take_turn(const httplib::Request& req, const Lease& model) {
        Turn t{enter_queue(model), std::make_shared<ClientWatch>(req.remote_port, req.local_port), {}, {}, {}};
        t.gone = [watch = t.watch] { return watch->gone(); };
        t.gone_or_stopping = [this, watch = t.watch] { return stopping || watch->gone(); };
        t.cut_now = [this] { return cut(); };
        return t;
    }
    // OpenAI's n > 1: the choices of one chat or completion request, whole or streamed.
    void run_choices(const httplib::Request& req, httplib::Response& res, const Lease& model, std::shared_ptr<Job> job);
    // Throws 503 when the model's queue is full or the server stops.
    std::shared_ptr<RequestQueue::Ticket> enter_queue(const Lease& model);
    // Parses a request through the prompt slots (rendering and tokenizing are bounded); nullptr when
    // the client left while waiting for one.
    std::shared_ptr<Job> prepare(const httplib::Request& req, const Lease& model,
                                 const std::function<Job(const ModelRegistry::Lease&)>& parse);
    ModelFacts facts(const Lease& model) {
        const llm::ModelInfo& info = model->session().info();
        return {model->name(), &info, options.pooling != llm::Pooling::NONE ? options.pooling : info.pooling,
                options.chat_template.empty() ? info.chat_template : options.chat_template};
    }
    ModelFacts listed_facts(const ModelRegistry::Listed& l) {  // a loaded model of list()
        return {l.name, &*l.info, options.pooling != llm::Pooling::NONE ? options.pooling : l.info->pooling,
                options.chat_template.empty() ? l.info->chat_template : options.chat_template};
    }
    void pull(const httplib::Request& req, httplib::Response& res);
    void embed(const httplib::Request& req, httplib::Response& res, bool ollama);
    void routes();
};

void Server::Impl::generate(const httplib::Request& req, httplib::Response& res, Endpoint endpoint) {
    const json body = parse_body(req.body);
    const Lease model = lease(body);
    auto job = prepare(req, model, [&](const ModelRegistry::Lease& m) {
        return endpoint == Endpoint::CHAT ? parse_chat_request(body, m.session(), m.render_chat(), m.name())
                                          : parse_completion_request(body, m.session(), m.name());
    });
    if (job && job->n_choices > 1) run_choices(req, res, model, job);
    else if (job) run_job(req, res, model, job, openai_format(*job));
}

void Server::Impl::run_choices(const httplib::Request& req, httplib::Response& res, const Lease& model, std::shared_ptr<Job> job) {
    llm::Session& s = model->session();
    Turn turn = take_turn(req, model);
    auto jobs = std::make_shared<std::vector<Job>>(choice_jobs(*job));
    auto summed_usage = [job](const std::vector<Outcome>& outs) {  // one prompt, every choice's completion
        json u = usage_json(outs[0]);
        int completion = 0;
        for (const Outcome& o : outs) completion += int(o.result.ids.size());
        u["completion_tokens"] = completion, u["total_tokens"] = u["prompt_tokens"].get<int>() + completion;
        return u;
    };

    if (!job->stream) {
        if (!turn.ticket->wait_turn(turn.gone_or_stopping)) {
            if (!turn.watch->gone()) throw ApiError(503, "[server] shutting down: the request was still queued", "", "shutting_down");
            t_log_detail = " · client went away while queued";
            return;
        }
        std::vector<Delta> replies(jobs->size());
        std::mutex mutex;
        const std::vector<Outcome> outs = generate_choices(s, *jobs, [&](int i, Delta&& d) {
            std::lock_guard lock(mutex);
            replies[size_t(i)].text.append(std::move(d.text));
            for (auto& e : d.logprobs) replies[size_t(i)].logprobs.push_back(std::move(e));
            return true;
        }, turn.gone, turn.cut_now);
        turn.ticket.reset();
        for (const Outcome& o : outs) count(o);
        t_log_detail = generation_log(*job, outs[0]) + format(" · %zu choices", outs.size());
        json r = whole_response((*jobs)[0], replies[0], outs[0]);
        for (size_t i = 1; i < outs.size(); i++) r["choices"].push_back(whole_response((*jobs)[i], replies[i], outs[i])["choices"][0]);
        r["usage"] = summed_usage(outs);
        send_json(res, 200, r);
        return;
    }

    res.set_header("Cache-Control", "no-cache");
    res.set_chunked_content_provider("text/event-stream", [this, model, job, jobs, turn, summed_usage,
                                                           &s](size_t, httplib::DataSink& sink) mutable {
        std::mutex mutex;  // the choices' threads take turns on the sink
        auto write = [&](const std::vector<json>& chunks) {
            for (const json& c : chunks) {
                const std::string piece = "data: " + dump(c) + "\n\n";
                if (!sink.write(piece.data(), piece.size())) return false;
            }
            return true;
        };
        if (!turn.ticket->wait_turn(turn.gone_or_stopping)) {
            if (turn.watch->gone()) return false;
            write({error_json(ApiError(503, "[server] shutting down: the request was still queued", "", "shutting_down"))});
        } else {
            std::vector<Job> quiet = *jobs;  // usage comes once, summed, after every choice's last chunk
            for (Job& j : quiet) j.include_usage = false;
            std::vector<StreamFormatter> formats;
            for (const Job& j : quiet) formats.emplace_back(j);
            for (StreamFormatter& f : formats) write(f.start());
            try {
                const std::vector<Outcome> outs = generate_choices(s, quiet, [&](int i, Delta&& d) {
                    std::lock_guard lock(mutex);
                    return write(formats[size_t(i)].on_delta(d));
                }, turn.gone, turn.cut_now);
                turn.ticket.reset();
                for (const Outcome& o : outs) count(o);
                t_log_detail = generation_log(*job, outs[0]) + format(" · %zu choices", outs.size());
                if (outs[0].client_gone) return false;
                for (size_t i = 0; i < outs.size(); i++) write(formats[i].finish(outs[i]));
                if (job->include_usage) {
                    json u = envelope(*job, true);
                    u["choices"] = json::array(), u["usage"] = summed_usage(outs);
                    write({u});
                }
            } catch (const std::length_error& e) {
                write({error_json(ApiError(400, std::string("[server] ") + e.what(), "messages", "context_length_exceeded"))});
            } catch (const llm::GrammarError& e) {
                write({error_json(ApiError(400, std::string("[server] ") + e.what(), "grammar"))});
            } catch (const std::exception& e) {
                write({error_json(ApiError(500, std::string("[server] generation failed: ") + e.what()))});
            }
        }
        const std::string done = "data: [DONE]\n\n";
        sink.write(done.data(), done.size());
        turn.ticket.reset();
        sink.done();
        return true;
    });
}

std::shared_ptr<Job> Server::Impl::prepare(const httplib::Request& req, const Lease& model,
                                           const std::function<Job(const ModelRegistry::Lease&)>& parse) {
    if (stopping) throw ApiError(503, "[server] shutting down", "", "shutting_down");
    ClientWatch watch(req.remote_port, req.local_port);
    // Rendering and tokenizing can take much memory and time: only a few at once.
    auto gone_or_stopping = [&] { return stopping || watch.gone(); };
    PromptSlots::Slot slot(prompt_slots, gone_or_stopping);
    if (!slot.held()) {
        if (stopping) throw ApiError(503, "[server] shutting down", "", "shutting_down");
        t_log_detail = " · client went away before its prompt was prepared";
        return nullptr;
    }
    // Rendering and tokenizing stop midway when the client leaves, freeing the slot for the next one.
    tok::CancelScope cancel(gone_or_stopping);
    try {
        return std::make_shared<Job>(parse(*model));
    } catch (const std::exception&) {
        if (stopping) throw ApiError(503, "[server] shutting down", "", "shutting_down");
        if (!watch.gone()) throw;
        t_log_detail = " · client went away while its prompt was prepared";
        return nullptr;
    }
}

std::shared_ptr<RequestQueue::Ticket> Server::Impl::enter_queue(const Lease& model) {
    if (stopping) throw ApiError(503, "[server] shutting down", "", "shutting_down");
    std::shared_ptr<RequestQueue::Ticket> ticket = model->queue().enter();
    if (!ticket)
        throw ApiError(503, "[server] the queue is full (" + std::to_string(options.queue_size) + " waiting); retry later", "", "queue_full");
    return ticket;
}

void Server::Impl::run_job(const httplib::Request& req, httplib::Response& res, const Lease& model, std::shared_ptr<Job> job,
                           std::shared_ptr<ReplyFormat> format) {
    llm::Session& s = model->session();
    Turn turn = take_turn(req, model);
    const ApiError shutting_down(503, "[server] shutting down: the request was still queued", "", "shutting_down");

    if (!job->stream) {
        if (!turn.ticket->wait_turn(turn.gone_or_stopping)) {
            if (!turn.watch->gone()) throw shutting_down;
            t_log_detail = " · client went away while queued";
            return;
        }
        Delta reply;
        Outcome o = generate_reply(s, *job, [&](Delta&& d) {
            reply.text.append(std::move(d.text));
            for (auto& e : d.logprobs) reply.logprobs.push_back(std::move(e));
            return true;
        }, turn.gone, turn.cut_now);
        turn.ticket.reset();
        count(o);
        t_log_detail = generation_log(*job, o);
        send_json(res, 200, format->whole(reply, o));
        return;
    }

    res.set_header("Cache-Control", "no-cache");
    res.set_chunked_content_provider(format->stream_type(), [this, model, job, format, turn,
                                                             shutting_down, &s](size_t, httplib::DataSink& sink) mutable {
        auto last_write = Clock::now();
        auto write = [&](const std::string& piece) {
            if (piece.empty()) return true;
            last_write = Clock::now();
            return sink.write(piece.data(), piece.size());
        };
        if (!turn.ticket->wait_turn(turn.gone_or_stopping)) {
            if (turn.watch->gone()) {
                t_log_detail = " · client went away while queued";
                return false;
            }
            write(format->error(shutting_down) + format->end_after_error());  // the 200 is out: the end is an event
            sink.done();
            return true;
        }
        write(format->start());
        // Between prefill chunks: progress when asked for, and a keep-alive when the stream has been
        // silent long enough that a proxy or client might give up on it.
        auto on_prefill = [&](const Progress& p) {
            if (job->return_progress) write(format->progress(p));
            if (ms_since(last_write) >= options.keep_alive_ms) write(format->keep_alive());
        };
        try {
            Outcome o = generate_reply(s, *job, [&](Delta&& d) { return write(format->on_delta(d)); }, turn.gone, turn.cut_now, on_prefill);
            turn.ticket.reset();
            count(o);
            t_log_detail = generation_log(*job, o);
            if (o.client_gone) return false;
            write(format->finish(o));
        } catch (const std::length_error& e) {  // an error after the stream began is an event
            write(format->error(ApiError(400, std::string("[server] ") + e.what(), "messages", "context_length_exceeded")));
        } catch (const llm::GrammarError& e) {
            write(format->error(ApiError(400, std::string("[server] ") + e.what(), "grammar")));
        } catch (const std::exception& e) {
            write(format->error(ApiError(500, std::string("[server] generation failed: ") + e.what())));
        }
        turn.ticket.reset();
        sink.done();
        return true;
    });
}

void Server::Impl::embed(const httplib::Request& req, httplib::Response& res, bool ollama) {
    const json body = parse_body(req.body);
    const Lease model = lease(body);
    llm::Session& s = model->session();
    const EmbedJob job = parse_embeddings_request(body, s, model->name(), ollama);
    const ModelFacts m = facts(model);
    if (m.pooling == llm::Pooling::NONE)
        throw ApiError(400, "[server] this model declares no pooling (" + s.info().architecture +
                                ".pooling_type), so it cannot embed; start the server with --pooling mean|cls|last");
    std::shared_ptr<RequestQueue::Ticket> ticket = enter_queue(model);
    ClientWatch watch(req.remote_port, req.local_port);
    if (!ticket->wait_turn([&] { return watch.gone(); })) {
        t_log_detail = " · client went away while queued";
        return;
    }
    const auto t0 = Clock::now();
    const auto vectors = run_embeddings(s, job, m.pooling);
    ticket.reset();
    t_log_detail = format(" · %zu inputs embedded", vectors.size());
    send_json(res, 200, embeddings_response(job, vectors, ms_since(t0)));
}

// POST /api/pull as ollama answers it: NDJSON progress lines ({"status": "pulling manifest"}, then
// {"status", "digest", "total", "completed"} per file, "verifying sha256 digest", "success"), or with
// "stream": false one {"status": "success"}. A failure mid-stream is a final {"error": ...} line.
void Server::Impl::pull(const httplib::Request& req, httplib::Response& res) {
    const json body = parse_body(req.body);
    const json& field = present(body, "model") ? body["model"] : present(body, "name") ? body["name"] : json();
    if (!field.is_string()) throw ApiError(400, "[server] 'model' must be a Hub model name (OWNER/REPO[:QUANT])", "model");
    const std::string name = field.get<std::string>();
    const std::optional<hub::ModelRef> ref = hub::ModelRef::parse(name);
    if (!ref) throw ApiError(400, "[server] '" + name + "' is not a Hub model name (OWNER/REPO[:QUANT] or OWNER/REPO/FILE.gguf)", "model");
    const bool stream = boolean(body, "stream", true);
    auto finish = [this, name](const hub::PullResult& r) {
        if (ModelRegistry* reg = registry.load()) reg->add(name, r.path.string());
        t_log_detail = " · pulled " + name + (r.downloaded ? "" : " (cached)");
    };
    if (!stream) {
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
                res.set_header("Access-Control-Allow-Headers", "Authorization, Content-Type, X-Api-Key");
                res.set_header("Access-Control-Max-Age", "86400");
            }
            res.status = 204;
            return httplib::Server::HandlerResponse::Handled;
        }
        // The API key, Host, Origin and body limits were checked by the acceptor before the body was read.
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
            std::fprintf(stderr, "[server] %s %s %d · %.1f ms%s\n", escape_for_log(req.method).c_str(), escape_for_log(req.path).c_str(),
                         res.status, ms_since(t_request_start), t_log_detail.c_str());
        });

    http.Get("/", [](const httplib::Request&, httplib::Response& res) {
        std::string_view page = web_ui::index_html();
        res.set_content(page.data(), page.size(), "text/html; charset=utf-8");
    });
    http.Get("/health", [this](const httplib::Request&, httplib::Response& res) {
        if (registry.load()) send_json(res, 200, {{"status", "ok"}});
        else send_json(res, 503, {{"status", "loading"}});
    });
    // Every model with its state; what its GGUF says only once it is loaded.
    auto models = guarded([this](const httplib::Request&, httplib::Response& res) {
        json data = json::array();
        for (const ModelRegistry::Listed& l : require_registry().list()) {
            json model = {{"id", l.name}, {"object", "model"}, {"created", 0}, {"owned_by", "tinyllm"}, {"state", state_name(l.state)}};
            if (l.info) {
                const llm::ModelInfo& info = *l.info;
                const ModelFacts m = listed_facts(l);
                model.update({{"context_length", info.n_ctx}, {"max_model_len", info.n_ctx}, {"capabilities", capabilities_json(m, false)},
                              {"meta", {{"architecture", info.architecture}, {"n_ctx", info.n_ctx}, {"n_vocab", info.n_vocab},
                                        {"n_embd", info.n_embd}}}});
            }
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

    // The other APIs: each parses into a Job (or an EmbedJob) and answers in its own shapes.
    const ErrorShape ANTHROPIC = ErrorShape::ANTHROPIC, OLLAMA = ErrorShape::OLLAMA;
    http.Post("/v1/messages", guarded([this](const httplib::Request& req, httplib::Response& res) {
        const json body = parse_body(req.body);
        const Lease model = lease(body);
        auto job = prepare(req, model, [&](const ModelRegistry::Lease& m) {
            return parse_anthropic_request(body, m.session(), m.render_chat(), m.name());
        });
        if (job) run_job(req, res, model, job, anthropic_format(*job));
    }, ANTHROPIC));
    http.Post("/v1/messages/count_tokens", guarded([this](const httplib::Request& req, httplib::Response& res) {
        const json body = parse_body(req.body);
        const Lease model = lease(body);
        const Job job = parse_chat_request(anthropic_to_chat(body, true), model->session(), model->render_chat(), model->name());
        send_json(res, 200, {{"input_tokens", job.prompt.size()}});
    }, ANTHROPIC));
    http.Post("/v1/responses", guarded([this](const httplib::Request& req, httplib::Response& res) {
        const json body = parse_body(req.body);
        const Lease model = lease(body);
        auto job = prepare(req, model, [&](const ModelRegistry::Lease& m) {
            return parse_responses_request(body, m.session(), m.render_chat(), m.name());
        });
        if (job) run_job(req, res, model, job, responses_format(*job, body));
    }));
    http.Post("/v1/embeddings", guarded([this](const httplib::Request& req, httplib::Response& res) { embed(req, res, false); }));
    http.Post("/embeddings", guarded([this](const httplib::Request& req, httplib::Response& res) { embed(req, res, false); }));

    http.Get("/api/version", [this](const httplib::Request&, httplib::Response& res) {
        send_json(res, 200, {{"version", "0.9.0"}});  // the ollama API level these routes follow
    });
    // /api/tags: every model; /api/ps: the loaded ones. Unloaded models have no GGUF details yet.
    for (const bool running : {false, true})
        http.Get(running ? "/api/ps" : "/api/tags", guarded([this, running](const httplib::Request&, httplib::Response& res) {
            json entries = json::array();
            for (const ModelRegistry::Listed& l : require_registry().list()) {
                if (l.info) entries.push_back(ollama_model_entry(listed_facts(l), running));
                else if (!running)
                    entries.push_back({{"name", l.name}, {"model", l.name}, {"modified_at", iso_time_now()}, {"size", l.size},
                                       {"digest", ""}, {"details", json::object()}});
            }
            send_json(res, 200, {{"models", entries}});
        }, OLLAMA));
    http.Post("/api/show", guarded([this](const httplib::Request& req, httplib::Response& res) {
        send_json(res, 200, ollama_show(facts(lease(parse_body(req.body)))));
    }, OLLAMA));
    http.Post("/api/pull", guarded([this](const httplib::Request& req, httplib::Response& res) { pull(req, res); }, OLLAMA));
    for (const bool generate : {false, true})
        http.Post(generate ? "/api/generate" : "/api/chat", guarded([this, generate](const httplib::Request& req, httplib::Response& res) {
            const json body = parse_body(req.body);
            const Lease model = lease(body);
            if (generate && (!present(body, "prompt") || body["prompt"] == "")) {  // ollama's way to load a model
                send_json(res, 200, {{"model", model->name()}, {"created_at", iso_time_now()}, {"response", ""},
                                     {"done", true}, {"done_reason", "load"}});
                return;
            }
            auto job = prepare(req, model, [&](const ModelRegistry::Lease& m) {
                return parse_ollama_request(body, m.session(), m.render_chat(), m.name(), generate);
            });
            if (job) run_job(req, res, model, job, ollama_format(*job, generate));
        }, OLLAMA));
    http.Post("/api/embed", guarded([this](const httplib::Request& req, httplib::Response& res) { embed(req, res, true); }, OLLAMA));

    http.Post("/tokenize", guarded([this](const httplib::Request& req, httplib::Response& res) {
        const json body = parse_body(req.body);
        const Lease model = lease(body);
        const tok::Tokenizer& tokenizer = model->session().tokenizer();
        if (!body.contains("content") || !body["content"].is_string()) throw ApiError(400, "[server] 'content' must be a string", "content");
        check_prompt_bytes(body["content"].get_ref<const std::string&>().size(), model->session(), "content");
        const bool add_special = boolean(body, "add_special", false), with_pieces = boolean(body, "with_pieces", false);
        json tokens = json::array();
        for (int32_t id : tokenizer.encode(body["content"].get<std::string>(), add_special, true)) {
            if (with_pieces) tokens.push_back({{"id", id}, {"piece", tokenizer.decode({id})}});
            else tokens.push_back(id);
        }
        send_json(res, 200, {{"tokens", tokens}});
    }));
    http.Post("/detokenize", guarded([this](const httplib::Request& req, httplib::Response& res) {
        const json body = parse_body(req.body);
        const Lease model = lease(body);
        const tok::Tokenizer& tokenizer = model->session().tokenizer();
        if (!body.contains("tokens") || !body["tokens"].is_array()) throw ApiError(400, "[server] 'tokens' must be a list of token ids", "tokens");
        if (body["tokens"].size() > size_t(1 << 20)) throw ApiError(400, "[server] 'tokens' may hold at most 1048576 ids", "tokens");
        std::vector<int32_t> ids;
        for (const auto& id : body["tokens"]) {
            if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() >= tokenizer.n_vocab())
                throw ApiError(400, "[server] 'tokens' must hold token ids below " + std::to_string(tokenizer.n_vocab()), "tokens");
            ids.push_back(id.get<int32_t>());
        }
        send_json(res, 200, {{"content", tokenizer.decode(ids)}});
    }));

    // The sequences each loaded model runs or lets wait, like llama-server's /slots (ours are not fixed
    // slots: a sequence exists while its request runs).
    http.Get("/slots", guarded([this](const httplib::Request&, httplib::Response& res) {
        json slots = json::array();
        for (const auto& [name, st] : require_registry().serving_stats())
            for (const llm::SlotStatus& q : st.slots)
                slots.push_back({{"id", q.id}, {"model", name}, {"is_processing", q.running}, {"state", q.running ? "processing" : "waiting"},
                                 {"n_prompt_tokens", q.n_prompt}, {"n_cached_tokens", q.n_cached}, {"n_past", q.n_past},
                                 {"n_decoded", q.n_generated}});
        send_json(res, 200, slots);
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
        llm::ServingStats kv;  // the parallel sessions' sequences and KV pools, all loaded models
        if (r)
            for (const auto& [name, st] : r->serving_stats()) {
                kv.running += st.running, kv.waiting += st.waiting, kv.blocks_used += st.blocks_used;
                kv.blocks_cached += st.blocks_cached, kv.blocks_free += st.blocks_free, kv.prefix_hit_tokens += st.prefix_hit_tokens;
                kv.checkpoints += st.checkpoints;
            }
        metric("tinyllm_sequences_running", "gauge", "Sequences in a batch now.", kv.running);
        metric("tinyllm_sequences_waiting", "gauge", "Sequences waiting for a place in a batch (KV blocks).", kv.waiting);
        metric("tinyllm_kv_blocks_used", "gauge", "KV pool blocks held by sequences.", kv.blocks_used);
        metric("tinyllm_kv_blocks_cached", "gauge", "KV pool blocks no sequence holds, kept for their prefix.", kv.blocks_cached);
        metric("tinyllm_kv_blocks_free", "gauge", "KV pool blocks free.", kv.blocks_free);
        metric("tinyllm_prefix_cache_hit_tokens_total", "counter", "Prompt tokens served from the prefix cache.", double(kv.prefix_hit_tokens));
        metric("tinyllm_recurrent_checkpoints", "gauge", "Recurrent states saved at block boundaries for prefix sharing (hybrid models).",
               kv.checkpoints);
        out += m.ttft.text("tinyllm_time_to_first_token_seconds", "From a request's turn to its first token.");
        out += m.itl.text("tinyllm_inter_token_latency_seconds", "Between consecutive tokens of a reply.");
        res.set_content(out, "text/plain; version=0.0.4");
    });
}

Server::Server(ServerOptions options) : impl_(std::make_unique<Impl>(std::move(options))) {
    impl_->http.set_payload_max_length(impl_->options.max_body);
    // Request bodies come and go in buffers of up to max_body: a fixed mmap threshold gives each large
    // one back to the system when freed (glibc's adaptive threshold would keep them in the heap).
    mallopt(M_MMAP_THRESHOLD, 1 << 20);
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
    impl_->port = impl_->acceptor.bind(impl_->options.host, impl_->options.port);
    return impl_->port;
}

void Server::run() { impl_->acceptor.run(); }

void Server::start() {
    bind();
    impl_->thread = std::thread([this] { run(); });
    for (int i = 0; i < 5000 && !impl_->acceptor.running(); i++) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    if (!impl_->acceptor.running()) throw std::runtime_error("[server] the listener did not start");
}

void Server::stop() {
    impl_->stopping = true;
    impl_->cut_at = Clock::now().time_since_epoch().count();
    impl_->acceptor.shutdown();
    if (impl_->thread.joinable()) impl_->thread.join();
}

bool Server::shutdown() {
    const auto timeout = std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(impl_->options.shutdown_timeout_s));
    const auto deadline = Clock::now() + timeout;
    // The running reply gets most of the time to end by itself; the last second is for its final chunk.
    impl_->cut_at = std::max(Clock::now(), deadline - std::chrono::seconds(1)).time_since_epoch().count();
    impl_->stopping = true;
    impl_->acceptor.shutdown();
    while (impl_->acceptor.running() && Clock::now() < deadline) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    if (impl_->acceptor.running()) return false;
    if (impl_->thread.joinable()) impl_->thread.join();
    return true;
}

int Server::port() const { return impl_->port; }

}  // namespace server
