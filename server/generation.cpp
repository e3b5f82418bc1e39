// Running one request on the session: generated ids flow through the reply stream (UTF-8, stop
// strings, reasoning/tool-call routing) to the caller's sink; a client that went away stops it.
#include "server/server_impl.h"

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

namespace server {

Outcome generate_reply(llm::Session& session, const Job& job, const std::function<bool(Delta&&)>& on_delta,
                       const std::function<bool()>& client_gone, const std::function<bool()>& interrupted,
                       const std::function<void(const Progress&)>& on_prefill) {
    const tok::Tokenizer& tokenizer = session.tokenizer();
    llm::ReplyStream reply(tokenizer, job.stop, job.router, job.prompt);
    Outcome outcome;
    Delta pending;  // logprobs of tokens whose text is still held back ride with the next text
    size_t n_tool_calls = 0;

    auto send = [&](llm::RoutedText&& text) {
        pending.text.append(std::move(text));
        if (pending.text.empty()) return true;  // keep logprobs until their text (or the end) comes
        n_tool_calls += pending.text.tool_calls.size();
        bool ok = on_delta(std::move(pending));
        pending = Delta{};
        return ok;
    };

    llm::GenerateOptions options = job.generate;
    options.stop_at_end = true;
    options.logprobs = options.logprobs || job.logprobs;
    options.abandoned = client_gone;  // a parallel session frees a gone client's place while it waits
    const auto t_start = std::chrono::steady_clock::now();
    auto t_last = t_start;
    options.on_token = [&](const llm::TokenStep& step) {
        const auto now = std::chrono::steady_clock::now();
        const double ms = std::chrono::duration<double, std::milli>(now - t_last).count();
        if (t_last == t_start) outcome.ttft_ms = ms;
        else outcome.token_gaps_ms.push_back(float(ms));
        t_last = now;
        if (job.logprobs && !tokenizer.is_end(step.id)) {
            TokenLogprob entry{tokenizer.decode({step.id}), step.logprob, {}};
            for (auto [id, lp] : step.top_logprobs) entry.top.push_back({tokenizer.decode({id}), lp});
            pending.logprobs.push_back(std::move(entry));
        }
        if (!send(reply.push(step.id)) || client_gone()) {
            outcome.client_gone = true;
            return false;
        }
        if (interrupted && interrupted()) {
            outcome.interrupted = true;
            return false;
        }
        return !reply.stopped();
    };
    // Outside the `if`: options.on_prefill refers to them while session.generate runs, after the block.
    bool first = true;
    int n_cache = 0;
    if (on_prefill) {
        const auto t0 = std::chrono::steady_clock::now();
        options.on_prefill = [&, t0](int n_done, int n_total) {
            if (first) n_cache = n_done;  // the first call comes before any work: what the cache held
            first = false;
            on_prefill({n_total, n_cache, n_done, std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count()});
        };
    }
    outcome.result = session.generate(job.prompt, options);
    if (outcome.result.finish == llm::FinishReason::CANCELLED && client_gone()) outcome.client_gone = true;

    if (!outcome.client_gone) {
        pending.text.append(reply.finish());
        n_tool_calls += pending.text.tool_calls.size();
        if (!pending.empty() && !on_delta(std::move(pending))) outcome.client_gone = true;
    }
    // A stop string ends the reply like an end-of-generation token does; a reply that called tools
    // says so, unless it was cut short.
    const bool cut = outcome.result.finish == llm::FinishReason::LENGTH || (outcome.interrupted && !reply.stopped());
    outcome.stop_string = reply.stop_string();
    outcome.finish_reason = outcome.client_gone ? "" : cut ? "length" : n_tool_calls > 0 ? "tool_calls" : "stop";
    return outcome;
}

std::vector<Job> choice_jobs(const Job& job) {
    std::vector<Job> jobs(size_t(job.n_choices), job);
    for (int i = 0; i < job.n_choices; i++) {
        jobs[size_t(i)].choice_index = i;
        jobs[size_t(i)].generate.sampling.seed += uint64_t(i);  // the same seed would draw the same reply
    }
    return jobs;
}

std::vector<Outcome> generate_choices(llm::Session& session, const std::vector<Job>& choices,
                                      const std::function<bool(int, Delta&&)>& on_delta, const std::function<bool()>& client_gone,
                                      const std::function<bool()>& interrupted) {
    const int n = int(choices.size());
    std::vector<Outcome> out(static_cast<size_t>(n));
    auto run = [&](int i, const std::function<void(const Progress&)>& on_prefill) {
        out[size_t(i)] = generate_reply(session, choices[size_t(i)], [&, i](Delta&& d) { return on_delta(i, std::move(d)); }, client_gone,
                                        interrupted, on_prefill);
    };
    if (session.max_parallel() <= 1) {
        for (int i = 0; i < n; i++) run(i, {});
        return out;
    }
    std::mutex mutex;
    std::condition_variable prefilled_cv;
    bool prefilled = false;
    auto signal = [&] {
        std::lock_guard lock(mutex);
        prefilled = true;
        prefilled_cv.notify_all();
    };
    std::vector<std::exception_ptr> errors(static_cast<size_t>(n));
    std::vector<std::thread> threads;
    threads.emplace_back([&] {
        try {
            run(0, [&](const Progress& p) {
                if (p.n_processed == p.n_total) signal();
            });
        } catch (...) {
            errors[0] = std::current_exception();
        }
        signal();
    });
    {
        std::unique_lock lock(mutex);
        prefilled_cv.wait(lock, [&] { return prefilled; });
    }
    for (int i = 1; i < n; i++)
        threads.emplace_back([&, i] {
            try {
                run(i, {});
            } catch (...) {
                errors[size_t(i)] = std::current_exception();
            }
        });
    for (std::thread& t : threads) t.join();
    for (const std::exception_ptr& e : errors)
        if (e) std::rethrow_exception(e);
    return out;
}

}  // namespace server
