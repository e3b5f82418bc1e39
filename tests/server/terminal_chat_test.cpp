// The terminal chat: in-process through memory streams, and tinyllm_fake's chat as a real process
// through a pipe and through a pty (prompt, dimmed reasoning, Ctrl-C stopping only the answer).
#include "fake/fake_model.h"
#include "server/server.h"

#include <catch2/catch.hpp>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <fcntl.h>
#include <poll.h>
#include <pty.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

namespace {

std::string chat_in_memory(fake::ScriptedSession& session, const std::string& input, server::ChatOptions options = {}) {
    std::FILE* in = fmemopen(const_cast<char*>(input.data()), input.size(), "r");
    char* buf = nullptr;
    size_t len = 0;
    std::FILE* out = open_memstream(&buf, &len);
    std::atomic<bool> cancel{false};
    CHECK(server::run_terminal_chat(session, fake::render_chatml, in, out, options, cancel) == 0);
    std::fclose(in);
    std::fclose(out);
    std::string text(buf, len);
    free(buf);
    return text;
}

std::string echo_reply(const std::string& prompt) {
    size_t start = prompt.rfind("user\n") + 5;
    return "echo:" + prompt.substr(start, prompt.find("<|im_end|>", start) - start);
}

// Reads what the child wrote until `marker` shows up (or 5 s pass).
std::string read_until(int fd, const std::string& marker, std::string& seen) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (seen.find(marker) == std::string::npos && std::chrono::steady_clock::now() < deadline) {
        pollfd p{fd, POLLIN, 0};
        if (poll(&p, 1, 50) <= 0) continue;
        char buf[1024];
        ssize_t n = read(fd, buf, sizeof buf);
        if (n <= 0) break;
        seen.append(buf, size_t(n));
    }
    return seen;
}

}  // namespace

TEST_CASE("chat: two turns keep the conversation, /reset forgets it, EOF exits") {
    fake::ScriptedSession session;
    session.reply = echo_reply;
    std::string out = chat_in_memory(session, "first\nsecond\n/reset\nthird\n");
    CHECK(out == "echo:first\necho:second\n(conversation cleared)\necho:third\n");
    const auto calls = session.calls();
    REQUIRE(calls.size() == 3);
    CHECK(calls[1].prompt_text == "<s><|im_start|>user\nfirst<|im_end|>\n<|im_start|>assistant\necho:first<|im_end|>\n"
                                  "<|im_start|>user\nsecond<|im_end|>\n<|im_start|>assistant\n");
    CHECK(calls[2].prompt_text == "<s><|im_start|>user\nthird<|im_end|>\n<|im_start|>assistant\n");
}

TEST_CASE("chat: /system sets the system prompt, /exit leaves") {
    fake::ScriptedSession session;
    session.reply = echo_reply;
    std::string out = chat_in_memory(session, "/system Be brief.\nhi\n/exit\nnever read\n");
    CHECK(out == "(system prompt set; conversation cleared)\necho:hi\n");
    REQUIRE(session.calls().size() == 1);
    CHECK(session.calls()[0].prompt_text.starts_with("<s><|im_start|>system\nBe brief.<|im_end|>\n"));
}

TEST_CASE("chat: reasoning is dimmed on a terminal and left out of piped output") {
    fake::ScriptedSession session;
    session.reply_text = "<think>pondering</think>Answer.";
    CHECK(chat_in_memory(session, "q\n") == "Answer.\n");
    server::ChatOptions tty;
    tty.dim_reasoning = true;
    CHECK(chat_in_memory(session, "q\n", tty) == "\x1b[2mpondering\x1b[0m\nAnswer.\n");
}

TEST_CASE("chat: tinyllm_fake chat through a pipe, one message per line") {
    int to_child[2], from_child[2];
    REQUIRE(pipe(to_child) == 0);
    REQUIRE(pipe(from_child) == 0);
    pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        dup2(to_child[0], 0);
        dup2(from_child[1], 1);
        close(to_child[1]);
        close(from_child[0]);
        execl(TINYLLM_FAKE_BIN, TINYLLM_FAKE_BIN, "chat", nullptr);
        _exit(127);
    }
    close(to_child[0]);
    close(from_child[1]);
    const std::string input = "hello\nagain\n/reset\n";
    REQUIRE(write(to_child[1], input.data(), input.size()) == ssize_t(input.size()));
    close(to_child[1]);  // EOF
    std::string out;
    read_until(from_child[0], "\x04", out);  // until the child closes its end
    close(from_child[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
    CHECK(out == "You said: **hello**.\nYou said: **again**.\n(conversation cleared)\n");
}

TEST_CASE("chat: tinyllm_fake chat on a pty: prompt, Ctrl-C stops the answer only, EOF exits") {
    int master = -1;
    pid_t pid = forkpty(&master, nullptr, nullptr, nullptr);
    REQUIRE(pid >= 0);
    if (pid == 0) {
        execl(TINYLLM_FAKE_BIN, TINYLLM_FAKE_BIN, "chat", "--delay", "20", "--words", "200", nullptr);
        _exit(127);
    }
    std::string seen;
    read_until(master, "> ", seen);
    REQUIRE(seen.find("> ") != std::string::npos);
    const std::string line = "tell me a story\r";
    REQUIRE(write(master, line.data(), line.size()) == ssize_t(line.size()));
    read_until(master, "word word", seen);
    REQUIRE(seen.find("You said: **tell me a story**.") != std::string::npos);
    REQUIRE(write(master, "\x03", 1) == 1);  // Ctrl-C
    read_until(master, "(stopped)\r\n> ", seen);  // the answer ends; the chat asks for the next message
    CHECK(seen.find("(stopped)\r\n> ") != std::string::npos);
    REQUIRE(write(master, "\x04", 1) == 1);  // Ctrl-D: EOF
    int status = 0;
    for (int i = 0; i < 200 && waitpid(pid, &status, WNOHANG) == 0; i++) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    if (waitpid(pid, &status, WNOHANG) == 0 && !WIFEXITED(status)) {
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
        FAIL("the chat did not exit on EOF");
    }
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
    close(master);
}
