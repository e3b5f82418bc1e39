// The server's models by name: either the one session `tinyllm serve -m M` attached, or every model of
// a models folder and the Hub cache, loaded on first use, at most `models_max` resident (least recently
// used unloaded first, never one in use), idle ones unloaded after a while, Hub names pulled on demand.
#pragma once

#include "server/server_impl.h"

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace server {

enum class ModelState { UNLOADED, LOADING, LOADED };
const char* state_name(ModelState state);  // "unloaded", "loading", "loaded"

class ModelRegistry {
    struct Entry;

public:
    // One attached session, always resident, answering to any model name (the single-model server).
    ModelRegistry(llm::Session& session, ChatRenderer render_chat, std::string name, int queue_size);
    // The models of `options` (a models folder, the Hub cache), none loaded yet.
    ModelRegistry(const ModelsOptions& options, int queue_size);
    ~ModelRegistry();
    ModelRegistry(const ModelRegistry&) = delete;
    ModelRegistry& operator=(const ModelRegistry&) = delete;

    // A model in use: resident (never unloaded) while the lease lives. Generation takes a turn on its
    // queue: one session runs one request at a time.
    class Lease {
    public:
        Lease(ModelRegistry& registry, Entry& entry) : registry_(registry), entry_(entry) {}
        ~Lease();
        Lease(const Lease&) = delete;
        Lease& operator=(const Lease&) = delete;
        llm::Session& session() const;
        const ChatRenderer& render_chat() const;
        const std::string& name() const;
        RequestQueue& queue() const;

    private:
        ModelRegistry& registry_;
        Entry& entry_;
    };

    // The model a request names ("" = the default: the single model, else the most recently used),
    // loaded (or pulled) first if need be. Throws ApiError: 404 model_not_found for an unknown name,
    // 500 model_load_failed when it does not load (for this request only; the next one tries again).
    std::shared_ptr<Lease> acquire(const std::string& name);

    struct Listed {
        std::string name;
        ModelState state = ModelState::UNLOADED;
        std::string path;             // "" until a Hub name is pulled
        uint64_t size = 0;            // bytes on disk (every part)
        std::optional<llm::ModelInfo> info;  // while loaded
        std::chrono::system_clock::time_point last_used;
    };
    std::vector<Listed> list();       // every model, in name order (the single model alone)
    void add(const std::string& name, const std::string& path);  // e.g. after POST /api/pull
    bool multi() const { return multi_; }
    int waiting() const;              // requests queued behind running ones, all models
    int running() const;              // requests on a model now, all models
    std::vector<std::pair<std::string, llm::ServingStats>> serving_stats() const;  // each loaded model's, by name

private:
    friend class Lease;
    Entry* find(const std::string& name);  // under mutex_; rescans the folder and cache on a miss
    void rescan();                          // under mutex_
    void load(Entry& entry, std::unique_lock<std::mutex>& lock);
    void unload(Entry& entry);              // under mutex_
    void release(Entry& entry);
    void idle_loop();

    ModelsOptions options_;
    int queue_size_;
    bool multi_;
    mutable std::mutex mutex_;
    std::condition_variable changed_;
    std::vector<std::unique_ptr<Entry>> entries_;
    bool stopping_ = false;
    std::thread idle_thread_;
};

}  // namespace server
