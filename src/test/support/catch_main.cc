// Catch2's main, the one every Catch2 test executable links (unit and
// functional tests alike; see src/test/README.md).
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
