// End to end on the real model: `tinyllm serve` / `tinyllm chat` / `tinyllm run` on the built-in
// stories260K, compared with llama.cpp's golden greedy continuation. test_server depends on the
// `tinyllm` target, so a missing executable is a failure, not a skip.
#include "common/test_data.h"

#include <catch2/catch.hpp>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <poll.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

using nlohmann::json;

namespace {

std::string tinyllm_bin() {
    const char* env = std::getenv("TINYLLM_BIN");
    return env && *env ? env : std::string(TINYLLM_BINARY_DIR) + "/tinyllm";
}

bool tinyllm_built() {
    INFO("tinyllm executable: " + tinyllm_bin());
    REQUIRE(std::filesystem::exists(tinyllm_bin()));
    return true;
}

// A child process with its stdin and stdout on pipes.
struct Child {
    pid_t pid = -1;
    int in = -1, out = -1;
    explicit Child(std::vector<std::string> args) {
        int to[2], from[2];
        REQUIRE(pipe(to) == 0);
        REQUIRE(pipe(from) == 0);
        pid = fork();
        REQUIRE(pid >= 0);
        if (pid == 0) {
            dup2(to[0], 0);
            dup2(from[1], 1);
            close(to[1]);
            close(from[0]);
            std::vector<char*> argv;
            for (auto& a : args) argv.push_back(a.data());
            argv.push_back(nullptr);
            execv(argv[0], argv.data());
            _exit(127);
        }
        close(to[0]);
        close(from[1]);
        in = to[1];
        out = from[0];
    }
    ~Child() {
        if (in >= 0) close(in);
        if (out >= 0) close(out);
        if (pid > 0) {
            kill(pid, SIGTERM);
            waitpid(pid, nullptr, 0);
        }
    }
    // Reads stdout until `done(text)` or EOF or the timeout.
    std::string read(const std::function<bool(const std::string&)>& done, int timeout_s = 60) {
        std::string text;
        auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
        while (!done(text) && std::chrono::steady_clock::now() < deadline) {
            pollfd p{out, POLLIN, 0};
            if (poll(&p, 1, 100) <= 0) continue;
            char buf[4096];
            ssize_t n = ::read(out, buf, sizeof buf);
            if (n <= 0) break;
            text.append(buf, size_t(n));
        }
        return text;
    }
    int wait_exit() {
        close(in);
        in = -1;
        int status = 0;
        waitpid(pid, &status, 0);
        pid = -1;
        return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    }
};

// The port in the server's "… at http://127.0.0.1:PORT" line, or 0 before it was printed.
int listening_port(const std::string& banner) {
    size_t at = banner.find("http://");
    if (at == std::string::npos) return 0;
    size_t colon = banner.find(':', at + 7), end = banner.find('\n', at);
    if (colon == std::string::npos || end == std::string::npos) return 0;
    return std::atoi(banner.c_str() + colon + 1);
}

json golden_case(const std::string& prompt) {
    std::ifstream f(test_data::shared("golden/llamacpp/stories260K-f32.json"));
    const json golden = json::parse(f);  // named: a temporary would die before the loop body
    for (const auto& c : golden["cases"])
        if (c["prompt"] == prompt) return c;
    FAIL("no golden case for '" + prompt + "'");
    return {};
}

}  // namespace

