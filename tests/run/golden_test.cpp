// Stored golden fingerprints: a change of event order, event count or iteration time in any of a
// few scenarios (every strategy family, both network models) fails here, so a refactoring that
// claims "no change of any answer" is checked against recorded runs, not only against itself.
#include <catch2/catch.hpp>

#include <fmt/format.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "run/calibration.hpp"
#include "run/scenario.hpp"
#include "run/simulation.hpp"
#include "tests/test_paths.hpp"

using namespace foresight;
using nlohmann::json;

TEST_CASE("stored scenarios keep their fingerprint, event count and iteration time", "[golden]") {
  std::ifstream in(test::data_path("golden/fingerprints.json"));
  const json golden = json::parse(in);
  REQUIRE(golden.at("cases").size() >= 8);
  strategy::SimulationInputs inputs;
  inputs.collectives = run::default_collective_config();
  for (const json& c : golden.at("cases")) {
    const std::string scenario = c.at("scenario").get<std::string>();
    std::vector<strategy::Override> sets;
    for (const json& s : c.at("set")) sets.push_back(strategy::parse_override(s.get<std::string>()));
    INFO(scenario << (sets.empty() ? "" : " with " + c.at("set").dump()));
    const auto out = strategy::simulate_scenario(strategy::load_scenario(test::source_path(scenario), sets), inputs);
    CHECK(out.report.events == c.at("events").get<std::uint64_t>());
    CHECK(fmt::format("{:016x}", out.report.fingerprint) == c.at("fingerprint").get<std::string>());
    // The JSON report prints the shortest text that reads back as the same double: exact.
    CHECK(out.report.iteration_time_s == c.at("iteration_time_s").get<double>());
  }
}
