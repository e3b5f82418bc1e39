// tinyllm: the command-line entry point. Dispatches to one subcommand; every error ends up here as a
// message on stderr and a non-zero exit code.
#include "cli/cli.h"

#include <cstdio>
#include <cstring>
#include <exception>
#include <filesystem>
#include <stdexcept>
#include <unistd.h>

namespace cli {

namespace {

struct Entry {
    const char* name;
    Command fn;
    const char* summary;
};

const Entry COMMANDS[] = {
    {"info", cmd_info, "describe a GGUF model: architecture, sizes, types, tokenizer"},
    {"run", cmd_run, "generate a raw completion of a prompt"},
    {"bench", cmd_bench, "measure prefill and decode speed (llama-bench's pp/tg)"},
    {"tokenize", cmd_tokenize, "show the token ids and pieces of a text under a model's tokenizer"},
    {"serve", cmd_serve, "OpenAI-compatible HTTP server with a web chat at /"},
    {"chat", cmd_chat, "chat in the terminal"},
    {"template", cmd_template, "render a chat template for a context (prints the prompt exactly)"},
    {"pull", cmd_pull, "download a model from the Hugging Face Hub (OWNER/REPO[:QUANT])"},
    {"list", cmd_list, "list the models in the Hugging Face Hub cache"},
    {"rm", cmd_rm, "remove a model from the Hugging Face Hub cache"},
};

void print_help() {
    std::printf("tinyllm — a local LLM inference server\n\nusage: tinyllm <command> [options]\n\ncommands:\n");
    for (const Entry& e : COMMANDS) std::printf("  %-10s %s\n", e.name, e.summary);
    std::printf("\nRun `tinyllm <command> --help` for a command's options.\n"
                "The default model of every command is the built-in stories260K; -m also takes OWNER/REPO[:QUANT].\n");
}

}  // namespace

std::string builtin_model_path() {
    // Next to the executable first (installed layouts), then the source tree it was built from.
    char buf[4096];
    ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
    if (n > 0) {
        buf[n] = 0;
        auto p = std::filesystem::path(buf).parent_path() / "models" / "stories260K.gguf";
        if (std::filesystem::exists(p)) return p.string();
    }
    return TINYLLM_BUILTIN_MODEL;
}

bool Args::flag(const std::string& name) {
    for (size_t i = 0; i < args_.size(); i++)
        if (!used_[i] && args_[i] == name) return used_[i] = true;
    return false;
}

bool Args::value(const std::string& name, std::string& out) {
    for (size_t i = 0; i < args_.size(); i++) {
        if (used_[i]) continue;
        if (args_[i] == name) {
            if (i + 1 >= args_.size()) usage_error(name + " needs a value");
            used_[i] = used_[i + 1] = true;
            out = args_[i + 1];
            return true;
        }
        if (args_[i].rfind(name + "=", 0) == 0) {
            used_[i] = true;
            out = args_[i].substr(name.size() + 1);
            return true;
        }
    }
    return false;
}

bool Args::number(const std::string& name, long long& out) {
    std::string v;
    if (!value(name, v)) return false;
    size_t used = 0;
    try {
        out = std::stoll(v, &used);
    } catch (const std::exception&) {
        used = 0;
    }
    if (used == 0 || used != v.size()) usage_error(name + " needs an integer, got '" + v + "'");
    return true;
}

bool Args::number(const std::string& name, double& out) {
    std::string v;
    if (!value(name, v)) return false;
    size_t used = 0;
    try {
        out = std::stod(v, &used);
    } catch (const std::exception&) {
        used = 0;
    }
    if (used == 0 || used != v.size()) usage_error(name + " needs a number, got '" + v + "'");
    return true;
}

std::vector<std::string> Args::positionals() {
    std::vector<std::string> out;
    for (size_t i = 0; i < args_.size(); i++) {
        if (used_[i]) continue;
        if (args_[i].size() > 1 && args_[i][0] == '-') usage_error("unknown option " + args_[i]);
        out.push_back(args_[i]);
    }
    return out;
}

void Args::usage_error(const std::string& msg) const {
    throw std::invalid_argument("tinyllm " + command_ + ": " + msg + " (see tinyllm " + command_ + " --help)");
}

}  // namespace cli

int main(int argc, char** argv) {
    if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h") || !std::strcmp(argv[1], "help")) {
        cli::print_help();
        return argc < 2 ? 1 : 0;
    }
    std::vector<std::string> args(argv + 2, argv + argc);
    for (const cli::Entry& e : cli::COMMANDS) {
        if (std::strcmp(e.name, argv[1]) != 0) continue;
        try {
            return e.fn(args);
        } catch (const std::exception& ex) {
            std::fprintf(stderr, "error: %s\n", ex.what());
            return 1;
        }
    }
    std::fprintf(stderr, "tinyllm: unknown command '%s'\n\n", argv[1]);
    cli::print_help();
    return 1;
}
