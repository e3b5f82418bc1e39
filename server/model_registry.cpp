// The model registry (model_registry.h): entries with an explicit state, one mutex, one condition
// variable everyone waits on (a model loading, a slot freeing up), and a thread for idle unloads.
#include "server/model_registry.h"

#include <algorithm>
#include <cctype>
#include <filesystem>

namespace server {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

struct ModelRegistry::Entry {
    std::string name, path;
    std::optional<hub::ModelRef> pull;  // a Hub name not in the cache yet: pulled by the first load
    ModelState state = ModelState::UNLOADED;
    bool pinned = false;                // the attached session: never unloaded
    std::unique_ptr<llm::Session> owned;
    llm::Session* session = nullptr;
    ChatRenderer render_chat;
    int leases = 0;
    Clock::time_point last_used{};
    std::chrono::system_clock::time_point last_used_wall{};
    std::unique_ptr<RequestQueue> queue;
};

const char* state_name(ModelState state) {
    switch (state) {
    case ModelState::UNLOADED: return "unloaded";
    case ModelState::LOADING: return "loading";
    case ModelState::LOADED: return "loaded";
    }
    return "unknown";
}

namespace {

std::string lower(std::string s) {
    std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
    return s;
}

uint64_t size_of(const std::string& path) {
    std::error_code ec;
    uint64_t n = path.empty() ? 0 : fs::file_size(path, ec);
    return ec ? 0 : n;
}

// name -> path of the models in a folder: single files and the first part of split ones.
std::vector<std::pair<std::string, std::string>> folder_models(const std::string& dir) {
    std::vector<std::pair<std::string, std::string>> out;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(dir, ec)) {
        std::string file = e.path().filename().string();
        if (file.size() <= 5 || lower(file.substr(file.size() - 5)) != ".gguf" || !fs::is_regular_file(e.path(), ec)) continue;
        std::string name = file.substr(0, file.size() - 5);
        if (size_t at = name.find("-00001-of-"); at != std::string::npos) name = name.substr(0, at);
        else if (name.find("-of-") != std::string::npos && name.size() > 15) continue;  // a later part of a split
        out.emplace_back(name, e.path().string());
    }
    std::sort(out.begin(), out.end());
    return out;
}

}  // namespace

ModelRegistry::ModelRegistry(llm::Session& session, ChatRenderer render_chat, std::string name, int queue_size)
    : queue_size_(queue_size), multi_(false) {
    auto e = std::make_unique<Entry>();
    e->name = std::move(name);
    e->state = ModelState::LOADED;
    e->pinned = true;
    e->session = &session;
    e->render_chat = std::move(render_chat);
    e->queue = std::make_unique<RequestQueue>(queue_size, session.max_parallel());
    entries_.push_back(std::move(e));
}

ModelRegistry::ModelRegistry(const ModelsOptions& options, int queue_size)
    : options_(options), queue_size_(queue_size), multi_(true) {
    options_.models_max = std::max(options_.models_max, 1);
    std::lock_guard lock(mutex_);
    rescan();
    if (options_.idle_unload_s > 0) idle_thread_ = std::thread([this] { idle_loop(); });
}

ModelRegistry::~ModelRegistry() {
    {
        std::lock_guard lock(mutex_);
        stopping_ = true;
    }
    changed_.notify_all();
    if (idle_thread_.joinable()) idle_thread_.join();
}

void ModelRegistry::rescan() {
    auto known = [&](const std::string& name, const std::string& path) {
        for (auto& e : entries_)
            if (e->name == name || (!path.empty() && e->path == path)) return true;
        return false;
    };
    auto add_entry = [&](const std::string& name, const std::string& path) {
        if (known(name, path)) return;
        auto e = std::make_unique<Entry>();
        e->name = name;
        e->path = path;
        e->queue = std::make_unique<RequestQueue>(queue_size_);
        entries_.push_back(std::move(e));
    };
    if (!options_.builtin_path.empty()) add_entry(fs::path(options_.builtin_path).stem().string(), options_.builtin_path);
    if (!options_.models_dir.empty())
        for (const auto& [name, path] : folder_models(options_.models_dir)) add_entry(name, path);
    if (options_.hub_cache)
        for (const hub::CachedModel& m : hub::list_cached(options_.hub)) add_entry(m.name, m.path.string());
}

