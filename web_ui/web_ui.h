// The web chat page (web_ui/index.html), embedded into the binary at build time.
#pragma once

#include <string_view>

namespace web_ui {

std::string_view index_html();  // the whole page: HTML, CSS and script inline, no external resources

}  // namespace web_ui
