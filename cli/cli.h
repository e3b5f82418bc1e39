// The `tinyllm` subcommands: one function per command, one file per command, one table in main.cpp.
#pragma once

#include "llm/session.h"

#include <string>
#include <type_traits>
#include <vector>

namespace cli {

// Each command gets its arguments after the command name and returns the process exit code.
using Command = int (*)(const std::vector<std::string>& args);

// The built-in model (stories260K), the default of every subcommand.
std::string builtin_model_path();
// The file a -m value means: a path as given, or a Hub name (OWNER/REPO[:QUANT]) from the cache,
// pulled first when it is not there yet (hub.cpp).
std::string resolve_model(const std::string& spec);

// Minimal argument reader shared by the commands: flags, flag values and positionals in order.
class Args {
public:
    Args(const std::vector<std::string>& args, std::string command) : args_(args), command_(std::move(command)) {}
    bool flag(const std::string& name);                                 // --x present? (consumed)
    bool value(const std::string& name, std::string& out);              // --x V or --x=V (consumed)
    bool value(const std::string& a, const std::string& b, std::string& out) { return value(a, out) || value(b, out); }
    bool number(const std::string& name, long long& out);              // integer value, checked
    bool number(const std::string& name, double& out);                 // numeric value, checked
    template <class T> bool number(const std::string& name, T& out) {
        if constexpr (std::is_integral_v<T>) {
            long long v;
            if (!number(name, v)) return false;
            out = static_cast<T>(v);
        } else {
            double v;
            if (!number(name, v)) return false;
            out = static_cast<T>(v);
        }
        return true;
    }
    std::vector<std::string> positionals();                             // whatever is left; errors on --unknown
    [[noreturn]] void usage_error(const std::string& msg) const;

private:
    std::vector<std::string> args_;
    std::vector<bool> used_ = std::vector<bool>(args_.size(), false);
    std::string command_;
};

// The flags several commands share (flags.cpp). Numbers go through Args::number (a bad one is a usage
// error naming the flag). sampling_flags: --temp, --top-k, --top-p, --min-p, --seed over `sampling`
// (start from llm::default_sampling()). device_flag: --device NAME, else $TINYLLM_DEVICE, else CPU, as
// the backend name SessionOptions::device takes; accepts_device: whether it takes `name` (every name
// `info --devices` shows without parentheses).
void sampling_flags(Args& args, llm::SamplingParams& sampling);
std::string device_flag(Args& args);
bool accepts_device(const std::string& name);
// --kv TYPE: the KV cache type (default f16); KV_TYPES the ones to name in a usage line. A known GGUF type
// name is taken here; open_session refuses one the model or the device cannot use.
inline constexpr const char* KV_TYPES = "f16, f32, q8_0 or q4_0";
gguf::Type kv_flag(Args& args);
// --grammar FILE / --json-schema FILE as a grammar (unconstrained when neither is given); throws
// llm::GrammarError for a bad grammar or schema. --chat-template FILE's text ("" when not given).
llm::GrammarSpec grammar_flags(Args& args);
std::string chat_template_flag(Args& args);

int cmd_info(const std::vector<std::string>& args);
int cmd_run(const std::vector<std::string>& args);
int cmd_bench(const std::vector<std::string>& args);
int cmd_tokenize(const std::vector<std::string>& args);
int cmd_serve(const std::vector<std::string>& args);
int cmd_chat(const std::vector<std::string>& args);
int cmd_template(const std::vector<std::string>& args);
int cmd_pull(const std::vector<std::string>& args);
int cmd_list(const std::vector<std::string>& args);
int cmd_rm(const std::vector<std::string>& args);

}  // namespace cli
