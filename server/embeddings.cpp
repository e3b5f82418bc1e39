// Embeddings: OpenAI's /v1/embeddings (input as text, texts or token ids; float or base64; dimensions)
// and ollama's /api/embed, over Session::embed (final hidden states, pooled, L2-normalized).
#include "server/server_impl.h"

#include <chrono>
#include <cmath>
#include <cstring>

namespace server {

namespace {

std::vector<int32_t> token_ids(const json& ids, const tok::Tokenizer& tokenizer) {
    std::vector<int32_t> out;
    for (const auto& id : ids) {
        if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() >= tokenizer.n_vocab())
            throw invalid("input", "token ids must be integers below " + std::to_string(tokenizer.n_vocab()));
        out.push_back(id.get<int32_t>());
    }
    return out;
}

std::string base64(const std::vector<float>& v) {
    static constexpr char ALPHABET[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    std::string bytes(v.size() * sizeof(float), '\0');
    std::memcpy(bytes.data(), v.data(), bytes.size());  // little-endian float32, as OpenAI's clients decode it
    std::string out;
    for (size_t i = 0; i < bytes.size(); i += 3) {
        uint32_t n = uint32_t(uint8_t(bytes[i])) << 16;
        if (i + 1 < bytes.size()) n |= uint32_t(uint8_t(bytes[i + 1])) << 8;
        if (i + 2 < bytes.size()) n |= uint32_t(uint8_t(bytes[i + 2]));
        out += ALPHABET[(n >> 18) & 63];
        out += ALPHABET[(n >> 12) & 63];
        out += i + 1 < bytes.size() ? ALPHABET[(n >> 6) & 63] : '=';
        out += i + 2 < bytes.size() ? ALPHABET[n & 63] : '=';
    }
    return out;
}

}  // namespace

EmbedJob parse_embeddings_request(const json& body, const llm::Session& session, const std::string& model_name, bool ollama) {
    EmbedJob job;
    job.ollama = ollama;
    job.model = present(body, "model") && body["model"].is_string() ? body["model"].get<std::string>() : model_name;
    const tok::Tokenizer& tokenizer = session.tokenizer();
    if (!present(body, "input")) throw invalid("input", "is required");
    const json& input = body["input"];
    const int n_ctx = session.info().n_ctx;
    const bool truncate = ollama && boolean(body, "truncate", true);  // ollama cuts long inputs to the context by default
    auto add = [&](std::vector<int32_t> ids) {
        if (ids.empty()) throw invalid("input", "holds an empty input");
        if (int(ids.size()) > n_ctx) {
            if (!truncate)
                throw ApiError(400, "[server] an input is " + std::to_string(ids.size()) + " tokens, more than the context of " +
                                        std::to_string(n_ctx), "input", "context_length_exceeded");
            ids.resize(size_t(n_ctx));
        }
        job.inputs.push_back(std::move(ids));
    };
    // Inputs are tokenized as llama-server does: with the vocabulary's BOS/EOS, special tokens parsed.
    auto text = [&](const json& t) { add(tokenizer.encode(t.get<std::string>(), true, true)); };
    if (input.is_string()) text(input);
    else if (input.is_array() && !input.empty() && input[0].is_number()) add(token_ids(input, tokenizer));
    else if (input.is_array() && !input.empty()) {
        for (const auto& item : input) {
            if (item.is_string()) text(item);
            else if (item.is_array() && !ollama) add(token_ids(item, tokenizer));
            else throw invalid("input", ollama ? "must be a string or a list of strings" : "must be a string, a list of strings or token id lists");
        }
    } else {
        throw invalid("input", "must be a string or a non-empty list");
    }
    if (present(body, "encoding_format")) {
        const json& f = body["encoding_format"];
        if (f != "float" && f != "base64") throw invalid("encoding_format", "must be float or base64");
        job.base64 = f == "base64";
    }
    job.dimensions = int(integer(body, "dimensions", 1, session.info().n_embd, 0));
    return job;
}

std::vector<std::vector<float>> run_embeddings(llm::Session& session, const EmbedJob& job, llm::Pooling pooling) {
    std::vector<std::vector<float>> out;
    for (const auto& ids : job.inputs) {
        std::vector<float> v = session.embed(ids, pooling);
        if (job.dimensions > 0 && size_t(job.dimensions) < v.size()) {
            // Matryoshka-style: the leading dims, normalized again (what `dimensions` means for the models that allow it)
            v.resize(size_t(job.dimensions));
            double norm = 0;
            for (float x : v) norm += double(x) * x;
            for (float& x : v) x = norm > 0 ? float(x / std::sqrt(norm)) : 0.0f;
        }
        out.push_back(std::move(v));
    }
    return out;
}

json embeddings_response(const EmbedJob& job, const std::vector<std::vector<float>>& vectors, double ms) {
    size_t n_tokens = 0;
    for (const auto& ids : job.inputs) n_tokens += ids.size();
    if (job.ollama)
        return {{"model", job.model}, {"embeddings", vectors}, {"total_duration", int64_t(ms * 1e6)}, {"load_duration", 0},
                {"prompt_eval_count", n_tokens}};
    json data = json::array();
    for (size_t i = 0; i < vectors.size(); i++)
        data.push_back({{"object", "embedding"}, {"index", i}, {"embedding", job.base64 ? json(base64(vectors[i])) : json(vectors[i])}});
    return {{"object", "list"}, {"data", data}, {"model", job.model}, {"usage", {{"prompt_tokens", n_tokens}, {"total_tokens", n_tokens}}}};
}

}  // namespace server
