// StreamDecoder: turns generated ids into text as they come, never splitting a UTF-8 sequence.
#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode.h"

namespace tok {

namespace {

const char REPLACEMENT[] = "\xef\xbf\xbd";  // U+FFFD

// Moves the complete code points at the front of `pending` to the result; bytes that cannot start or
// continue a valid sequence become U+FFFD; a valid but truncated sequence at the end stays pending.
std::string take_complete(std::string& pending) {
    std::string out;
    size_t i = 0;
    while (i < pending.size()) {
        size_t len;
        const uint32_t cp = unicode::decode_utf8(pending.data() + i, pending.size() - i, len);
        if (cp < unicode::INVALID_BASE) {
            out.append(pending, i, len);
        } else if (unicode::is_utf8_prefix(pending.data() + i, pending.size() - i)) {
            break;  // wait for the next token
        } else {
            out += REPLACEMENT;
        }
        i += len;
    }
    pending.erase(0, i);
    return out;
}

}  // namespace

std::string StreamDecoder::push(int32_t id) {
    pending_ += tokenizer_.token_text(id, first_);
    first_ = false;
    return take_complete(pending_);
}

std::string StreamDecoder::flush() {
    std::string out = take_complete(pending_);
    for (size_t i = 0; i < pending_.size(); i++) out += REPLACEMENT;  // a sequence that never completed
    pending_.clear();
    return out;
}

}  // namespace tok
