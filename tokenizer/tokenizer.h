// Tokenizers built from GGUF metadata only: byte-level BPE (tokenizer.ggml.model = "gpt2") with the
// preset pre-tokenizers, and SentencePiece vocabularies ("llama") through libsentencepiece.
// (Interface agreed between modules; the tokenizer module owns and may extend it.)
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace gguf { class File; }

namespace tok {

// Bad input (an unusable vocabulary, an out-of-range id). The message starts with "[tokenizer] ".
struct Error : std::runtime_error {
    using std::runtime_error::runtime_error;
};

// encode() stopped because its thread's CancelScope said so (the caller no longer wants the result).
struct Cancelled : Error {
    using Error::Error;
};

// Makes long work on this thread stoppable: while a scope lives, encode() asks `cancelled` after every
// CHECK_BYTES or so of text, and the Jinja renderer every few thousand steps; once it says yes they
// throw (tok::Cancelled, llm::TemplateError). A server stops preparing a prompt for a client that left.
class CancelScope {
public:
    static constexpr size_t CHECK_BYTES = 256 << 10;
    explicit CancelScope(std::function<bool()> cancelled);
    ~CancelScope();
    CancelScope(const CancelScope&) = delete;
    CancelScope& operator=(const CancelScope&) = delete;

    // `bytes` of work done; asks the innermost scope (if any) once per CHECK_BYTES. True: stop now.
    static bool should_stop(size_t bytes);
    static void check(size_t bytes);  // should_stop, as a tok::Cancelled

private:
    std::function<bool()> cancelled_;
    size_t since_check_ = 0;
    bool stopped_ = false;
    CancelScope* previous_;
};

struct TextSpan {
    size_t begin = 0, end = 0;  // byte offsets, end exclusive
};

// Pre-tokens (words) longer than this are encoded in consecutive chunks of at most this many bytes,
// each cut at a UTF-8 character boundary, so that an input without spaces (a 60 MB "word") costs time
// linear in its length and memory bounded by the chunk (SentencePiece takes ~225 bytes per input byte).
// Ids differ from an unbounded encoding only near the cuts of such words; real words are far shorter.
constexpr size_t MAX_WORD_BYTES = 16384;

class Tokenizer {
public:
    virtual ~Tokenizer() = default;
    // Throws tok::Error for a vocabulary it cannot use (unknown model or pre-tokenizer preset, ...).
    static std::unique_ptr<Tokenizer> from_gguf(const gguf::File& file);

    // add_special: BOS/EOS as the vocabulary's add_bos_token/add_eos_token say.
    // parse_special: control/user-defined tokens written literally in `text` become their ids
    // (user-defined tokens always do, as in llama.cpp and Hugging Face tokenizers).
    virtual std::vector<int32_t> encode(std::string_view text, bool add_special, bool parse_special) const = 0;
    // Where control tokens are written literally in `text` (what encode(…, parse_special) makes ids).
    virtual std::vector<TextSpan> control_spans(std::string_view) const { return {}; }
    // encode(text, add_special, true), except that control tokens inside a `literal` span (sorted,
    // disjoint) stay text: a chat prompt's markup becomes control tokens, the client's text never does.
    virtual std::vector<int32_t> encode_literal(std::string_view text, bool add_special, const std::vector<TextSpan>&) const {
        return encode(text, add_special, true);
    }
    // The text of `ids`, special tokens included as their text, byte for byte (it may end in the middle
    // of a UTF-8 sequence). SentencePiece vocabularies drop the space they put in front of the text.
    // token_text() of each id, as StreamDecoder's pieces are: an override must keep it so.
    virtual std::string decode(const std::vector<int32_t>& ids) const;
    virtual std::string piece(int32_t id) const = 0;  // the vocabulary entry as stored
    // The bytes `id` contributes to decoded text; `first`: it starts the text.
    virtual std::string token_text(int32_t id, bool first) const = 0;

    virtual int32_t n_vocab() const = 0;
    virtual int32_t bos() const = 0;  // -1 when the vocabulary has none
    virtual int32_t eos() const = 0;
    virtual bool add_bos() const = 0;
    virtual bool is_end(int32_t id) const = 0;      // EOS / EOT / end-of-generation tokens
    virtual bool is_special(int32_t id) const = 0;  // control, unknown or user-defined token
    // A control token (BOS, <|im_start|>, …): a reply shows it as nothing, as llama-server does. Tags
    // a router reads (<think>, <tool_call>) are user-defined or plain tokens, not control ones.
    virtual bool is_control(int32_t id) const = 0;
};

// The SentencePiece vocabulary of `file` (what from_gguf makes for tokenizer.ggml.model "llama"). It
// encodes a text fragment word by word through a cache of words (unless the vocabulary removes extra
// whitespace); by_word = false hands each fragment to SentencePiece whole: slower, the reference the
// tests hold the word-by-word ids to.
std::unique_ptr<Tokenizer> make_spm(const gguf::File& file, bool by_word = true);

// Turns ids into text incrementally, emitting only complete UTF-8 code points; partial bytes are held
// until the next token completes them. Bytes that can never become valid UTF-8 come out as U+FFFD at
// once, so for ids whose decode() is valid UTF-8 the concatenated output equals decode(). The one
// incremental decoder of every front end (llm::ReplyStream holds it): the same ids print the same text.
class StreamDecoder {
public:
    // `continues_text`: the ids follow text already there (a reply after its prompt), so the first one
    // keeps the space SentencePiece puts in front of a word.
    explicit StreamDecoder(const Tokenizer& tokenizer, bool continues_text = false) : tokenizer_(tokenizer), first_(!continues_text) {}
    std::string push(int32_t id);
    std::string flush();  // whatever is held back (invalid trailing bytes become U+FFFD)

private:
    const Tokenizer& tokenizer_;
    std::string pending_;  // an incomplete UTF-8 sequence from the tokens so far
    bool first_ = true;
};

}  // namespace tok
