// tinyllm run: a raw completion of a prompt (or of given token ids), streamed to stdout; --json for
// tools and golden comparisons (prompt ids, generated ids, text, top raw logits per step); --chat
// renders the prompt as a user message through the chat template (--chat-template FILE replaces it).
#include "cli/cli.h"
#include "llm/chat_prompt.h"
#include "llm/reply_stream.h"
#include "llm/session.h"
#include "server/server.h"

#include <nlohmann/json.hpp>

#include <cstdio>
#include <sstream>

namespace cli {

namespace {

const char* USAGE =
    "usage: tinyllm run [-m MODEL] [-p PROMPT | --ids 1,2,3] [-n N] [--temp T] [--top-k K] [--top-p P]\n"
    "                   [--min-p P] [--seed S] [--json] [--top-logits K] [--force 5,17,9] [--kv f16|f32|q8_0|q4_0]\n"
    "                   [--ctx N] [--device NAME] [--grammar FILE | --json-schema FILE]\n"
    "                   [--chat] [--chat-template FILE]\n"
        "  -m, --model M     GGUF model or Hub name OWNER/REPO[:QUANT] (default: the built-in stories260K)\n"
    "  -p, --prompt P    prompt text; BOS is added as the model's add_bos_token says\n"
    "  --ids 1,2,3       prompt token ids instead of text (nothing is added)\n"
    "  -n N              tokens to generate (default 64)\n"
    "  --temp T          temperature (default 0.8; 0 = greedy)\n"
    "  --top-k K, --top-p P, --min-p P   sampling filters (defaults 40, 0.95, 0.05)\n"
    "  --seed S          sampling seed (default 0)\n"
    "  --json            print {\"prompt_ids\",\"ids\",\"text\",\"top_logits\"} instead of streaming text\n"
    "  --top-logits K    with --json: the K largest raw logits of every step\n"
    "  --force 5,17,9    teacher forcing: feed these ids after the prompt instead of the sampled ones\n"
    "  --kv TYPE         KV cache type: f16 (default), f32, q8_0 or q4_0 (blocks of 32 values, 0.53 and 0.28\n"
    "                    of f16's bytes; CPU only, head dims multiples of 32, not MLA models)\n"
    "  --ctx N           context size (default: the model's, at most 4096)\n"
    "  --device NAME     CPU, or AMD / AMD:0 (the first AMD GPU) (default: $TINYLLM_DEVICE, else CPU)\n"
    "  --grammar FILE    constrain the output to a GBNF grammar (llama.cpp's format)\n"
    "  --json-schema FILE  constrain the output to JSON that a JSON Schema accepts\n"
    "  --chat            the prompt is a user message, rendered by the chat template as the server does;\n"
    "                    prints the answer (reasoning and gpt-oss channel markup left out)\n"
    "  --chat-template FILE  with --chat (implied): this Jinja chat template instead of the model's\n";

std::vector<int32_t> parse_ids(Args& args, const std::string& text, const std::string& flag) {
    std::vector<int32_t> ids;
    std::stringstream ss(text);
    std::string item;
    while (std::getline(ss, item, ',')) {
        size_t used = 0;
        long v = -1;
        try {
            v = std::stol(item, &used);
        } catch (const std::exception&) {
            used = 0;
        }
        if (used == 0 || used != item.size() || v < 0) args.usage_error(flag + " needs comma-separated token ids, got '" + text + "'");
        ids.push_back(static_cast<int32_t>(v));
    }
    return ids;
}

}  // namespace

int cmd_run(const std::vector<std::string>& argv) {
    Args args(argv, "run");
    if (args.flag("--help") || args.flag("-h")) {
        std::fputs(USAGE, stdout);
        return 0;
    }
    llm::SessionOptions so;
    so.model_path = builtin_model_path();
    std::string prompt, ids_text, force_text;
    bool have_prompt = args.value("-p", "--prompt", prompt);
    bool have_ids = args.value("--ids", ids_text);
    if (args.value("-m", "--model", so.model_path)) so.model_path = resolve_model(so.model_path);
    so.kv_type = kv_flag(args);
    args.value("--force", force_text);
    args.number("--ctx", so.n_ctx);
    so.device = device_flag(args);
    llm::GenerateOptions go;
    go.max_tokens = 64;
    go.sampling = llm::default_sampling();  // seed 0: the same output every run
    args.number("-n", go.max_tokens);
    sampling_flags(args, go.sampling);
    args.number("--top-logits", go.n_top_logits);
    bool json = args.flag("--json");
    go.grammar = grammar_flags(args);
    const std::string chat_template = chat_template_flag(args);
    const bool chat = args.flag("--chat") || !chat_template.empty();
    if (!args.positionals().empty()) args.usage_error("unexpected argument");
    if (chat && have_ids) args.usage_error("--chat renders text: give -p, not --ids");
    if (have_prompt && have_ids) args.usage_error("give either -p or --ids, not both");
    if (go.max_tokens < 0) args.usage_error("-n must be >= 0");

    auto session = llm::open_session(so);
    const tok::Tokenizer& tk = session->tokenizer();
    // --chat: the prompt as the server's chat completions prepare it, and its reply's router options;
    // else raw text as /v1/completions takes it (the router passes everything through as content)
    llm::PreparedChat prepared;
    prepared.router.parse_reasoning = false;
    if (chat) {
        llm::ChatInput input;
        input.messages.push_back({{"role", "user"}, {"content", prompt}});
        prepared = llm::prepare_chat(server::model_chat_renderer(*session, chat_template), tk, input);
    }
    std::vector<int32_t> prompt_ids = chat ? prepared.ids : have_ids ? parse_ids(args, ids_text, "--ids") : tk.encode(prompt, true, true);
    if (prompt_ids.empty()) prompt_ids.push_back(tk.bos() >= 0 ? tk.bos() : 0);  // an empty prompt starts from BOS
    if (!force_text.empty()) {
        go.forced = parse_ids(args, force_text, "--force");
        go.max_tokens = static_cast<int>(go.forced.size());
        go.stop_at_end = false;
    }

    nlohmann::json top = nlohmann::json::array();
    // the server's reply stream, so the same ids print the same text (--chat: the answer only)
    llm::ReplyStream reply(tk, {}, prepared.router, prompt_ids);
    auto print = [](const std::string& text) {
        std::fwrite(text.data(), 1, text.size(), stdout);
        std::fflush(stdout);
    };
    go.on_token = [&](const llm::TokenStep& s) {
        if (json) {
            nlohmann::json step = nlohmann::json::array();
            for (auto [id, logit] : s.top_logits) step.push_back({id, logit});
            top.push_back(std::move(step));
        } else {
            print(reply.push(s.id).content);
        }
        return true;
    };
    llm::GenerateResult r = session->generate(prompt_ids, go);
    if (json) {
        nlohmann::json out = {{"prompt_ids", prompt_ids}, {"ids", r.ids}, {"text", tk.decode(r.ids)}};
        if (go.n_top_logits > 0) out["top_logits"] = top;
        std::printf("%s\n", out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
    } else {
        print(reply.finish().content);
        std::printf("\n");
    }
    return 0;
}

}  // namespace cli
