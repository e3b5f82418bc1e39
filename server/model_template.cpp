// The chat renderer of a loaded model: its own Jinja template (tokenizer.chat_template), or the
// fallback for its tokenizer preset when it has none.
#include "llm/chat_template.h"
#include "server/server.h"

namespace server {

ChatRenderer model_chat_renderer(const llm::Session& session, const std::string& override_source) {
    const llm::ModelInfo& info = session.info();
    std::string source = !override_source.empty() ? override_source
                         : info.chat_template.empty() ? llm::ChatTemplate::fallback_source(info.tokenizer_pre, info.architecture)
                                                    : info.chat_template;
    auto chat_template = std::make_shared<llm::ChatTemplate>(source);
    return [chat_template](const nlohmann::ordered_json& context) { return chat_template->render(context); };
}

}  // namespace server
