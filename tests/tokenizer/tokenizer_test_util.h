// Helpers shared by the tokenizer tests: reading the conformance corpus, building vocabularies in
// memory, printing token ids and text so a mismatch is readable.
#pragma once

#include "common/test_data.h"
#include "gguf/gguf.h"
#include "tokenizer/tokenizer.h"

#include <nlohmann/json.hpp>

#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

namespace tok_test {

struct Case {
    int line = 0;
    std::string text;
    std::vector<int32_t> ids;
};

inline std::vector<Case> read_expected(const std::string& name) {
    std::ifstream in(test_data::shared("tokenizers/expected/" + name + ".jsonl"));
    REQUIRE(in.good());
    std::vector<Case> cases;
    for (std::string line; std::getline(in, line);) {
        if (line.empty()) continue;
        auto j = nlohmann::json::parse(line);
        cases.push_back({j.at("line").get<int>(), j.at("text").get<std::string>(), j.at("ids").get<std::vector<int32_t>>()});
    }
    return cases;
}

struct Loaded {
    std::unique_ptr<gguf::File> file;
    std::unique_ptr<tok::Tokenizer> tok;
};

inline Loaded load_vocab(const std::string& name) {
    Loaded l;
    l.file = gguf::File::open(test_data::shared("tokenizers/vocab/" + name + ".vocab.gguf"));
    l.tok = tok::Tokenizer::from_gguf(*l.file);
    return l;
}

// The conformance vocabulary `name`, loaded once per test run (loading a 200k-token vocabulary takes
// a few hundred milliseconds).
inline const Loaded& vocab(const std::string& name) {
    static std::map<std::string, Loaded> loaded;
    auto it = loaded.find(name);
    if (it == loaded.end()) it = loaded.emplace(name, load_vocab(name)).first;
    return it->second;
}

// A metadata-only GGUF v3 image (the layout of https://github.com/ggml-org/ggml/blob/master/docs/gguf.md),
// enough to describe a vocabulary in a test.
class GgufImage {
public:
    GgufImage& str(const std::string& key, const std::string& v) { return kv(key, 8), string(v), *this; }
    GgufImage& u32(const std::string& key, uint32_t v) { return kv(key, 4), pod(v), *this; }
    GgufImage& boolean(const std::string& key, bool v) { return kv(key, 7), pod(uint8_t(v)), *this; }
    GgufImage& strs(const std::string& key, const std::vector<std::string>& v) {
        kv(key, 9), pod(uint32_t(8)), pod(uint64_t(v.size()));
        for (const auto& s : v) string(s);
        return *this;
    }
    GgufImage& i32s(const std::string& key, const std::vector<int32_t>& v) {
        kv(key, 9), pod(uint32_t(5)), pod(uint64_t(v.size()));
        for (int32_t x : v) pod(x);
        return *this;
    }
    GgufImage& f32s(const std::string& key, const std::vector<float>& v) {
        kv(key, 9), pod(uint32_t(6)), pod(uint64_t(v.size()));
        for (float x : v) pod(x);
        return *this;
    }
    std::vector<uint8_t> bytes() const {
        std::vector<uint8_t> out{'G', 'G', 'U', 'F'};
        const auto put = [&](auto v) {
            const auto* p = reinterpret_cast<const uint8_t*>(&v);
            out.insert(out.end(), p, p + sizeof v);
        };
        put(uint32_t(3)), put(uint64_t(0)), put(uint64_t(n_kv_));
        out.insert(out.end(), body_.begin(), body_.end());
        return out;
    }

private:
    template <class T> void pod(T v) {
        const auto* p = reinterpret_cast<const uint8_t*>(&v);
        body_.insert(body_.end(), p, p + sizeof v);
    }
    void string(const std::string& s) {
        pod(uint64_t(s.size()));
        body_.insert(body_.end(), s.begin(), s.end());
    }
    void kv(const std::string& key, uint32_t type) {
        string(key);
        pod(type);
        n_kv_++;
    }
    std::vector<uint8_t> body_;
    uint64_t n_kv_ = 0;
};

// A tokenizer from an in-memory GGUF; `storage` keeps the bytes alive as long as the file.
inline Loaded load_memory(const GgufImage& image, std::vector<uint8_t>& storage) {
    storage = image.bytes();
    Loaded l;
    l.file = gguf::File::from_memory(storage.data(), storage.size(), "test.gguf");
    l.tok = tok::Tokenizer::from_gguf(*l.file);
    return l;
}

inline std::string escaped(const std::string& s) {
    std::ostringstream o;
    for (unsigned char c : s) {
        if (c == '\\') o << "\\\\";
        else if (c == '\n') o << "\\n";
        else if (c < 0x20 || c == 0x7f) o << "\\x" << std::hex << (c >> 4) << (c & 15) << std::dec;
        else o << c;
    }
    return o.str();
}

inline std::string show(const std::vector<int32_t>& ids, const tok::Tokenizer& t) {
    std::ostringstream o;
    for (int32_t id : ids) {
        o << id;
        if (id >= 0 && id < t.n_vocab()) o << "'" << escaped(t.piece(id)) << "'";
        o << " ";
    }
    return o.str();
}

}  // namespace tok_test
