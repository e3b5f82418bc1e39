// SentencePiece vocabularies (tokenizer.ggml.model = "llama"): a ModelProto is built from the GGUF
// pieces, scores and types, serialized by hand in protobuf wire format and loaded into
// libsentencepiece. Like llama.cpp: BPE by piece score, byte fallback, no extra-whitespace removal,
// a space in front of each text fragment when add_space_prefix is set. Text is encoded word by word
// (cached) where no piece can span the start of a space run: same ids, far less work.
// Proto: https://github.com/google/sentencepiece/blob/master/src/sentencepiece_model.proto
#include "tokenizer/vocab_impl.h"

#include "gguf/gguf.h"

#include <sentencepiece_processor.h>

#include <cctype>
#include <cstring>
#include <unordered_set>

namespace tok {

namespace {

// Just enough of the protobuf wire format for ModelProto.
class ProtoWriter {
public:
    void varint_field(uint32_t field, uint64_t v) {
        tag(field, 0);
        varint(v);
    }
    void int32_field(uint32_t field, int32_t v) { varint_field(field, uint64_t(int64_t(v))); }  // negatives: 10 bytes
    void float_field(uint32_t field, float v) {
        tag(field, 5);
        char b[4];
        std::memcpy(b, &v, 4);  // little-endian, as on every machine we build for
        out_.append(b, 4);
    }
    void bytes_field(uint32_t field, std::string_view v) {
        tag(field, 2);
        varint(v.size());
        out_.append(v);
    }
    const std::string& bytes() const { return out_; }

private:
    void tag(uint32_t field, uint32_t wire_type) { varint(uint64_t(field) << 3 | wire_type); }
    void varint(uint64_t v) {
        while (v >= 0x80) {
            out_.push_back(char(v | 0x80));
            v >>= 7;
        }
        out_.push_back(char(v));
    }
    std::string out_;
};

// ModelProto.SentencePiece.Type values equal GGUF's token types for 1..6.
enum PieceType { PIECE_NORMAL = 1, PIECE_UNKNOWN = 2, PIECE_CONTROL = 3, PIECE_USER_DEFINED = 4, PIECE_UNUSED = 5, PIECE_BYTE = 6 };

bool is_byte_piece(const std::string& t) {
    return t.size() == 6 && t.compare(0, 3, "<0x") == 0 && t[5] == '>' && std::isxdigit(uint8_t(t[3])) &&
           std::isxdigit(uint8_t(t[4]));
}

class SpmTokenizer final : public Vocab {
public:
    SpmTokenizer(const gguf::File& f, bool by_word) {
        load_common(f, Defaults{1, 2, 0, true, true});  // llama.cpp's defaults for SentencePiece files
        const int32_t n = n_vocab();

        texts_.resize(n);
        for (int32_t i = 0; i < n; i++) {
            const std::string& t = tokens_[i];
            switch (types_[i]) {
                case NORMAL: texts_[i] = unescape_spaces(t); break;
                case CONTROL: case UNKNOWN: case USER_DEFINED: texts_[i] = t; break;
                case BYTE:
                    if (!is_byte_piece(t)) throw Error(where() + "byte token " + std::to_string(i) + " is '" + t + "', not <0xXX>");
                    texts_[i] = std::string(1, char(std::stoi(t.substr(3, 2), nullptr, 16)));
                    break;
                default: break;  // unused / undefined tokens decode to nothing, as in llama.cpp
            }
        }

        const bool remove_extra_whitespaces = f.get_or<bool>("tokenizer.ggml.remove_extra_whitespaces", false);
        by_word_ = by_word && !remove_extra_whitespaces;
        find_chars_joined_to_space();
        sp_ = std::make_unique<sentencepiece::SentencePieceProcessor>();
        const auto status = sp_->LoadFromSerializedProto(model_proto(remove_extra_whitespaces));
        if (!status.ok()) throw Error(where() + "SentencePiece rejects the vocabulary: " + status.ToString());
    }

protected:
    void encode_fragment(std::string_view fragment, std::vector<int32_t>& out) const override {
        // The space llama.cpp puts in front of every fragment (SentencePiece's dummy prefix).
        std::string text;
        if (add_space_prefix_) text = " ";
        text.append(fragment);
        if (!by_word_) {
            encode_piece(text, out);
            return;
        }
        // Merges never cross the start of a space run (unless a piece joins its character to a space):
        // encode "  word" pieces separately.
        for (size_t begin = 0; begin < text.size();) {
            size_t end = begin + 1;
            while (end < text.size() && !(text[end] == ' ' && starts_space_run(text, end))) end++;
            const std::string_view word = std::string_view(text).substr(begin, end - begin);
            if (!cache_.get(word, out)) {
                const size_t start = out.size();
                encode_piece(word, out);
                cache_.put(word, out.data() + start, out.size() - start);
            }
            begin = end;
        }
    }

private:
    void encode_piece(std::string_view text, std::vector<int32_t>& out) const {
        for_each_chunk(text, [&](std::string_view chunk) {
            std::vector<int> ids;
            const auto status = sp_->Encode(chunk, &ids);
            if (!status.ok()) throw Error(where() + "SentencePiece: " + status.ToString());
            for (int id : ids) {
                if (id >= n_vocab()) throw Error(where() + "text has a character the vocabulary cannot represent (no byte tokens, no unknown token)");
                out.push_back(id);
            }
        });
    }