ModelRegistry::Entry* ModelRegistry::find(const std::string& name) {
    if (!multi_) return entries_.front().get();
    if (name.empty()) {  // the default: the most recently used model, else the first listed
        Entry* best = entries_.empty() ? nullptr : entries_.front().get();
        for (auto& e : entries_)
            if (e->last_used > best->last_used) best = e.get();
        return best;
    }
    for (int pass = 0; pass < 2; pass++) {
        for (auto& e : entries_)
            if (e->name == name) return e.get();
        for (auto& e : entries_)
            if (lower(e->name) == lower(name)) return e.get();
        // A Hub name the cache resolves (OWNER/REPO without the quant, another spelling of the quant).
        if (auto ref = hub::ModelRef::parse(name)) {
            if (auto cached = hub::find_cached(options_.hub, *ref)) {
                for (auto& e : entries_)
                    if (e->path == cached->path.string()) return e.get();
            }
            if (pass == 1 && options_.allow_pull && !options_.hub.offline) {
                auto e = std::make_unique<Entry>();
                e->name = name;
                e->pull = ref;
                e->queue = std::make_unique<RequestQueue>(queue_size_);
                entries_.push_back(std::move(e));
                return entries_.back().get();
            }
        }
        if (pass == 0) rescan();
    }
    // With only one model any name gets it (as llama-server answers): clients that send "gpt-4o" work.
    Entry* only = nullptr;
    for (auto& e : entries_) {
        if (e->pull && e->state == ModelState::UNLOADED) continue;  // a Hub name whose pull failed
        if (only) return nullptr;
        only = e.get();
    }
    return only;
}

void ModelRegistry::unload(Entry& entry) {
    entry.owned.reset();
    entry.session = nullptr;
    entry.render_chat = nullptr;
    entry.state = ModelState::UNLOADED;
}

void ModelRegistry::load(Entry& entry, std::unique_lock<std::mutex>& lock) {
    // Make room: unload the least recently used idle models until this one fits.
    auto resident = [&] {
        return std::count_if(entries_.begin(), entries_.end(), [](const auto& e) { return e->state != ModelState::UNLOADED; });
    };
    while (entry.state == ModelState::UNLOADED && resident() >= options_.models_max) {
        Entry* victim = nullptr;
        for (auto& e : entries_)
            if (e->state == ModelState::LOADED && e->leases == 0 && !e->pinned && (!victim || e->last_used < victim->last_used))
                victim = e.get();
        if (victim) {
            unload(*victim);
            continue;
        }
        changed_.wait(lock);  // every resident model is busy: wait for one to finish
    }
    if (entry.state != ModelState::UNLOADED) return;  // another request loaded it meanwhile
    entry.state = ModelState::LOADING;
    lock.unlock();  // loading takes a while: /v1/models and other models keep answering
    std::unique_ptr<llm::Session> session;
    ChatRenderer render;
    std::string error, path = entry.path;
    bool not_on_hub = false;  // the Hub has no such repo, file or quant: an unknown model, not a failure
    try {
        if (entry.pull) path = hub::pull(options_.hub, *entry.pull).path.string();
        llm::SessionOptions so = options_.session;
        so.model_path = path;
        session = llm::open_session(so);
        render = model_chat_renderer(*session, options_.chat_template);
    } catch (const hub::Error& e) {
        error = e.what();
        not_on_hub = error.find("no such") != std::string::npos || error.find(" has no ") != std::string::npos;
    } catch (const std::exception& e) {
        error = e.what();
    }
    lock.lock();
    if (!session) {
        entry.state = ModelState::UNLOADED;
        changed_.notify_all();
        if (not_on_hub) throw ApiError(404, "[server] no model named '" + entry.name + "': " + error, "model", "model_not_found");
        throw ApiError(500, "[server] model '" + entry.name + "' failed to load: " + error, "model", "model_load_failed");
    }
    entry.path = path;
    entry.pull.reset();
    entry.queue->set_running(session->max_parallel());
    entry.owned = std::move(session);
    entry.session = entry.owned.get();
    entry.render_chat = std::move(render);
    entry.state = ModelState::LOADED;
    changed_.notify_all();
}

