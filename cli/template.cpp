// tinyllm template [--model M | --template FILE.jinja] --context FILE.json [--now DATE] [--bench N]:
// renders a chat template exactly as generation would see it and prints the prompt unchanged (no
// newline added); --bench also times N renders.
#include "cli/cli.h"
#include "gguf/gguf.h"
#include "llm/chat_template.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>
#include <stdexcept>
#include <time.h>

namespace cli {

namespace {

const char* const USAGE =
    "usage: tinyllm template [--model MODEL.gguf | --template FILE.jinja] --context FILE.json [--now DATE] [--bench N]\n"
    "\n"
    "Renders a chat template and prints the prompt exactly (no newline added).\n"
    "  --model M         the model's tokenizer.chat_template (or its preset's fallback template);\n"
    "                    the built-in model when neither --model nor --template is given;\n"
    "                    bos_token/eos_token default to the model's tokens when the context lacks them\n"
    "  --template FILE   a Jinja template file\n"
    "  --context FILE    a JSON object: messages, tools, add_generation_prompt, bos_token, eos_token,\n"
    "                    extra variables (enable_thinking, ...); '-' reads standard input\n"
    "  --now DATE        pin strftime_now's clock: YYYY-MM-DD or YYYY-MM-DDTHH:MM:SS (local time)\n"
    "  --bench N         render N more times and report the median time on stderr\n";

std::string read_all(const std::string& path) {
    if (path == "-") {
        std::stringstream ss;
        ss << std::cin.rdbuf();
        return ss.str();
    }
    std::ifstream f(path, std::ios::binary);
    if (!f) throw std::runtime_error("cannot open " + path);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
}

std::tm parse_now(const std::string& s) {
    std::tm tm{};
    int y = 0, mo = 0, d = 0, h = 0, mi = 0, sec = 0;
    int n = std::sscanf(s.c_str(), "%d-%d-%dT%d:%d:%d", &y, &mo, &d, &h, &mi, &sec);
    if (n != 3 && n != 6) throw std::invalid_argument("tinyllm template: --now expects YYYY-MM-DD[THH:MM:SS], got '" + s + "'");
    tm.tm_year = y - 1900;
    tm.tm_mon = mo - 1;
    tm.tm_mday = d;
    tm.tm_hour = h;
    tm.tm_min = mi;
    tm.tm_sec = sec;
    tm.tm_isdst = -1;
    std::tm normalized = tm;
    if (timegm(&normalized) == -1) throw std::invalid_argument("tinyllm template: invalid date '" + s + "'");
    tm.tm_wday = normalized.tm_wday;  // timegm fills in the weekday and day of the year
    tm.tm_yday = normalized.tm_yday;
    return tm;
}

// The model's chat template (or the fallback for its preset), and its BOS/EOS token strings.
std::string model_template(const std::string& path, nlohmann::ordered_json& context, std::string& name) {
    auto f = gguf::File::open(path);
    name = path;
    auto token = [&](const char* key) -> const std::string* {
        if (!f->has(key) || !f->has("tokenizer.ggml.tokens")) return nullptr;
        auto id = f->get<uint32_t>(key);
        const auto& tokens = f->find("tokenizer.ggml.tokens")->array();
        if (id >= tokens.size()) return nullptr;
        return std::get_if<std::string>(&tokens[id].v);
    };
    if (!context.contains("bos_token"))
        if (const std::string* bos = token("tokenizer.ggml.bos_token_id")) context["bos_token"] = *bos;
    if (!context.contains("eos_token"))
        if (const std::string* eos = token("tokenizer.ggml.eos_token_id")) context["eos_token"] = *eos;
    if (f->has("tokenizer.chat_template")) return f->get<std::string>("tokenizer.chat_template");
    name += " (fallback template)";
    return llm::ChatTemplate::fallback_source(f->get_or<std::string>("tokenizer.ggml.pre", ""), f->architecture());
}

// Times `n` renders; the per-message figure is what a long conversation costs. CPU time of this
// thread is reported besides wall time: on a shared machine it is the stable figure.
void report_bench(const llm::ChatTemplate& tmpl, const nlohmann::ordered_json& context, int n) {
    auto cpu_us = [] {
        timespec ts{};
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
        return static_cast<double>(ts.tv_sec) * 1e6 + static_cast<double>(ts.tv_nsec) / 1e3;
    };
    std::vector<double> wall, cpu;
    size_t bytes = 0;
    for (int i = 0; i < n; i++) {
        auto t0 = std::chrono::steady_clock::now();
        double c0 = cpu_us();
        bytes = tmpl.render(context).size();
        cpu.push_back(cpu_us() - c0);
        wall.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
    }
    std::sort(wall.begin(), wall.end());
    std::sort(cpu.begin(), cpu.end());
    size_t n_messages = context.contains("messages") && context["messages"].is_array() ? context["messages"].size() : 0;
    double per_message = n_messages ? cpu[cpu.size() / 2] / static_cast<double>(n_messages) : 0.0;
    std::fprintf(stderr,
                 "bench: %d renders of %zu messages (%zu bytes): median CPU %.1f us (%.2f us per message), "
                 "median wall %.1f us\n",
                 n, n_messages, bytes, cpu[cpu.size() / 2], per_message, wall[wall.size() / 2]);
}

}  // namespace

int cmd_template(const std::vector<std::string>& argv) {
    Args args(argv, "template");
    if (args.flag("--help") || args.flag("-h")) {
        std::printf("%s", USAGE);
        return 0;
    }
    std::string model, template_path, context_path, now;
    bool has_model = args.value("--model", "-m", model);
    bool has_template = args.value("--template", template_path);
    bool has_context = args.value("--context", context_path);
    bool has_now = args.value("--now", now);
    std::string bench;
    int n_bench = 0;
    if (args.value("--bench", bench)) {
        char* end = nullptr;
        long n = std::strtol(bench.c_str(), &end, 10);
        if (bench.empty() || *end || n < 1 || n > 1000000) args.usage_error("--bench expects a count from 1 to 1000000");
        n_bench = static_cast<int>(n);
    }
    if (!args.positionals().empty()) args.usage_error("unexpected argument");
    if (has_model && has_template) args.usage_error("give one of --model and --template, not both");
    if (!has_model && !has_template) {  // like every command: the built-in model by default
        model = builtin_model_path();
        has_model = true;
    }
    if (!has_context) args.usage_error("--context is required");

    std::string context_text = read_all(context_path);
    auto context = nlohmann::ordered_json::parse(context_text, nullptr, false);
    if (context.is_discarded() || !context.is_object())
        throw std::runtime_error("tinyllm template: " + context_path + " is not a JSON object");

    std::string name = template_path, source;
    if (has_model) source = model_template(resolve_model(model), context, name);
    else source = read_all(template_path);

    llm::ChatTemplate tmpl(source, name);
    if (has_now) {
        std::tm pinned = parse_now(now);
        tmpl.set_clock([pinned] { return pinned; });
    }
    std::string prompt = tmpl.render(context);
    std::fwrite(prompt.data(), 1, prompt.size(), stdout);
    if (n_bench > 0) report_bench(tmpl, context, n_bench);
    return 0;
}

}  // namespace cli