TEST_CASE("e2e: tinyllm serve on stories260K: greedy /v1/completions returns the golden continuation") {
    REQUIRE_SHARED_DATA();
    if (!tinyllm_built()) return;
    const json golden = golden_case("Once upon a time");
    Child server({tinyllm_bin(), "serve", "--model", test_data::shared("models/stories260K-f32.gguf"), "--port", "0"});
    std::string banner = server.read([&](const std::string& t) { return listening_port(t) > 0; });
    INFO(banner);
    REQUIRE(listening_port(banner) > 0);
    httplib::Client client("127.0.0.1", listening_port(banner));
    client.set_read_timeout(60, 0);

    auto health = client.Get("/health");
    REQUIRE(health);
    CHECK(health->status == 200);
    json body = {{"prompt", "Once upon a time"}, {"temperature", 0}, {"max_tokens", golden["n_gen"]}};
    auto res = client.Post("/v1/completions", body.dump(), "application/json");
    REQUIRE(res);
    REQUIRE(res->status == 200);
    json r = json::parse(res->body);
    CHECK(r["usage"]["prompt_tokens"] == golden["prompt_ids"].size());
    CHECK(r["usage"]["completion_tokens"] == golden["n_gen"]);
    auto detok = client.Post("/detokenize", json{{"tokens", golden["generated_ids"]}}.dump(), "application/json");
    REQUIRE(detok);
    CHECK(r["choices"][0]["text"] == json::parse(detok->body)["content"]);
    CHECK(r["choices"][0]["text"] == golden["generated_text"]);

    body["stream"] = true;  // streamed, the same text
    res = client.Post("/v1/completions", body.dump(), "application/json");
    REQUIRE(res);
    std::string streamed;
    for (size_t pos = 0; (pos = res->body.find("data: {", pos)) != std::string::npos; pos++)
        streamed += json::parse(res->body.substr(pos + 6, res->body.find("\n\n", pos) - pos - 6))["choices"][0]["text"].get<std::string>();
    CHECK(streamed == golden["generated_text"].get<std::string>());
}

TEST_CASE("e2e: tinyllm run on stories260K prints the golden continuation") {
    REQUIRE_SHARED_DATA();
    if (!tinyllm_built()) return;
    const json golden = golden_case("Once upon a time");
    Child run({tinyllm_bin(), "run", "-m", test_data::shared("models/stories260K-f32.gguf"), "-p", "Once upon a time", "-n",
               std::to_string(golden["n_gen"].get<int>()), "--temp", "0"});
    std::string out = run.read([](const std::string&) { return false; });
    CHECK(run.wait_exit() == 0);
    CHECK(out.find(golden["generated_text"].get<std::string>()) != std::string::npos);
}

TEST_CASE("e2e: tinyllm chat on stories260K through a pipe: two turns, /reset, EOF") {
    if (!tinyllm_built()) return;
    Child chat({tinyllm_bin(), "chat", "--temp", "0", "-n", "16"});
    const std::string input = "Tell me a story.\nAnd then?\n/reset\nHello.\n";
    REQUIRE(write(chat.in, input.data(), input.size()) == ssize_t(input.size()));
    close(chat.in);
    chat.in = -1;
    std::string out = chat.read([](const std::string&) { return false; });
    CHECK(chat.wait_exit() == 0);
    // Three answers (one line each) around the reset notice; no prompt and no banner on a pipe.
    CHECK(std::count(out.begin(), out.end(), '\n') >= 4);
    CHECK(out.find("(conversation cleared)\n") != std::string::npos);
    CHECK(out.find("> ") == std::string::npos);
}

