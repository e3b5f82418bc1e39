// tinyllm_fake: the server or the terminal chat over the scripted model, for tests that need a real
// process (Node's openai client, headless Chromium, pipes and ptys).
//   tinyllm_fake serve [--port N] [--delay MS] [--words N] [--ctx N] [--api-key K] [--cors O]
//                      [--max-body N] [--shutdown-timeout S] [--header-timeout MS] [--queue N]
//   tinyllm_fake chat [--delay MS] [--words N]
// The reply echoes the last user message, then N filler words (so a slow stream can be stopped). When
// the request offers tools, a user message is answered with a call of the first tool ({"query": the
// message}) and a tool result with "The tool said: RESULT." (a scripted tool round trip).
#include "fake/fake_model.h"

#include <csignal>
#include <cstdio>
#include <cstring>
#include <string>
#include <unistd.h>

namespace {

std::atomic<bool> g_cancel{false};

std::string last_user_message(const std::string& prompt) {
    const std::string open = "<|im_start|>user\n";
    size_t start = prompt.rfind(open);
    if (start == std::string::npos) return prompt;
    start += open.size();
    return prompt.substr(start, prompt.find("<|im_end|>", start) - start);
}

// The role and text of the last message of a ChatML prompt (before the assistant's opening).
std::pair<std::string, std::string> last_message(const std::string& prompt) {
    const std::string open = "<|im_start|>", close = "<|im_end|>";
    size_t end = prompt.rfind(close);
    if (end == std::string::npos) return {"", ""};
    size_t start = prompt.rfind(open, end);
    if (start == std::string::npos) return {"", ""};
    std::string message = prompt.substr(start + open.size(), end - start - open.size());
    size_t newline = message.find('\n');
    if (newline == std::string::npos) return {message, ""};
    return {message.substr(0, newline), message.substr(newline + 1)};
}

std::string first_tool_name(const std::string& prompt) {
    const std::string marker = "# Tools\n";
    size_t at = prompt.find(marker);
    if (at == std::string::npos) return "";
    auto tools = nlohmann::json::parse(prompt.substr(at + marker.size(), prompt.find("<|im_end|>", at) - at - marker.size()), nullptr, false);
    if (tools.is_discarded() || !tools.is_array() || tools.empty()) return "";
    return tools[0]["function"].value("name", "");
}

}  // namespace

int main(int argc, char** argv) {
    if (argc < 2) {
        std::fprintf(stderr, "usage: tinyllm_fake serve|chat [--port N] [--delay MS] [--words N] [--ctx N] [--api-key K]\n");
        return 2;
    }
    std::string mode = argv[1], api_key, cors;
    int port = 0, delay = 0, words = 0, n_ctx = 512, header_timeout = 10000, queue = 64;
    long max_body = 32 << 20;
    double shutdown_timeout = 10;
    for (int i = 2; i + 1 < argc; i += 2) {
        std::string flag = argv[i];
        if (flag == "--port") port = std::stoi(argv[i + 1]);
        else if (flag == "--delay") delay = std::stoi(argv[i + 1]);
        else if (flag == "--words") words = std::stoi(argv[i + 1]);
        else if (flag == "--ctx") n_ctx = std::stoi(argv[i + 1]);
        else if (flag == "--api-key") api_key = argv[i + 1];
        else if (flag == "--cors") cors = argv[i + 1];
        else if (flag == "--max-body") max_body = std::stol(argv[i + 1]);
        else if (flag == "--shutdown-timeout") shutdown_timeout = std::stod(argv[i + 1]);
        else if (flag == "--header-timeout") header_timeout = std::stoi(argv[i + 1]);
        else if (flag == "--queue") queue = std::stoi(argv[i + 1]);
    }

    fake::ScriptedSession session(n_ctx);
    session.token_delay_ms = delay;
    session.reply = [words](const std::string& prompt) {
        const std::string tool = first_tool_name(prompt);
        const auto [role, content] = last_message(prompt);
        if (!tool.empty() && role == "user") {  // tool_choice required: the server already opened the call
            const std::string open = prompt.ends_with("<tool_call>\n") ? "" : "<tool_call>\n";
            return open + nlohmann::json{{"name", tool}, {"arguments", {{"query", content}}}}.dump() + "\n</tool_call>";
        }
        if (role == "tool") return "The tool said: " + content + ".";
        std::string text = "You said: **" + last_user_message(prompt) + "**.";
        for (int i = 0; i < words; i++) text += i % 12 == 0 ? "\n\nword" : " word";
        return text;
    };

    if (mode == "chat") {
        struct sigaction sa{};
        sa.sa_handler = [](int) { g_cancel = true; };
        sigaction(SIGINT, &sa, nullptr);  // no SA_RESTART: Ctrl-C at the prompt interrupts the read
        server::ChatOptions options;
        options.dim_reasoning = isatty(STDOUT_FILENO);
        options.show_prompt = isatty(STDIN_FILENO);
        return server::run_terminal_chat(session, fake::render_chatml, stdin, stdout, options, g_cancel);
    }

    server::ServerOptions options;
    options.port = port;
    options.api_key = api_key;
    options.cors_origin = cors;
    options.max_body = size_t(max_body);
    options.shutdown_timeout_s = shutdown_timeout;
    options.header_timeout_ms = header_timeout;
    options.queue_size = queue;
    signal(SIGPIPE, SIG_IGN);
    server::Server server(options);
    server::shut_down_on_signal(server);
    server.attach(session, fake::render_chatml);
    int bound = server.bind();
    std::printf("tinyllm_fake listening on http://127.0.0.1:%d\n", bound);
    std::fflush(stdout);
    signal(SIGPIPE, SIG_IGN);
    server.run();
    server::await_signal_shutdown();
    return 0;
}
