// The GGUF reader on real files: the built-in model, every model and vocabulary in ../shared, and
// typed metadata access (conversions that fit, errors that name the key and the file).
#include "common/test_data.h"
#include "gguf/gguf.h"

#include <cmath>
#include <filesystem>

namespace fs = std::filesystem;

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
    CHECK(f->n_parts() == 1);
    CHECK(f->file_size() == fs::file_size(test_data::builtin_model()));
}

TEST_CASE("a missing key names the key and the file") {
    auto f = gguf::File::open(test_data::builtin_model());
    REQUIRE_THROWS_WITH(f->get<uint32_t>(".no_such_key"),
                        Catch::Contains("llama.no_such_key") && Catch::Contains("stories260K.gguf"));
    REQUIRE_THROWS_WITH(f->tensor("no.such.tensor"), Catch::Contains("missing tensor 'no.such.tensor'"));
}

TEST_CASE("typed access converts integers only when the value fits") {
    gguf::Writer w;
    w.set_u32("big", 300);
    w.set_i32("neg", -5);
    w.set_f32("half", 0.5f);
    w.set("u64s", gguf::Value::make_array(gguf::ValueType::UINT64, {gguf::Value::make_uint(gguf::ValueType::UINT64, 1),
                                                                     gguf::Value::make_uint(gguf::ValueType::UINT64, 1ull << 40)}));
    auto bytes = w.bytes();
    auto f = gguf::File::from_memory(bytes.data(), bytes.size(), "typed.gguf");
    CHECK(f->get<uint16_t>("big") == 300);
    CHECK(f->get<int64_t>("big") == 300);
    CHECK(f->get<double>("big") == 300.0);
    CHECK_THROWS_WITH(f->get<uint8_t>("big"), Catch::Contains("'big' has type u32") && Catch::Contains("typed.gguf"));
    CHECK(f->get<int8_t>("neg") == -5);
    CHECK_THROWS_AS(f->get<uint32_t>("neg"), gguf::Error);
    CHECK(f->get<float>("half") == 0.5f);
    CHECK_THROWS_AS(f->get<int32_t>("half"), gguf::Error);
    CHECK_THROWS_AS(f->get<std::string>("half"), gguf::Error);
    CHECK(f->get<std::vector<uint64_t>>("u64s") == std::vector<uint64_t>{1, 1ull << 40});
    CHECK_THROWS_WITH(f->get<std::vector<uint32_t>>("u64s"), Catch::Contains("array of u64"));
    CHECK(f->get_or<uint32_t>("absent", 7) == 7);
}

TEST_CASE("every model and vocabulary in ../shared opens, and every tensor dequantizes to finite values") {
    REQUIRE_SHARED_DATA();
    size_t files = 0, tensors = 0;
    for (const char* dir : {"models", "tokenizers/vocab"}) {
        for (const auto& e : fs::directory_iterator(test_data::shared(dir))) {
            if (e.path().extension() != ".gguf") continue;
            INFO(e.path());
            auto f = gguf::File::open(e.path().string());
            files++;
            CHECK(f->has("tokenizer.ggml.tokens"));
            CHECK(f->file_size() == e.file_size());
            std::vector<float> out;
            for (const gguf::TensorInfo& t : f->tensors()) {
                INFO(t.name);
                const gguf::TypeTraits& tr = gguf::type_traits(t.type);
                REQUIRE(tr.dequantize != nullptr);
                CHECK(t.file_offset % f->alignment() == 0);
                CHECK(t.file_offset + t.n_bytes <= f->file_size());
                out.resize(static_cast<size_t>(t.n_elements()));
                tr.dequantize(t.data, out.data(), t.n_elements());
                size_t non_finite = 0;
                for (float x : out) non_finite += !std::isfinite(x);
                CHECK(non_finite == 0);
                tensors++;
            }
        }
    }
    CHECK(files >= 62);
    CHECK(tensors > 2000);
}