// One stream decoder and one chat pipeline: the same prompt and seed give the same ids, and the same
// ids print the same text in every front end (a prompt's last word and the reply's first word keep
// the space between them; "" starts from BOS). The commands run side by side with the server.
TEST_CASE("e2e: run, chat and the server print the same text for the same prompt and seed") {
    REQUIRE_SHARED_DATA();
    if (!tinyllm_built()) return;
    const std::string model = test_data::shared("models/stories260K-f32.gguf"), story = "Tell me a story.";
    const std::vector<std::string> prompts = {"Lily and Tom went to the park. They", ""};
    Child server({tinyllm_bin(), "serve", "--model", model, "--port", "0"});
    std::vector<std::unique_ptr<Child>> runs;
    for (const std::string& prompt : prompts)
        runs.push_back(std::make_unique<Child>(std::vector<std::string>{tinyllm_bin(), "run", "-m", model, "-p", prompt, "-n", "24",
                                                                        "--temp", "0.8", "--seed", "7"}));
    Child run_chat({tinyllm_bin(), "run", "-m", model, "--chat", "-p", story, "-n", "16", "--temp", "0"});
    Child chat({tinyllm_bin(), "chat", "-m", model, "-n", "16", "--temp", "0"});
    REQUIRE(write(chat.in, (story + "\n").data(), story.size() + 1) == ssize_t(story.size() + 1));
    close(chat.in);  // EOF after the one message
    chat.in = -1;
    auto text_of = [](Child& child) {
        std::string out = child.read([](const std::string&) { return false; });
        CHECK(child.wait_exit() == 0);
        return out;
    };

    std::string banner = server.read([&](const std::string& t) { return listening_port(t) > 0; });
    INFO(banner);
    REQUIRE(listening_port(banner) > 0);
    httplib::Client client("127.0.0.1", listening_port(banner));
    client.set_read_timeout(60, 0);
    for (size_t i = 0; i < prompts.size(); i++) {
        INFO("prompt '" << prompts[i] << "'");
        json body = {{"prompt", prompts[i]}, {"temperature", 0.8}, {"seed", 7}, {"max_tokens", 24}};
        auto res = client.Post("/v1/completions", body.dump(), "application/json");
        REQUIRE(res);
        REQUIRE(res->status == 200);
        CHECK(text_of(*runs[i]) == json::parse(res->body)["choices"][0]["text"].get<std::string>() + "\n");
    }
    json body = {{"messages", json::array({{{"role", "user"}, {"content", story}}})}, {"temperature", 0}, {"max_tokens", 16}};
    auto res = client.Post("/v1/chat/completions", body.dump(), "application/json");
    REQUIRE(res);
    REQUIRE(res->status == 200);
    const std::string answer = json::parse(res->body)["choices"][0]["message"]["content"];
    CHECK(text_of(run_chat) == answer + "\n");
    CHECK(text_of(chat) == answer + "\n");
}

namespace {

// `tinyllm serve` on stories260K with --parallel 4, and what its replies and metrics say.
struct ParallelServer {
    Child child;
    std::unique_ptr<httplib::Client> client;
    int port = 0;
    explicit ParallelServer(const std::string& model = test_data::builtin_model())
        : child({tinyllm_bin(), "serve", "--model", model, "--port", "0", "--parallel", "4", "--queue", "64"}) {
        std::string banner = child.read([&](const std::string& t) { return listening_port(t) > 0; });
        INFO(banner);
        port = listening_port(banner);
        REQUIRE(port > 0);
        CHECK(banner.find("4 requests at once") != std::string::npos);
        client = std::make_unique<httplib::Client>("127.0.0.1", port);
        client->set_read_timeout(120, 0);
    }
    // A streamed completion's text; hang_up_after > 0 closes the connection after that many chunks.
    std::string stream(const json& body, int hang_up_after = 0) {
        httplib::Client c("127.0.0.1", port);
        c.set_read_timeout(120, 0);
        json b = body;
        b["stream"] = true;
        std::string raw;
        int chunks = 0;
        httplib::Request req;
        req.method = "POST", req.path = "/v1/completions", req.body = b.dump();
        req.set_header("Content-Type", "application/json");
        req.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
            raw.append(data, n);
            return hang_up_after == 0 || ++chunks < hang_up_after;
        };
        c.send(req);
        std::string text;
        for (size_t pos = 0; (pos = raw.find("data: {", pos)) != std::string::npos; pos++)
            text += json::parse(raw.substr(pos + 6, raw.find("\n\n", pos) - pos - 6))["choices"][0]["text"].get<std::string>();
        return text;
    }
    double metric(const std::string& name) {
        auto res = client->Get("/metrics");
        REQUIRE(res);
        size_t at = res->body.find("\n" + name + " ");
        REQUIRE(at != std::string::npos);
        return std::atof(res->body.c_str() + at + name.size() + 2);
    }
    // Waits (up to 10 s) until no sequence runs or waits and no block is held.
    bool settles() {
        for (int i = 0; i < 200; i++) {
            if (metric("tinyllm_sequences_running") == 0 && metric("tinyllm_sequences_waiting") == 0 && metric("tinyllm_kv_blocks_used") == 0)
                return true;
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
        }
        return false;
    }
};

