// The JSON reader every input goes through: nesting is bounded before anything recurses over a
// document, and only regular files of bounded size are read (issue 25's crash and unbounded reads).
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <string>

#include "common/error.hpp"
#include "common/json_reader.hpp"

using namespace foresight;
using Catch::Matchers::Contains;

TEST_CASE("JSON nested past the limit is an error, not a stack overflow", "[common]") {
  const topo::JsonReader r("deep.json", sim::ErrorKind::config);
  const auto nested = [](int depth) { return std::string(depth, '[') + std::string(depth, ']'); };
  // 200,000 levels crashed `foresight simulate` (SIGSEGV in nlohmann's dump, showing the value in
  // an error message); now the parse stops at the limit and names the file.
  REQUIRE_THROWS_AS(r.parse("{\"model\": " + nested(200000) + "}"), sim::ConfigError);
  REQUIRE_THROWS_WITH(r.parse(nested(topo::JsonReader::kMaxDepth + 1)),
                      Contains("deep.json") && Contains("at most 64 levels"));
  // Exactly at the limit: depth 0 is the outer array, so kMaxDepth levels parse.
  REQUIRE(r.parse(nested(topo::JsonReader::kMaxDepth)).is_array());
  // Objects count as arrays do.
  std::string objects;
  for (int i = 0; i < 100; ++i) objects += "{\"a\":";
  objects += "1" + std::string(100, '}');
  REQUIRE_THROWS_WITH(r.parse(objects), Contains("levels deep"));
}

TEST_CASE("brackets inside strings do not count as nesting; escaped quotes do not end a string", "[common]") {
  const topo::JsonReader r("strings.json", sim::ErrorKind::config);
  const std::string brackets(200, '[');
  REQUIRE(r.parse("{\"name\": \"" + brackets + "\"}")["name"].get<std::string>() == brackets);
  // An escaped quote keeps the string open, so the brackets after it are still text; an escaped
  // backslash closes it, so the brackets after it nest.
  REQUIRE(r.parse("[\"\\\"" + brackets + "\"]")[0].get<std::string>() == "\"" + brackets);
  REQUIRE_THROWS_WITH(r.parse("[\"\\\\\", " + brackets + std::string(200, ']') + "]"), Contains("levels deep"));
}

TEST_CASE("a number beyond a double's range is the caller's error, not nlohmann's out_of_range", "[common]") {
  // Found by fuzz_profile_db (fuzz/corpus/profile_db/number-overflow.ConfigError): "6.688e8388608"
  // escaped JsonReader::parse as nlohmann's out_of_range.406, for every JSON input.
  REQUIRE_THROWS_AS(topo::JsonReader("big.json", sim::ErrorKind::trace).parse("{\"ts\": 6.688e8388608}"), sim::TraceError);
  REQUIRE_THROWS_WITH(topo::JsonReader("big.json", sim::ErrorKind::config).parse("[1e400]"),
                      Contains("big.json") && Contains("1e400"));
  REQUIRE(topo::JsonReader("big.json", sim::ErrorKind::config).parse("[1e300]")[0].get<double>() == 1e300);
}

TEST_CASE("only regular files are read: a device is refused before reading", "[common]") {
  if (std::filesystem::exists("/dev/zero")) {
    const topo::JsonReader zero("/dev/zero", sim::ErrorKind::model);
    REQUIRE_THROWS_AS(zero.parse_file(), sim::ModelError);
    REQUIRE_THROWS_WITH(zero.parse_file(), Contains("/dev/zero") && Contains("regular file"));
  }
  const auto dir = std::filesystem::temp_directory_path();
  REQUIRE_THROWS_WITH(topo::JsonReader(dir.string(), sim::ErrorKind::config).parse_file(), Contains("regular file"));
  const auto ok = dir / "json-reader-ok.json";
  std::ofstream(ok) << "{\"a\": [1, 2]}";
  REQUIRE(topo::JsonReader(ok.string(), sim::ErrorKind::config).parse_file()["a"].size() == 2);
  REQUIRE_THROWS_WITH(topo::JsonReader((dir / "no-such-file.json").string(), sim::ErrorKind::config).parse_file(),
                      Contains("cannot open"));
}
