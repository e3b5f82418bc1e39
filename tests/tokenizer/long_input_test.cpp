// Inputs without spaces (one enormous pre-token): encoding stays linear in time and bounded in memory
// (measured in a child process), and text with ordinary words still gets exactly the reference ids.
#include "common/child_process.h"
#include "tokenizer_test_util.h"

#include <time.h>

using namespace tok_test;

namespace {

// Letters without a space or punctuation: a single word for every pre-tokenizer.
std::string no_space_text(size_t n) {
    std::string s;
    s.reserve(n);
    const char* letters = "abcdefghijklmnopqrstuvwxyzqwertyuiopasdfghjklzxcvbnm";
    for (size_t i = 0; i < n; i++) s += letters[(i * 7 + i / 13) % 52];
    return s;
}

struct Cost {
    double cpu_seconds;
    long peak_rss_kb;
    size_t n_ids;
};

Cost encode_cost(const std::string& name, size_t n_bytes) {
    test_child::Result r = test_child::run([&](int& code) {
        Loaded l = load_vocab(name);  // in the child: its memory counts, not the parent's cache
        const std::string text = no_space_text(n_bytes);
        const size_t n = l.tok->encode(text, false, false).size();
        code = 0;
        return std::to_string(n);
    });
    INFO(name << " on " << n_bytes << " bytes: exit " << r.code << ", CPU " << r.cpu_seconds << " s, peak RSS "
              << r.peak_rss_kb / 1024 << " MB, " << r.message << " ids");
    REQUIRE(r.code == 0);
    return {r.cpu_seconds, r.peak_rss_kb, std::stoul(r.message)};
}

void check_linear_and_bounded(const std::string& name) {
    const size_t small = 256 << 10, large = 2 << 20;
    Cost base = encode_cost(name, 0);  // loading the vocabulary alone
    Cost a = encode_cost(name, small);
    Cost b = encode_cost(name, large);
    INFO(name << ": load " << base.cpu_seconds << " s / " << base.peak_rss_kb / 1024 << " MB; 256 KB: " << a.cpu_seconds << " s / "
              << a.peak_rss_kb / 1024 << " MB; 2 MB: " << b.cpu_seconds << " s / " << b.peak_rss_kb / 1024 << " MB");
    CHECK(b.n_ids > a.n_ids * 7);
    // 8x the input: time ~8x (allow 12x for noise), memory: the input, its ids and a bounded chunk on
    // top of the vocabulary (unbounded SentencePiece took ~225 bytes per input byte: 450 MB here).
    double ta = a.cpu_seconds - base.cpu_seconds, tb = b.cpu_seconds - base.cpu_seconds;
    CHECK(tb < std::max(12 * ta, 0.5));
    CHECK(b.peak_rss_kb - base.peak_rss_kb < 100 * 1024 + test_child::RSS_SLACK_KB);
}

}  // namespace

TEST_CASE("SentencePiece on 2 MB without spaces: linear time, bounded memory") {
    REQUIRE_SHARED_DATA();
    check_linear_and_bounded("llama2");
}

TEST_CASE("byte-level BPE on 2 MB without spaces: linear time, bounded memory") {
    REQUIRE_SHARED_DATA();
    check_linear_and_bounded("qwen3");
}

TEST_CASE("words up to the chunk size encode exactly as one piece, longer ones as their chunks") {
    REQUIRE_SHARED_DATA();
    const Loaded& l = vocab("llama2");
    // A word just under the bound is one pre-token: the ids are those of the whole word.
    const std::string word = no_space_text(tok::MAX_WORD_BYTES - 1);
    const auto ids = l.tok->encode(word, false, false);
    CHECK(l.tok->decode(ids) == word);
    // Past the bound the word is encoded chunk by chunk, and still decodes to itself.
    const std::string longer = no_space_text(3 * tok::MAX_WORD_BYTES + 5);
    CHECK(l.tok->decode(l.tok->encode(longer, false, false)) == longer);
    const std::string multibyte = [] {
        std::string s;
        while (s.size() < 2 * tok::MAX_WORD_BYTES + 10) s += "\xc3\xa9\xe4\xb8\xad\xf0\x9f\x98\x80";  // é 中 😀
        return s;
    }();
    const Loaded& q = vocab("qwen3");
    CHECK(q.tok->decode(q.tok->encode(multibyte, false, false)) == multibyte);  // no cut inside a character
}

static double thread_cpu_seconds() {
    timespec t{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return double(t.tv_sec) + t.tv_nsec * 1e-9;
}

// CPU time of this thread, not wall time: the bound holds on a loaded machine too.
TEST_CASE("a CancelScope stops encoding a long input soon after it says so, and one that never does changes nothing") {
    REQUIRE_SHARED_DATA();
    for (const char* name : {"llama2", "qwen3"}) {
        INFO(name);
        const Loaded& l = vocab(name);
        const std::string sample = no_space_text(1 << 20);
        double t0 = thread_cpu_seconds();
        const auto plain = l.tok->encode(sample, false, false);
        const double one_mb = thread_cpu_seconds() - t0;
        {
            tok::CancelScope never([] { return false; });
            CHECK(l.tok->encode(sample, false, false) == plain);
        }
        const std::string text = no_space_text(16 << 20);  // ~16 one_mb of work uncancelled
        int asked = 0;
        tok::CancelScope scope([&] { return ++asked >= 2; });  // the client leaves after the first look
        t0 = thread_cpu_seconds();
        CHECK_THROWS_AS(l.tok->encode(text, false, false), tok::Cancelled);
        const double cancelled = thread_cpu_seconds() - t0;
        INFO("1 MB: " << one_mb << " s CPU; 16 MB cancelled at the second look: " << cancelled << " s");
        CHECK(asked == 2);
        CHECK(cancelled < 2 * one_mb);
    }
}