std::shared_ptr<ModelRegistry::Lease> ModelRegistry::acquire(const std::string& name) {
    std::unique_lock lock(mutex_);
    Entry* entry = find(name);
    if (!entry) {
        std::string names;
        for (auto& e : entries_) names += (names.empty() ? "" : ", ") + e->name;
        throw ApiError(404, "[server] no model named '" + name + "'" + (names.empty() ? "" : "; this server has: " + names) +
                                (options_.allow_pull ? "" : " (Hub names are pulled on demand only with --allow-pull)"),
                       "model", "model_not_found");
    }
    entry->leases++;  // from here on nothing unloads it
    try {
        while (entry->state != ModelState::LOADED) {
            if (entry->state == ModelState::LOADING) changed_.wait(lock);
            else load(*entry, lock);
        }
    } catch (...) {
        entry->leases--;
        throw;
    }
    entry->last_used = Clock::now();
    entry->last_used_wall = std::chrono::system_clock::now();
    return std::make_shared<Lease>(*this, *entry);
}

void ModelRegistry::release(Entry& entry) {
    {
        std::lock_guard lock(mutex_);
        entry.leases--;
        entry.last_used = Clock::now();
        entry.last_used_wall = std::chrono::system_clock::now();
    }
    changed_.notify_all();
}

ModelRegistry::Lease::~Lease() { registry_.release(entry_); }
llm::Session& ModelRegistry::Lease::session() const { return *entry_.session; }
const ChatRenderer& ModelRegistry::Lease::render_chat() const { return entry_.render_chat; }
const std::string& ModelRegistry::Lease::name() const { return entry_.name; }
RequestQueue& ModelRegistry::Lease::queue() const { return *entry_.queue; }

std::vector<ModelRegistry::Listed> ModelRegistry::list() {
    std::lock_guard lock(mutex_);
    if (multi_) rescan();
    std::vector<Listed> out;
    for (auto& e : entries_) {
        if (e->pull && e->state == ModelState::UNLOADED) continue;  // a Hub name whose pull failed: not a model here
        Listed l{e->name, e->state, e->path, size_of(e->path), std::nullopt, e->last_used_wall};
        if (e->state == ModelState::LOADED) l.info = e->session->info();
        out.push_back(std::move(l));
    }
    if (multi_) std::sort(out.begin(), out.end(), [](const Listed& a, const Listed& b) { return a.name < b.name; });
    return out;
}

void ModelRegistry::add(const std::string& name, const std::string& path) {
    if (!multi_) return;
    std::lock_guard lock(mutex_);
    for (auto& e : entries_)
        if (e->name == name || e->path == path) {
            if (e->state == ModelState::UNLOADED) e->path = path, e->pull.reset();
            return;
        }
    auto e = std::make_unique<Entry>();
    e->name = name;
    e->path = path;
    e->queue = std::make_unique<RequestQueue>(queue_size_);
    entries_.push_back(std::move(e));
}

int ModelRegistry::waiting() const {
    std::lock_guard lock(mutex_);
    int n = 0;
    for (auto& e : entries_) n += e->queue->waiting();
    return n;
}

int ModelRegistry::running() const {
    std::lock_guard lock(mutex_);
    int n = 0;
    for (auto& e : entries_) n += e->queue->running();
    return n;
}

std::vector<std::pair<std::string, llm::ServingStats>> ModelRegistry::serving_stats() const {
    std::lock_guard lock(mutex_);
    std::vector<std::pair<std::string, llm::ServingStats>> out;
    for (auto& e : entries_)
        if (e->state == ModelState::LOADED && e->session) out.emplace_back(e->name, e->session->serving_stats());
    return out;
}

void ModelRegistry::idle_loop() {
    std::unique_lock lock(mutex_);
    while (!stopping_) {
        changed_.wait_for(lock, std::chrono::milliseconds(250));
        const auto idle = std::chrono::seconds(options_.idle_unload_s);
        for (auto& e : entries_)
            if (e->state == ModelState::LOADED && e->leases == 0 && !e->pinned && Clock::now() - e->last_used >= idle) unload(*e);
    }
}

}  // namespace server
