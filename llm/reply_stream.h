// A reply as it streams: generated ids become text that holds only complete UTF-8 code points, stop
// strings end it (never leaked, also when split across tokens), and the stream router splits it into
// content, reasoning and tool calls. The server, the terminal chat and `tinyllm run` share it.
#pragma once

#include "llm/stream_router.h"
#include "tokenizer/tokenizer.h"

#include <string>
#include <string_view>
#include <vector>

namespace llm {

// Holds back text that may be the start of a stop string; cuts the text where one matches.
class StopScanner {
public:
    explicit StopScanner(std::vector<std::string> stops);
    std::string push(std::string_view text);  // text that is certainly not part of a stop string
    std::string finish();                      // the held tail (when no stop string matched)
    bool matched() const { return matched_; }
    const std::string& matched_stop() const { return matched_stop_; }  // the stop string that matched

private:
    std::vector<std::string> stops_;
    std::string matched_stop_;
    std::string held_;
    bool matched_ = false;
};

// Bytes at the end of `text` that start a UTF-8 sequence the text does not complete.
size_t incomplete_utf8_suffix(std::string_view text);

class ReplyStream {
public:
    // A reply after a non-empty `prompt` continues its text: the first word keeps its leading space,
    // which SentencePiece detokenizers drop at the start of a text.
    ReplyStream(const tok::Tokenizer& tokenizer, std::vector<std::string> stops, RouterOptions router,
                const std::vector<int32_t>& prompt = {});
    RoutedText push(int32_t id);  // end-of-generation and control ids add no text
    RoutedText finish();
    bool stopped() const { return stop_.matched(); }  // a stop string matched: generation should end
    const std::string& stop_string() const { return stop_.matched_stop(); }

private:
    const tok::Tokenizer& tokenizer_;
    tok::StreamDecoder decoder_;  // ids -> whole UTF-8 code points
    StopScanner stop_;
    StreamRouter router_;
};

}  // namespace llm
