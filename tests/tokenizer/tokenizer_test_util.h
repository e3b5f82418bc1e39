// Helpers shared by the tokenizer tests: reading the conformance corpus, building vocabularies in
// memory, printing token ids and text so a mismatch is readable.
#pragma once

#include "common/test_data.h"
#include "gguf/gguf.h"
#include "tokenizer/tokenizer.h"

#include <nlohmann/json.hpp>

#include <fstream>
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

// A tokenizer from an in-memory GGUF made by `build` (which fills in tokenizer.* keys).
template <class F>
inline Loaded load_memory(F&& build, std::vector<uint8_t>& storage) {
    gguf::Writer w;
    w.set_str("general.architecture", "llama");
    build(w);
    storage = w.bytes();
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