const char* const STORY_PROMPTS[] = {"Once upon a time", "The little dog", "Lily and Tom went to the park. They", "One day, a bird",
                                      "Sam had a red ball", "The sun was hot and", "Mom said", "There was a big tree in the garden. It"};

json story_body(size_t i) {  // greedy for even i, a seeded draw for odd ones
    json b = {{"prompt", STORY_PROMPTS[i % std::size(STORY_PROMPTS)]}, {"max_tokens", 40 + int(i % 3) * 8}, {"temperature", 0}};
    if (i % 2) b["temperature"] = 0.8, b["seed"] = int(100 + i);
    return b;
}

// Each of the eight story requests alone, one after the other: what they must give in any company.
std::vector<std::string> solo_stories(ParallelServer& s) {
    std::vector<std::string> solo;
    for (size_t i = 0; i < 8; i++) solo.push_back(s.stream(story_body(i)));
    return solo;
}

// n streams at once, stream(i) on thread i; their texts.
std::vector<std::string> at_once(size_t n, const std::function<std::string(size_t)>& stream) {
    std::vector<std::string> out(n);
    std::vector<std::thread> threads;
    for (size_t i = 0; i < n; i++) threads.emplace_back([&, i] { out[i] = stream(i); });
    for (auto& t : threads) t.join();
    return out;
}

}  // namespace

TEST_CASE("e2e: eight streaming requests at once through serve --parallel 4 each get their solo text, and leave nothing held") {
    if (!tinyllm_built()) return;
    ParallelServer s;
    const std::vector<std::string> solo = solo_stories(s);
    const std::vector<std::string> together = at_once(8, [&](size_t i) { return s.stream(story_body(i)); });
    for (size_t i = 0; i < 8; i++) {
        INFO("request " << i << ": " << story_body(i).dump());
        CHECK(!solo[i].empty());
        CHECK(together[i] == solo[i]);
    }
    CHECK(s.settles());
    auto slots = s.client->Get("/slots");
    REQUIRE(slots);
    CHECK(json::parse(slots->body) == json::array());
    CHECK(s.metric("tinyllm_time_to_first_token_seconds_count") == 16);
}

TEST_CASE("e2e: clients hanging up mid-stream beside others: the others get their solo text, every sequence and block is freed") {
    if (!tinyllm_built()) return;
    ParallelServer s;
    const std::vector<std::string> solo = solo_stories(s);
    // every third hangs up after a few chunks, while it waits, prefills or decodes
    const std::vector<std::string> got = at_once(24, [&](size_t i) { return s.stream(story_body(i % 8), i % 3 == 0 ? int(1 + i % 5) : 0); });
    for (size_t i = 0; i < 24; i++)
        if (i % 3 != 0) {
            INFO("request " << i);
            CHECK(got[i] == solo[i % 8]);
        }
    CHECK(s.settles());
    CHECK(s.metric("tinyllm_queue_depth") == 0);
    CHECK(s.metric("tinyllm_requests_processing") == 0);
}

