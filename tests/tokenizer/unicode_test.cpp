// NFC against the Unicode conformance file NormalizationTest.txt (Debian unicode-data), and the
// generated property tables on code points whose properties the pre-tokenizers depend on.
#include "tokenizer_test_util.h"

#include "tokenizer/unicode.h"

#include <cstdio>
#include <cstdlib>
#include <filesystem>

namespace u = tok::unicode;

namespace {

std::string utf8_of_hex_list(const std::string& field) {
    std::string out;
    std::istringstream in(field);
    for (std::string hex; in >> hex;) u::append_utf8(out, uint32_t(std::stoul(hex, nullptr, 16)));
    return out;
}

}  // namespace

TEST_CASE("NFC passes the Unicode NormalizationTest.txt conformance cases") {
    const std::string path = "/usr/share/unicode/NormalizationTest.txt.bz2";
    if (!std::filesystem::exists(path)) {
        WARN("SKIPPED: " << path << " is absent (Debian package unicode-data)");
        return;
    }
    if (std::system("command -v bzcat >/dev/null 2>&1") != 0) {
        WARN("SKIPPED: bzcat is absent (Debian package bzip2)");
        return;
    }
    FILE* in = popen(("bzcat " + path).c_str(), "r");
    REQUIRE(in != nullptr);
    int n = 0, failures = 0;
    char buf[4096];
    while (fgets(buf, sizeof buf, in)) {
        std::string line(buf);
        if (line.empty() || line[0] == '#' || line[0] == '@') continue;
        std::vector<std::string> col;
        std::istringstream fields(line);
        for (std::string f; std::getline(fields, f, ';') && col.size() < 5;) col.push_back(utf8_of_hex_list(f));
        if (col.size() < 5) continue;
        // c2 == toNFC(c1) == toNFC(c2) == toNFC(c3);  c4 == toNFC(c4) == toNFC(c5)
        const bool ok = u::to_nfc(col[0]) == col[1] && u::to_nfc(col[1]) == col[1] && u::to_nfc(col[2]) == col[1] &&
                        u::to_nfc(col[3]) == col[3] && u::to_nfc(col[4]) == col[3];
        if (!ok && ++failures <= 5) UNSCOPED_INFO("fails: " << line);
        n++;
    }
    pclose(in);
    CHECK(n > 15000);
    CHECK(failures == 0);
}

TEST_CASE("NFC composes decomposed accents and Hangul and keeps invalid bytes") {
    CHECK(u::to_nfc("e\xcc\x81") == "\xc3\xa9");                                       // e + U+0301 -> U+00E9
    CHECK(u::to_nfc("\xe1\x84\x92\xe1\x85\xa1\xe1\x86\xab") == "\xed\x95\x9c");         // Hangul L V T -> U+D55C
    CHECK(u::to_nfc("\xe2\x84\xab") == "\xc3\x85");                                     // ANGSTROM SIGN -> U+00C5
    CHECK(u::to_nfc("a\xff\xcc\x81") == "a\xff\xcc\x81");                               // an invalid byte blocks nothing it should not
    CHECK(u::is_nfc_quick("plain ascii"));
    CHECK_FALSE(u::is_nfc_quick("e\xcc\x81"));
}

TEST_CASE("the property tables know the classes the pre-tokenizers split on") {
    CHECK(u::category('A') == u::Lu);
    CHECK(u::category(0x01c5) == u::Lt);  // Dz with caron
    CHECK(u::category(0x02b0) == u::Lm);
    CHECK(u::category(0x4e2d) == u::Lo);
    CHECK(u::category(0x0301) == u::Mn);
    CHECK(u::category(0x216b) == u::Nl);
    CHECK(u::category(0x1f600) == u::So);
    CHECK(u::category(0x10ffff) == u::Cn);
    CHECK(u::props(0x85) & u::PROP_WHITESPACE);
    CHECK(u::props(0x3000) & u::PROP_WHITESPACE);
    CHECK_FALSE(u::props(0xfeff) & u::PROP_WHITESPACE);
    CHECK_FALSE(u::props(0x200b) & u::PROP_WHITESPACE);
    CHECK(u::props(0x4e2d) & u::PROP_HAN);
    CHECK_FALSE(u::props(0x3042) & u::PROP_HAN);  // hiragana
    CHECK(std::string(u::UCD_VERSION) == "15.0.0");
}

TEST_CASE("UTF-8 decoding rejects overlongs, surrogates and truncation byte by byte") {
    size_t len;
    CHECK(u::decode_utf8("\xc3\xa9", 2, len) == 0xe9);
    CHECK(len == 2);
    CHECK(u::decode_utf8("\xc0\xaf", 2, len) == u::INVALID_BASE + 0xc0);  // overlong '/'
    CHECK(len == 1);
    CHECK(u::decode_utf8("\xed\xa0\x80", 3, len) == u::INVALID_BASE + 0xed);  // surrogate
    CHECK(u::decode_utf8("\xf0\x9f\x98", 3, len) == u::INVALID_BASE + 0xf0);  // truncated
    CHECK(u::is_utf8_prefix("\xf0\x9f\x98", 3));
    CHECK_FALSE(u::is_utf8_prefix("\xf0\x9f\x98\x8a", 4));
    CHECK_FALSE(u::is_utf8_prefix("\xff", 1));
}
