// Server internals shared by its files, over the request model of request.h: errors as each API writes
// them, the request field readers (openai.cpp), replies (responses.cpp), the other APIs that translate
// into the same Job (anthropic.cpp, openai_responses.cpp, ollama.cpp, embeddings.cpp), several choices of
// one request, the request queue (request_queue.cpp), metrics and client-disconnect detection
// (client_watch.cpp).
#pragma once

#include "server/request.h"

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace server {

// The error body each API's clients parse: OpenAI {"error": {message, type, param, code}}, Anthropic
// {"type": "error", "error": {type, message}}, ollama {"error": message}.
enum class ErrorShape { OPENAI, ANTHROPIC, OLLAMA };
json error_json(const ApiError& error, ErrorShape shape = ErrorShape::OPENAI);
std::string dump(const json& j);  // compact; invalid UTF-8 from a model becomes U+FFFD instead of throwing

// Request field readers (openai.cpp): each throws ApiError 400 naming the field.
ApiError invalid(const std::string& param, const std::string& what);
bool present(const json& body, const char* key);  // there and not null
double number(const json& body, const char* key, double lo, double hi, double fallback);
int64_t integer(const json& body, const char* key, int64_t lo, int64_t hi, int64_t fallback);
bool boolean(const json& body, const char* key, bool fallback, const std::string& param = "");
// obj[key] as a string: the fallback when obj is not an object or the key is absent or null, a 400
// naming `param` when it holds anything else.
std::string string_field(const json& obj, const char* key, const std::string& param, const std::string& fallback = "");
std::string random_id(const char* prefix);  // prefix + 24 random letters and digits

// n > 1: the request's choices, each as its own Job (choice_index i, the seed + i) through
// generate_reply. On a parallel session they run at once, the first prefilling the prompt and the
// others starting once its blocks are cached; on a serial one, one after the other. on_delta(i, ...)
// comes from choice i's thread.
std::vector<Outcome> generate_choices(llm::Session& session, const std::vector<Job>& choices,
                                      const std::function<bool(int, Delta&&)>& on_delta, const std::function<bool()>& client_gone,
                                      const std::function<bool()>& interrupted);
std::vector<Job> choice_jobs(const Job& job);

// Response bodies. Streams: the first chunk carries role "assistant", tool calls come as a header
// delta (index, id, type, name) then an arguments delta, the last chunk has an empty delta and the
// finish_reason, then (include_usage) a usage chunk with choices: [].
json envelope(const Job& job, bool chunk);  // id, object, created, model, system_fingerprint
json usage_json(const Outcome& outcome);
json timings_json(const Outcome& outcome);  // llama-server's timings: prompt_n, prompt_ms, predicted_n, …, cache_n
class StreamFormatter {
public:
    explicit StreamFormatter(const Job& job) : job_(job) {}
    std::vector<json> start();
    std::vector<json> on_delta(const Delta& delta);
    std::vector<json> finish(const Outcome& outcome);

private:
    json chunk(json delta_or_text, json logprobs, json finish_reason) const;
    const Job& job_;
    int n_tool_calls_ = 0;
    size_t text_offset_ = 0;  // completions' logprobs.text_offset
};
json whole_response(const Job& job, const Delta& reply, const Outcome& outcome);  // stream: false

// One API's replies over the shared generation: the whole response (stream: false), or the stream's
// pieces already framed for the wire (SSE events, NDJSON lines; "" sends nothing).
class ReplyFormat {
public:
    virtual ~ReplyFormat() = default;
    virtual json whole(const Delta& reply, const Outcome& outcome) = 0;
    virtual const char* stream_type() const { return "text/event-stream"; }
    virtual std::string start() = 0;
    virtual std::string on_delta(const Delta& delta) = 0;
    virtual std::string finish(const Outcome& outcome) = 0;
    virtual std::string error(const ApiError& error) = 0;  // an error after the stream began
    virtual std::string end_after_error() { return ""; }   // what closes a stream that ended in an error
    virtual std::string progress(const Progress&) { return ""; }
    virtual std::string keep_alive() { return ": keep-alive\n\n"; }  // sent when a long prefill is silent
};
std::unique_ptr<ReplyFormat> openai_format(const Job& job);  // chat.completion(.chunk) / text_completion

// Anthropic Messages (anthropic.cpp). The request becomes an OpenAI chat body, then a Job like any chat.
json anthropic_to_chat(const json& body, bool count_only);  // count_only: /v1/messages/count_tokens
Job parse_anthropic_request(const json& body, const llm::Session& session, const ChatRenderer& render_chat,
                            const std::string& model_name);
std::unique_ptr<ReplyFormat> anthropic_format(const Job& job);

// OpenAI Responses, stateless (openai_responses.cpp). `request` is echoed in the response object.
Job parse_responses_request(const json& body, const llm::Session& session, const ChatRenderer& render_chat,
                            const std::string& model_name);
std::unique_ptr<ReplyFormat> responses_format(const Job& job, const json& request);

// ollama's /api/chat and /api/generate (ollama.cpp). A /api/generate with no prompt only "loads".
Job parse_ollama_request(const json& body, const llm::Session& session, const ChatRenderer& render_chat,
                         const std::string& model_name, bool generate);
std::unique_ptr<ReplyFormat> ollama_format(const Job& job, bool generate);
std::string iso_time_now();  // 2026-12-01T21:40:00.123456789Z, ollama's timestamps
// ollama's model descriptions: one /api/tags or /api/ps entry, and the /api/show body.
struct ModelFacts {
    std::string name;
    const llm::ModelInfo* info = nullptr;
    llm::Pooling pooling = llm::Pooling::NONE;  // what embeddings use (--pooling or the GGUF's)
    std::string chat_template;                 // the one the server renders with
};
json capabilities_json(const ModelFacts& model, bool ollama_names);  // completion, tools, embedding(s), thinking
json ollama_model_entry(const ModelFacts& model, bool running);
json ollama_show(const ModelFacts& model);

// Embeddings (embeddings.cpp): /v1/embeddings and ollama's /api/embed.
struct EmbedJob {
    std::string model;
    std::vector<std::vector<int32_t>> inputs;  // token ids of each input
    int dimensions = 0;                        // 0: all; else the first N dims, normalized again
    bool base64 = false;                       // encoding_format base64 (little-endian float32)
    bool ollama = false;
};
EmbedJob parse_embeddings_request(const json& body, const llm::Session& session, const std::string& model_name, bool ollama);
// Runs the inputs one after the other (the caller holds the model's turn in the queue).
std::vector<std::vector<float>> run_embeddings(llm::Session& session, const EmbedJob& job, llm::Pooling pooling);
json embeddings_response(const EmbedJob& job, const std::vector<std::vector<float>>& vectors, double ms);

// Requests wait in arrival order for one model instance, which runs up to n_running of them at once
// (its session's max_parallel()); at most `max_waiting` may wait.
class RequestQueue {
public:
    explicit RequestQueue(int max_waiting, int n_running = 1) : max_waiting_(max_waiting), n_running_(n_running) {}
    class Ticket {
    public:
        Ticket(RequestQueue& queue, uint64_t number) : queue_(queue), number_(number) {}
        ~Ticket();
        Ticket(const Ticket&) = delete;
        Ticket& operator=(const Ticket&) = delete;
        // Blocks until it is this ticket's turn; false when gone() turned true while waiting.
        bool wait_turn(const std::function<bool()>& gone);

    private:
        RequestQueue& queue_;
        uint64_t number_;
    };
    std::unique_ptr<Ticket> enter();  // nullptr when the queue is full
    void set_running(int n);          // how many run at once (a model's session decides, once loaded)
    int waiting() const;              // requests queued behind the running ones
    int running() const;
    bool busy() const;

private:
    mutable std::mutex mutex_;
    std::condition_variable turn_;
    std::deque<uint64_t> line_;  // ticket numbers; the first n_running_ hold the model
    uint64_t next_ = 0;
    int max_waiting_;
    int n_running_;
};

// At most `n` holders at once (requests rendering and tokenizing their prompts); the others wait,
// giving up when gone() turns true.
class PromptSlots {
public:
    explicit PromptSlots(int n) : free_(n) {}
    class Slot {
    public:
        Slot(PromptSlots& slots, const std::function<bool()>& gone);
        ~Slot();
        Slot(const Slot&) = delete;
        Slot& operator=(const Slot&) = delete;
        bool held() const { return held_; }

    private:
        PromptSlots& slots_;
        bool held_ = false;
    };

private:
    std::mutex mutex_;
    std::condition_variable freed_;
    int free_;
};

// A Prometheus histogram (metrics.cpp): counts of observations per upper bound, their sum and count.
class Histogram {
public:
    explicit Histogram(std::vector<double> bounds) : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}
    void add(double value);
    // The exposition text: # HELP, # TYPE, name_bucket{le="..."} (cumulative, then +Inf), name_sum, name_count.
    std::string text(const char* name, const char* help) const;

private:
    std::vector<double> bounds_;
    std::vector<uint64_t> counts_;  // per bound, the last past every bound
    double sum_ = 0;
    uint64_t count_ = 0;
};

// Notices when an HTTP client has gone away, by peeking at its connection's socket (found from the
// request's remote and local ports: cpp-httplib does not expose it).
class ClientWatch {
public:
    ClientWatch(int remote_port, int local_port);
    bool gone() const;

private:
    int fd_ = -1;
};

}  // namespace server
