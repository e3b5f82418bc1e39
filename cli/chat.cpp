// tinyllm chat: the interactive terminal chat (also scriptable: one message per line of stdin).
#include "cli/cli.h"
#include "server/server.h"

#include <atomic>
#include <csignal>
#include <random>
#include <cstdio>
#include <unistd.h>

namespace cli {

namespace {

constexpr const char* USAGE = R"(usage: tinyllm chat [--model M] [--system TEXT] [--temp T] [--top-k K] [--top-p P] [--min-p P]
                    [--seed S] [-n N] [--max-context N] [--device NAME] [--kv f16|f32|q8_0|q4_0]
  Type a message and press Enter. /reset clears the conversation, /system TEXT sets the system
  prompt, /exit (or Ctrl-D) quits, Ctrl-C stops the answer being written.
  --model M        GGUF model or Hub name OWNER/REPO[:QUANT] (default: the built-in stories260K)
  --temp T         sampling temperature (default 0.8; 0 = greedy)
  --top-k K, --top-p P, --min-p P   sampling filters (defaults 40, 0.95, 0.05)
  --seed S         sampling seed (default: a random one)
  -n N             most tokens per answer (default 1024)
  --max-context N  context size (default: the model's, at most 4096)
  --device NAME    CPU, or AMD / AMD:0 (the first AMD GPU) (default: $TINYLLM_DEVICE, else CPU)
  --kv TYPE        KV cache type: f16 (default), f32, q8_0 or q4_0 (CPU only; not MLA models)
  --grammar FILE, --json-schema FILE   constrain every answer to a GBNF grammar / a JSON Schema
  --chat-template FILE                 use this Jinja chat template instead of the model's
)";

std::atomic<bool> g_cancel{false};

}  // namespace

int cmd_chat(const std::vector<std::string>& argv) {
    Args args(argv, "chat");
    if (args.flag("--help") || args.flag("-h")) {
        std::fputs(USAGE, stdout);
        return 0;
    }
    llm::SessionOptions session_options;
    server::ChatOptions options;
    options.sampling = llm::default_sampling();
    options.sampling.seed = std::random_device{}();
    if (!args.value("--model", "-m", session_options.model_path)) session_options.model_path = builtin_model_path();
    else session_options.model_path = resolve_model(session_options.model_path);
    args.value("--system", options.system_prompt);
    sampling_flags(args, options.sampling);
    args.number("-n", options.max_tokens);
    args.number("--max-tokens", options.max_tokens);
    args.number("--max-context", session_options.n_ctx);
    session_options.device = device_flag(args);
    session_options.kv_type = kv_flag(args);
    options.grammar = grammar_flags(args);
    const std::string chat_template = chat_template_flag(args);
    if (!args.positionals().empty()) args.usage_error("takes no positional arguments");

    auto session = llm::open_session(session_options);
    const bool interactive = isatty(STDIN_FILENO);
    options.show_prompt = interactive;
    options.dim_reasoning = isatty(STDOUT_FILENO);
    if (interactive)
        std::printf("tinyllm chat with %s — /reset, /system TEXT, /exit; Ctrl-C stops an answer\n", session->info().name.c_str());

    struct sigaction sa {};
    sa.sa_handler = [](int) { g_cancel = true; };
    sigaction(SIGINT, &sa, nullptr);  // no SA_RESTART: Ctrl-C at the prompt interrupts the read
    return server::run_terminal_chat(*session, server::model_chat_renderer(*session, chat_template), stdin, stdout, options, g_cancel);
}

}  // namespace cli
