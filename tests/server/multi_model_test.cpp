// Several models in one server (ModelsOptions): the request's `model` picks one, loaded on first use,
// at most models_max resident (the least recently used unloaded), idle ones unloaded, Hub names pulled
// on demand from the fake Hub, POST /api/pull's NDJSON progress; answers checked against llama.cpp's
// golden greedy continuations of the two real models.
#include "common/test_data.h"
#include "hub/fake/fake_hub.h"
#include "server/server.h"

#include <catch2/catch.hpp>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <random>
#include <set>
#include <thread>

using nlohmann::json;
namespace fs = std::filesystem;

namespace {

const char* STORIES = "stories260K-f32";
const char* QUANT = "quant-q4_0";  // a llama of random weights: nothing like the stories text

json golden(const std::string& model) {
    std::ifstream f(test_data::shared("golden/llamacpp/" + model + ".json"));
    const json g = json::parse(f);
    return g["cases"][0];  // "Once upon a time", 32 greedy tokens
}

// A temporary folder (models, Hub cache), removed at the end.
struct TempDir {
    fs::path path = fs::temp_directory_path() / ("tinyllm-models-" + std::to_string(std::random_device{}()));
    TempDir() { fs::create_directories(path); }
    ~TempDir() { fs::remove_all(path); }
};

struct MultiServer {
    using client_type = httplib::Client;
    server::Server server;
    std::unique_ptr<httplib::Client> client;
    explicit MultiServer(const server::ModelsOptions& models) : server(options()) {
        server.serve_models(models);
        server.start();
        client = std::make_unique<httplib::Client>("127.0.0.1", server.port());
        client->set_read_timeout(120, 0);
    }
    static server::ServerOptions options() {
        server::ServerOptions o;
        o.port = 0;
        o.log_requests = false;
        return o;
    }
    httplib::Result post(const std::string& path, const json& body) { return client->Post(path.c_str(), body.dump(), "application/json"); }
    // model name -> state, from /v1/models
    std::map<std::string, std::string> states() {
        auto res = client->Get("/v1/models");
        REQUIRE(res);
        REQUIRE(res->status == 200);
        std::map<std::string, std::string> out;
        const json listing = json::parse(res->body);  // named: a temporary would die before the loop body
        for (const auto& m : listing["data"]) out[m["id"].get<std::string>()] = m["state"].get<std::string>();
        return out;
    }
    // A greedy completion of the golden prompt by `model`, checked against llama.cpp's continuation.
    void check_golden(const std::string& model, const std::string& golden_model) {
        const json g = golden(golden_model);
        auto res = post("/v1/completions", {{"model", model}, {"prompt", g["prompt"]}, {"temperature", 0}, {"max_tokens", g["n_gen"]}});
        REQUIRE(res);
        INFO(model << ": " << res->body);
        REQUIRE(res->status == 200);
        const json r = json::parse(res->body);
        CHECK(r["model"] == model);
        CHECK(r["usage"]["completion_tokens"] == g["n_gen"]);
        auto detok = post("/detokenize", {{"model", model}, {"tokens", g["generated_ids"]}});
        REQUIRE(detok);
        REQUIRE(detok->status == 200);
        CHECK(r["choices"][0]["text"] == json::parse(detok->body)["content"]);
    }
};

server::ModelsOptions models_in(const fs::path& dir, const fs::path& hub_cache) {
    server::ModelsOptions m;
    m.models_dir = dir.string();
    m.hub.cache_dir = hub_cache;
    m.hub.offline = true;
    m.models_max = 1;
    return m;
}

void link_models(const fs::path& dir) {
    fs::create_symlink(test_data::shared(std::string("models/") + STORIES + ".gguf"), dir / (std::string(STORIES) + ".gguf"));
    fs::create_symlink(test_data::shared(std::string("models/") + QUANT + ".gguf"), dir / (std::string(QUANT) + ".gguf"));
}

}  // namespace

TEST_CASE("models: two models by name in turn with models_max 1 both answer correctly, /v1/models shows the states") {
    REQUIRE_SHARED_DATA();
    TempDir dir, cache;
    link_models(dir.path);
    MultiServer s(models_in(dir.path, cache.path));
    CHECK(s.states() == std::map<std::string, std::string>{{STORIES, "unloaded"}, {QUANT, "unloaded"}});
    s.check_golden(STORIES, STORIES);
    CHECK(s.states() == std::map<std::string, std::string>{{STORIES, "loaded"}, {QUANT, "unloaded"}});
    s.check_golden(QUANT, QUANT);
    CHECK(s.states() == std::map<std::string, std::string>{{STORIES, "unloaded"}, {QUANT, "loaded"}});
    s.check_golden(STORIES, STORIES);
    CHECK(s.states() == std::map<std::string, std::string>{{STORIES, "loaded"}, {QUANT, "unloaded"}});
    CHECK(golden(STORIES)["generated_text"] != golden(QUANT)["generated_text"]);  // really two different models
}

