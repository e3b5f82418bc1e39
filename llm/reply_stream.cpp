// Streaming a reply's text; see reply_stream.h.
#include "llm/reply_stream.h"

#include <algorithm>

namespace llm {

size_t incomplete_utf8_suffix(std::string_view text) {
    // Look back at most 3 bytes for a lead byte whose sequence runs past the end.
    for (size_t back = 1; back <= std::min<size_t>(3, text.size()); back++) {
        unsigned char c = static_cast<unsigned char>(text[text.size() - back]);
        if ((c & 0xC0) == 0x80) continue;  // continuation byte: keep looking for the lead
        size_t need = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
        return need > back ? back : 0;
    }
    return 0;
}

StopScanner::StopScanner(std::vector<std::string> stops) {
    for (auto& s : stops)
        if (!s.empty()) stops_.push_back(std::move(s));
}

std::string StopScanner::push(std::string_view text) {
    if (matched_) return "";
    held_ += text;
    size_t first_match = std::string::npos;
    for (const auto& s : stops_)
        if (size_t at = held_.find(s); at < first_match) {
            first_match = at;
            matched_stop_ = s;
        }
    if (first_match != std::string::npos) {
        matched_ = true;
        std::string out = held_.substr(0, first_match);
        held_.clear();
        return out;
    }
    size_t hold = 0;  // longest tail that is the beginning of some stop string
    for (const auto& s : stops_)
        for (size_t n = std::min(held_.size(), s.size() - 1); n > hold; n--)
            if (held_.compare(held_.size() - n, n, s, 0, n) == 0) {
                hold = n;
                break;
            }
    std::string out = held_.substr(0, held_.size() - hold);
    held_.erase(0, held_.size() - hold);
    return out;
}

std::string StopScanner::finish() {
    std::string out;
    if (!matched_) out.swap(held_);
    return out;
}

ReplyStream::ReplyStream(const tok::Tokenizer& tokenizer, std::vector<std::string> stops, RouterOptions router,
                         const std::vector<int32_t>& prompt)
    : tokenizer_(tokenizer), decoder_(tokenizer, !prompt.empty()), stop_(std::move(stops)), router_(std::move(router)) {}

RoutedText ReplyStream::push(int32_t id) {
    if (stop_.matched() || tokenizer_.is_end(id)) return {};
    if (tokenizer_.is_control(id) && !router_.reads_marker(tokenizer_.piece(id))) return {};  // shown as nothing
    return router_.push(stop_.push(decoder_.push(id)));
}

RoutedText ReplyStream::finish() {
    RoutedText out;
    if (!stop_.matched()) out = router_.push(stop_.push(decoder_.flush()));
    out.append(router_.push(stop_.finish()));
    out.append(router_.finish());
    return out;
}

}  // namespace llm
