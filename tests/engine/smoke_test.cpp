#include "engine/tensor.h"
#include <catch2/catch.hpp>
using namespace engine;
TEST_CASE("smoke") {
    Tensor a = Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3});
    Tensor b = Tensor::from_vector<float>({10, 20, 30}, {3});
    auto c = (a + b).to_vector<float>();
    REQUIRE(c == std::vector<float>{11, 22, 33, 14, 25, 36});
    auto s = a.sum(1).to_vector<float>();
    REQUIRE(s == std::vector<float>{6, 15});
    auto t = a.transpose().contiguous().to_vector<float>();
    REQUIRE(t == std::vector<float>{1, 4, 2, 5, 3, 6});
}