TEST_CASE("models: an unknown name is 404 model_not_found, a model that fails to load fails that request only") {
    REQUIRE_SHARED_DATA();
    TempDir dir, cache;
    link_models(dir.path);
    std::ofstream(dir.path / "broken.gguf") << "not a gguf file at all";
    MultiServer s(models_in(dir.path, cache.path));
    auto res = s.post("/v1/chat/completions", {{"model", "no-such-model"}, {"messages", {{{"role", "user"}, {"content", "hi"}}}}});
    REQUIRE(res);
    CHECK(res->status == 404);
    CHECK(json::parse(res->body)["error"]["code"] == "model_not_found");
    res = s.post("/v1/completions", {{"model", "broken"}, {"prompt", "x"}, {"max_tokens", 1}});
    REQUIRE(res);
    CHECK(res->status == 500);
    CHECK(json::parse(res->body)["error"]["code"] == "model_load_failed");
    CHECK(s.states()["broken"] == "unloaded");
    s.check_golden(STORIES, STORIES);
}

TEST_CASE("models: an idle model is unloaded after idle_unload_s") {
    REQUIRE_SHARED_DATA();
    TempDir dir, cache;
    link_models(dir.path);
    auto options = models_in(dir.path, cache.path);
    options.idle_unload_s = 1;
    MultiServer s(options);
    s.check_golden(STORIES, STORIES);
    CHECK(s.states()[STORIES] == "loaded");
    std::this_thread::sleep_for(std::chrono::milliseconds(1600));
    CHECK(s.states()[STORIES] == "unloaded");
}

