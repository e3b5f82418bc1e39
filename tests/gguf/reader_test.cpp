// The GGUF reader on the built-in model.
#include "common/test_data.h"
#include "gguf/gguf.h"

TEST_CASE("the built-in stories260K opens with its metadata and tensors") {
    auto f = gguf::File::open(test_data::builtin_model());
    CHECK(f->version() == 3);
    CHECK(f->architecture() == "llama");
    CHECK(f->get<uint32_t>(".block_count") == 5);
    CHECK(f->get<uint32_t>("llama.embedding_length") == 64);
    CHECK(f->get<std::string>("tokenizer.ggml.model") == "llama");
    CHECK(f->get<std::vector<std::string>>("tokenizer.ggml.tokens").size() == 512);
    const auto& emb = f->tensor("token_embd.weight");
    CHECK(emb.dims == std::vector<int64_t>{64, 512});
    CHECK(emb.type == gguf::Type::F32);
}

TEST_CASE("a missing key names the key and the file") {
    auto f = gguf::File::open(test_data::builtin_model());
    REQUIRE_THROWS_WITH(f->get<uint32_t>(".no_such_key"),
                        Catch::Contains("llama.no_such_key") && Catch::Contains("stories260K.gguf"));
}
