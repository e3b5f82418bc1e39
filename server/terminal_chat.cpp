// The terminal chat: reads one message per line, streams the answer as it comes, keeps the
// conversation. Commands: /reset, /system TEXT, /exit; EOF exits; the caller's Ctrl-C flag stops
// only the answer being written.
#include "server/server_impl.h"

#include <cerrno>
#include <cstring>

namespace server {

namespace {

constexpr const char* DIM = "\x1b[2m";
constexpr const char* UNDIM = "\x1b[0m";

// One line from `in` without its line break; false at EOF. An interrupted read (Ctrl-C at the
// prompt) returns an empty line.
bool read_line(std::FILE* in, std::string& line) {
    line.clear();
    for (;;) {
        int c = std::fgetc(in);
        if (c == EOF) {
            if (std::ferror(in) && errno == EINTR) {
                std::clearerr(in);
                return true;
            }
            return !line.empty();
        }
        if (c == '\n') break;
        line += char(c);
    }
    if (!line.empty() && line.back() == '\r') line.pop_back();
    return true;
}

}  // namespace

int run_terminal_chat(llm::Session& session, const ChatRenderer& render_chat, std::FILE* in, std::FILE* out,
                      const ChatOptions& options, std::atomic<bool>& cancel) {
    const tok::Tokenizer& tokenizer = session.tokenizer();
    std::string system_prompt = options.system_prompt;
    json history = json::array();
    std::string line;
    for (;;) {
        if (options.show_prompt) std::fputs("> ", out), std::fflush(out);
        cancel = false;
        if (!read_line(in, line)) break;
        if (line.empty()) continue;
        if (line == "/exit" || line == "/quit") break;
        if (line == "/reset" || line.starts_with("/system")) {
            if (line.starts_with("/system")) system_prompt = line.size() > 8 ? line.substr(8) : "";
            history = json::array();
            session.reset();
            std::fputs(line == "/reset" ? "(conversation cleared)\n" : "(system prompt set; conversation cleared)\n", out);
            continue;
        }
        if (line.starts_with("/")) {
            std::fputs("(commands: /reset, /system TEXT, /exit; Ctrl-C stops an answer, Ctrl-D quits)\n", out);
            continue;
        }

        history.push_back({{"role", "user"}, {"content", line}});
        llm::ChatInput input;
        if (!system_prompt.empty()) input.messages.push_back({{"role", "system"}, {"content", system_prompt}});
        for (const auto& m : history) input.messages.push_back(m);
        const llm::PreparedChat chat = llm::prepare_chat(render_chat, tokenizer, input);

        std::string answer;
        bool dimmed = false;
        auto show = [&](const llm::RoutedText& t) {
            if (!t.reasoning.empty() && options.dim_reasoning) {
                if (!dimmed) std::fputs(DIM, out), dimmed = true;
                std::fputs(t.reasoning.c_str(), out);
            }
            if (!t.content.empty()) {
                if (dimmed) std::fputs(UNDIM, out), std::fputs("\n", out), dimmed = false;
                std::fputs(t.content.c_str(), out);
                answer += t.content;
            }
            std::fflush(out);
        };
        llm::GenerateOptions gen;
        gen.sampling = options.sampling;
        gen.grammar = options.grammar;
        gen.cancel = &cancel;
        llm::ReplyStream reply(tokenizer, {}, chat.router, chat.ids);
        gen.max_tokens = std::max(1, std::min(options.max_tokens, session.info().n_ctx - int(chat.ids.size())));
        gen.on_token = [&](const llm::TokenStep& step) {
            show(reply.push(step.id));
            return !reply.stopped();
        };
        try {
            llm::GenerateResult result = session.generate(chat.ids, gen);
            show(reply.finish());
            if (dimmed) std::fputs(UNDIM, out);
            std::fputs(result.finish == llm::FinishReason::CANCELLED ? " (stopped)\n" : "\n", out);
        } catch (const std::length_error&) {
            history.erase(history.end() - 1);
            std::fputs("(the conversation no longer fits the context: /reset to start over)\n", out);
            continue;
        }
        history.push_back({{"role", "assistant"}, {"content", answer}});
        std::fflush(out);
    }
    return 0;
}

}  // namespace server