TEST_CASE("models: Hub names are pulled on demand with allow_pull, and POST /api/pull streams ollama's progress") {
    REQUIRE_SHARED_DATA();
    TempDir dir, cache;
    fake::FakeHub hub;
    hub.add_file("acme/tiny-GGUF", "tiny-Q4_0.gguf", test_data::read_text(test_data::shared(std::string("models/") + QUANT + ".gguf")));
    hub.add_file("acme/stories-GGUF", "stories260K-F32.gguf", test_data::read_text(test_data::shared(std::string("models/") + STORIES + ".gguf")));
    server::ModelsOptions options = models_in(dir.path, cache.path);
    options.hub.offline = false;
    options.hub.endpoint = hub.endpoint();
    {
        MultiServer closed(options);  // without allow_pull a Hub name not in the cache is unknown
        auto res = closed.post("/v1/completions", {{"model", "acme/tiny-GGUF:Q4_0"}, {"prompt", "x"}, {"max_tokens", 1}});
        REQUIRE(res);
        CHECK(res->status == 404);
        CHECK(hub.bytes_served("acme/tiny-GGUF", "tiny-Q4_0.gguf") == 0);
    }
    options.allow_pull = true;
    MultiServer s(options);
    hub.slow_down("acme/tiny-GGUF", "tiny-Q4_0.gguf", 25);  // the pull takes a moment: /v1/models says "loading"
    std::thread first([&] { s.check_golden("acme/tiny-GGUF:Q4_0", QUANT); });  // the test thread asserts nothing meanwhile
    std::string seen;
    for (int i = 0; i < 500 && seen != "loading"; i++) {
        MultiServer::client_type watcher("127.0.0.1", s.server.port());
        auto res = watcher.Get("/v1/models");
        if (res && res->status == 200) {
            const json listing = json::parse(res->body);
            for (const auto& m : listing["data"])
                if (m["id"] == "acme/tiny-GGUF:Q4_0") seen = m["state"];
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    first.join();
    CHECK(seen == "loading");
    CHECK(s.states()["acme/tiny-GGUF:Q4_0"] == "loaded");

    auto res = s.post("/api/pull", {{"model", "acme/stories-GGUF:f32"}});
    REQUIRE(res);
    REQUIRE(res->status == 200);
    std::vector<json> lines;
    for (size_t pos = 0, end; (end = res->body.find('\n', pos)) != std::string::npos; pos = end + 1)
        lines.push_back(json::parse(res->body.substr(pos, end - pos)));
    REQUIRE(lines.size() >= 4);
    CHECK(lines.front()["status"] == "pulling manifest");
    const std::string digest = "sha256:" + fake::sha256_hex(test_data::read_text(test_data::shared(std::string("models/") + STORIES + ".gguf")));
    CHECK(lines[1]["digest"] == digest);
    CHECK(lines[lines.size() - 3]["completed"] == lines[lines.size() - 3]["total"]);
    CHECK(lines[lines.size() - 2]["status"] == "verifying sha256 digest");
    CHECK(lines.back()["status"] == "success");
    CHECK(s.states()["acme/stories-GGUF:f32"] == "unloaded");  // listed, loaded on first use
    s.check_golden("acme/stories-GGUF:f32", STORIES);

    res = s.post("/v1/completions", {{"model", "acme/nothing:Q8_0"}, {"prompt", "x"}, {"max_tokens", 1}});
    REQUIRE(res);
    CHECK(res->status == 404);  // the Hub has no such repo: an unknown model, and not listed afterwards
    CHECK(json::parse(res->body)["error"]["code"] == "model_not_found");
    CHECK(s.states().count("acme/nothing:Q8_0") == 0);
    res = s.post("/api/pull", {{"model", "acme/nothing"}, {"stream", false}});
    REQUIRE(res);
    CHECK(res->status == 404);
}

TEST_CASE("models: every API picks its model by name, an unknown one is a 404 in that API's error shape") {
    REQUIRE_SHARED_DATA();
    TempDir dir, cache;
    link_models(dir.path);
    MultiServer s(models_in(dir.path, cache.path));
    const json messages = {{{"role", "user"}, {"content", "Once upon a time"}}};
    struct Route {
        const char* path;
        json body;
    };
    const std::vector<Route> routes = {
        {"/v1/chat/completions", {{"messages", messages}, {"max_tokens", 2}}},
        {"/v1/completions", {{"prompt", "Once"}, {"max_tokens", 2}}},
        {"/v1/messages", {{"messages", messages}, {"max_tokens", 2}}},
        {"/v1/messages/count_tokens", {{"messages", messages}}},
        {"/v1/responses", {{"input", "Once upon a time"}, {"max_output_tokens", 2}}},
        {"/api/chat", {{"messages", messages}, {"stream", false}, {"options", {{"num_predict", 2}}}}},
        {"/api/generate", {{"prompt", "Once"}, {"stream", false}, {"options", {{"num_predict", 2}}}}},
        {"/api/show", json::object()},
        {"/tokenize", {{"content", "Once"}}},
    };
    for (const Route& r : routes) {
        INFO(r.path);
        json body = r.body;
        body["model"] = "no-such-model";
        auto res = s.post(r.path, body);
        REQUIRE(res);
        CHECK(res->status == 404);
        const json err = json::parse(res->body);
        const std::string path = r.path;
        if (path.rfind("/v1/messages", 0) == 0) {
            CHECK(err["type"] == "error");
            CHECK(err["error"]["type"] == "not_found_error");
        } else if (path.rfind("/api/", 0) == 0) {
            CHECK(err["error"].get<std::string>().find("no-such-model") != std::string::npos);
        } else {
            CHECK(err["error"]["code"] == "model_not_found");
        }
        body["model"] = QUANT;  // the same request with a name the server has is answered by that model
        res = s.post(r.path, body);
        REQUIRE(res);
        CHECK(res->status == 200);
        if (path != "/tokenize" && path != "/v1/messages/count_tokens" && path != "/api/show") CHECK(res->body.find(QUANT) != std::string::npos);
    }
    // Embeddings: stories260K declares no pooling (a 400), but the name is checked first (a 404).
    for (const char* path : {"/v1/embeddings", "/api/embed"}) {
        auto res = s.post(path, {{"model", "no-such-model"}, {"input", "x"}});
        REQUIRE(res);
        CHECK(res->status == 404);
    }
    // ollama's listings come from the same registry: tags has both, ps the loaded one.
    auto tags = json::parse(s.client->Get("/api/tags")->body)["models"];
    auto ps = json::parse(s.client->Get("/api/ps")->body)["models"];
    std::set<std::string> tag_names;
    for (const auto& m : tags) tag_names.insert(m["name"].get<std::string>());
    CHECK(tag_names == std::set<std::string>{STORIES, QUANT});
    REQUIRE(ps.size() == 1);
    CHECK(ps[0]["name"] == QUANT);
    CHECK(ps[0]["context_length"].get<int>() > 0);
}

TEST_CASE("models: with exactly one model every name gets it, as llama-server answers") {
    REQUIRE_SHARED_DATA();
    TempDir dir, cache;
    fs::create_symlink(test_data::shared(std::string("models/") + STORIES + ".gguf"), dir.path / (std::string(STORIES) + ".gguf"));
    MultiServer s(models_in(dir.path, cache.path));
    auto res = s.post("/v1/chat/completions", {{"model", "gpt-4o"}, {"messages", {{{"role", "user"}, {"content", "hi"}}}}, {"max_tokens", 2}});
    REQUIRE(res);
    CHECK(res->status == 200);
    CHECK(json::parse(res->body)["model"] == "gpt-4o");  // echoed as the client sent it, as before
    CHECK(s.states() == std::map<std::string, std::string>{{STORIES, "loaded"}});
}
