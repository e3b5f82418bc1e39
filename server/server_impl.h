// Server internals shared by its files: OpenAI request parsing (openai.cpp), running a generation
// (generation.cpp), the request queue (request_queue.cpp) and client-disconnect detection (client_watch.cpp).
#pragma once

#include "llm/reply_stream.h"
#include "server/server.h"

#include <nlohmann/json.hpp>

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

namespace server {

using json = nlohmann::ordered_json;

// A request the server refuses, OpenAI-shaped: {"error": {"message", "type", "param", "code"}}.
struct ApiError : std::runtime_error {
    int status;
    std::string type, param, code;
    ApiError(int status, const std::string& message, std::string param = "", std::string code = "");
};
json error_json(const ApiError& error);
std::string dump(const json& j);  // compact; invalid UTF-8 from a model becomes U+FFFD instead of throwing

enum class Endpoint { CHAT, COMPLETION };

// One generation request, validated and tokenized.
struct Job {
    Endpoint endpoint = Endpoint::CHAT;
    std::string id;          // chatcmpl-… / cmpl-…, the same on every chunk
    int64_t created = 0;
    std::string model;       // echoed
    bool stream = false;
    bool include_usage = false;
    std::vector<int32_t> prompt;
    llm::GenerateOptions generate;  // max_tokens, sampling, n_top_logprobs
    bool logprobs = false;
    std::vector<std::string> stop;
    llm::RouterOptions router;
};

json parse_body(const std::string& body);  // throws ApiError 400 on invalid JSON or a non-object
Job parse_chat_request(const json& body, const llm::Session& session, const ChatRenderer& render_chat,
                       const std::string& model_name);
Job parse_completion_request(const json& body, const llm::Session& session, const std::string& model_name);

// What one step of a reply added: routed text and the logprob entries of the tokens behind it.
struct Delta {
    llm::RoutedText text;
    json logprobs = json::array();  // chat form: [{token, logprob, bytes, top_logprobs}]
    bool empty() const { return text.empty() && logprobs.empty(); }
};

struct Outcome {
    llm::GenerateResult result;
    std::string finish_reason;  // stop, length, tool_calls ("" when the client went away)
    bool client_gone = false;
};

// Runs `job` on the session, calling on_delta as text arrives (it returns false once the client is
// gone). Stops within one token of client_gone() turning true.
Outcome generate_reply(llm::Session& session, const Job& job, const std::function<bool(Delta&&)>& on_delta,
                       const std::function<bool()>& client_gone);

// Response bodies. Streams: the first chunk carries role "assistant", tool calls come as a header
// delta (index, id, type, name) then an arguments delta, the last chunk has an empty delta and the
// finish_reason, then (include_usage) a usage chunk with choices: [].
json usage_json(const Outcome& outcome);
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

// Requests wait in arrival order for one model instance; at most `max_waiting` may wait.
class RequestQueue {
public:
    explicit RequestQueue(int max_waiting) : max_waiting_(max_waiting) {}
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
    int waiting() const;              // requests queued behind the running one
    bool busy() const;

private:
    mutable std::mutex mutex_;
    std::condition_variable turn_;
    std::deque<uint64_t> line_;  // ticket numbers; the front one holds the model
    uint64_t next_ = 0;
    int max_waiting_;
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