TEST_CASE("e2e: a hybrid model (qwen3next) serves four streams at once with their solo texts and resumes a repeated prompt from a checkpoint") {
    if (!tinyllm_built()) return;
    REQUIRE_SHARED_DATA();
    ParallelServer s(test_data::shared("models/random-qwen3next-f32.gguf"));
    const std::vector<std::string> solo = solo_stories(s);
    const std::vector<std::string> got = at_once(8, [&](size_t i) { return s.stream(story_body(i)); });
    for (size_t i = 0; i < 8; i++) {
        INFO("request " << i);
        CHECK(got[i] == solo[i]);
    }
    CHECK(s.settles());
    // a prompt of more than a block, twice: the second resumes after its last full block
    const json body = {{"prompt", "Once upon a time, in a land far away, there lived a little girl named Lily who loved to play"},
                       {"max_tokens", 8}, {"temperature", 0}};
    auto post = [&] {
        auto res = s.client->Post("/v1/completions", body.dump(), "application/json");
        REQUIRE(res);
        REQUIRE(res->status == 200);
        return json::parse(res->body);
    };
    const json first = post(), again = post();
    CHECK(again["choices"][0]["text"] == first["choices"][0]["text"]);
    const int n_prompt = again["usage"]["prompt_tokens"];
    REQUIRE(n_prompt > 17);
    CHECK(again["usage"]["prompt_tokens_details"]["cached_tokens"] == (n_prompt - 1) / 16 * 16);
    CHECK(s.metric("tinyllm_recurrent_checkpoints") > 0);
}

TEST_CASE("e2e: n choices run side by side, sharing the prompt's cached blocks: choice i is the reply to seed + i") {
    if (!tinyllm_built()) return;
    ParallelServer s;
    const std::string prompt = "Once upon a time, in a land far away, there lived a little girl named Lily who";
    auto post = [&](const json& body) {
        auto res = s.client->Post("/v1/completions", body.dump(), "application/json");
        REQUIRE(res);
        INFO(res->body);
        REQUIRE(res->status == 200);
        return json::parse(res->body);
    };
    std::vector<std::string> alone;
    for (int i = 0; i < 3; i++)
        alone.push_back(post({{"prompt", prompt}, {"max_tokens", 24}, {"temperature", 0.9}, {"seed", 40 + i}})["choices"][0]["text"]);
    const double hits_before = s.metric("tinyllm_prefix_cache_hit_tokens_total");
    json r = post({{"prompt", prompt}, {"max_tokens", 24}, {"temperature", 0.9}, {"seed", 40}, {"n", 3}});
    REQUIRE(r["choices"].size() == 3);
    for (int i = 0; i < 3; i++) {
        CHECK(r["choices"][i]["index"] == i);
        CHECK(r["choices"][i]["text"] == alone[size_t(i)]);
    }
    const int n_prompt = r["usage"]["prompt_tokens"];
    CHECK(r["usage"]["completion_tokens"] == 3 * 24);
    CHECK(s.metric("tinyllm_prefix_cache_hit_tokens_total") - hits_before >= 3.0 * ((n_prompt - 1) / 16 * 16));  // all three, cached from the solo runs or from choice 0

    // streamed: the same texts, by index, one [DONE], usage once and summed
    auto res = s.client->Post("/v1/completions",
                              json{{"prompt", prompt}, {"max_tokens", 24}, {"temperature", 0.9}, {"seed", 40}, {"n", 3}, {"stream", true},
                                   {"stream_options", {{"include_usage", true}}}}.dump(),
                              "application/json");
    REQUIRE(res);
    std::vector<std::string> streamed(3);
    int usage_chunks = 0;
    for (size_t pos = 0; (pos = res->body.find("data: {", pos)) != std::string::npos; pos++) {
        json c = json::parse(res->body.substr(pos + 6, res->body.find("\n\n", pos) - pos - 6));
        for (const json& ch : c["choices"]) streamed[ch["index"].get<size_t>()] += ch["text"].get<std::string>();
        if (c.contains("usage") && !c["usage"].is_null()) {
            usage_chunks++;
            CHECK(c["usage"]["completion_tokens"] == 3 * 24);
        }
    }
    for (int i = 0; i < 3; i++) CHECK(streamed[size_t(i)] == alone[size_t(i)]);
    CHECK(usage_chunks == 1);
    size_t dones = 0;
    for (size_t pos = 0; (pos = res->body.find("data: [DONE]", pos)) != std::string::npos; pos++) dones++;
    CHECK(dones == 1);
    CHECK(s.settles());
}
