// The one Catch2 main shared by all test executables.
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