    // The characters some piece SentencePiece can produce has right before a U+2581 (">" in Gemma 3's
    // ">\u2581</"): only there may a symbol span the start of a space run.
    void find_chars_joined_to_space() {
        static const std::string_view SPACE = "\xe2\x96\x81";
        for (size_t i = 0; i < tokens_.size(); i++) {
            if (types_[i] != NORMAL && types_[i] != USER_DEFINED && types_[i] != UNUSED && types_[i] != UNDEFINED) continue;
            const std::string_view t = tokens_[i];
            for (size_t at = t.find(SPACE, 1); at != std::string_view::npos; at = t.find(SPACE, at + 1)) {
                size_t c = at - 1;
                while (c > 0 && (uint8_t(t[c]) & 0xc0) == 0x80) c--;  // back to the start of that character
                if (t.substr(c, at - c) != SPACE) joined_to_space_.insert(std::string(t.substr(c, at - c)));
            }
        }
    }
    // Whether the space at text[space] starts a run no symbol can reach into from the left: the
    // character before it is no space (nor a literal U+2581, which looks like one to SentencePiece)
    // and no piece joins it to a space.
    bool starts_space_run(const std::string& text, size_t space) const {
        size_t c = space - 1;
        while (c > 0 && space - c < 4 && (uint8_t(text[c]) & 0xc0) == 0x80) c--;
        const std::string_view prev = std::string_view(text).substr(c, space - c);
        if (prev == " " || prev == "\xe2\x96\x81") return false;
        return joined_to_space_.empty() || !joined_to_space_.count(std::string(prev));
    }

    static std::string unescape_spaces(const std::string& t) {  // U+2581 -> ' '
        std::string out;
        for (size_t i = 0; i < t.size(); i++) {
            if (t.compare(i, 3, "\xe2\x96\x81") == 0) {
                out.push_back(' ');
                i += 2;
            } else {
                out.push_back(t[i]);
            }
        }
        return out;
    }

    std::string model_proto(bool remove_extra_whitespaces) const {
        const int32_t n = n_vocab();
        // SentencePiece needs exactly one unknown piece: the file's, else unknown_token_id's, else one
        // appended past the vocabulary (encode_fragment reports it if it is ever produced).
        int32_t unk = -1;
        for (int32_t i = 0; i < n && unk < 0; i++)
            if (types_[i] == UNKNOWN) unk = i;
        const bool promote_unk = unk < 0 && unk_ >= 0 && types_[unk_] != BYTE;
        if (promote_unk) unk = unk_;
        bool byte_fallback = false;
        ProtoWriter model;
        for (int32_t i = 0; i < n; i++) {
            int type = types_[i] == UNDEFINED ? int(PIECE_NORMAL) : int(types_[i]);
            if (type == PIECE_UNKNOWN && i != unk) type = PIECE_CONTROL;  // a second unknown piece
            if (i == unk) type = PIECE_UNKNOWN;
            byte_fallback |= type == PIECE_BYTE;
            ProtoWriter piece;
            piece.bytes_field(1, tokens_[i]);
            piece.float_field(2, scores_[i]);
            piece.varint_field(3, uint64_t(type));
            model.bytes_field(1, piece.bytes());
        }
        if (unk < 0) {
            ProtoWriter piece;
            piece.bytes_field(1, "<tinyllm:unk>");
            piece.float_field(2, 0.0f);
            piece.varint_field(3, PIECE_UNKNOWN);
            model.bytes_field(1, piece.bytes());
            unk = n;
        }
        ProtoWriter trainer;
        trainer.varint_field(3, 2);  // model_type = BPE: merge the adjacent pair whose piece scores highest
        trainer.int32_field(4, unk == n ? n + 1 : n);  // vocab_size
        trainer.varint_field(35, byte_fallback);
        trainer.int32_field(40, unk);
        trainer.int32_field(41, bos_ >= 0 && types_[bos_] == CONTROL ? bos_ : -1);
        trainer.int32_field(42, eos_ >= 0 && types_[eos_] == CONTROL ? eos_ : -1);
        trainer.int32_field(43, -1);  // pad_id
        model.bytes_field(2, trainer.bytes());
        ProtoWriter normalizer;
        normalizer.bytes_field(1, "identity");  // no precompiled charsmap: text is not normalized
        normalizer.varint_field(3, 0);  // add_dummy_prefix: encode_fragment puts the space in itself
        normalizer.varint_field(4, remove_extra_whitespaces);
        normalizer.varint_field(5, 1);  // escape_whitespaces: ' ' -> U+2581
        model.bytes_field(3, normalizer.bytes());
        return model.bytes();
    }

    std::unique_ptr<sentencepiece::SentencePieceProcessor> sp_;
    bool by_word_ = false;
    std::unordered_set<std::string> joined_to_space_;
    mutable WordCache cache_;
};

}  // namespace

std::unique_ptr<Tokenizer> make_spm(const gguf::File& file, bool by_word) { return std::make_unique<SpmTokenizer>(file, by_word); }

}  // namespace tok
