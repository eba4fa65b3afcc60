// Hardware comparison: each option's best plan is the plan search's on that cluster; the Pareto
// front holds exactly the options no other beats on both run time and run cost; budgets mark.
#include <catch2/catch.hpp>

#include <fmt/core.h>

#include <algorithm>
#include <string>
#include <vector>

#include "common/json_reader.hpp"
#include "run/calibration.hpp"
#include "run/compare.hpp"
#include "run/prices.hpp"
#include "tests/test_paths.hpp"

using namespace foresight;
using Catch::Matchers::Contains;

namespace {

strategy::HardwareRow option(const std::string& name, double run_s, double usd) {
  strategy::HardwareRow r;
  r.option = {name, 8};
  strategy::PlanRow best;
  best.run_s = run_s;
  best.usd_run = usd;
  r.best = best;
  return r;
}

strategy::PlanSpace small_space() {
  strategy::PlanSpace s;
  s.tp = {1, 2};
  s.pp = {1};
  s.micro_batch = {2, 4};
  s.recompute = {"none"};
  s.zero = {0};
  s.sequence_parallel = {false};
  return s;
}

}  // namespace

TEST_CASE("the Pareto front: no other option is both no slower and no dearer", "[compare]") {
  std::vector<strategy::HardwareRow> rows{option("a", 10, 100), option("b", 20, 50), option("c", 15, 120),
                                          option("d", 5, -1), option("e", 10, 100), option("f", 30, 50)};
  rows.push_back(strategy::HardwareRow{});  // an option without a plan
  strategy::mark_pareto(rows);
  REQUIRE(rows[0].pareto);        // fastest priced (tied with e: neither beats the other)
  REQUIRE(rows[1].pareto);        // cheapest
  REQUIRE_FALSE(rows[2].pareto);  // a is faster and cheaper
  REQUIRE_FALSE(rows[3].pareto);  // unpriced: never on the front
  REQUIRE(rows[4].pareto);
  REQUIRE_FALSE(rows[5].pareto);  // as cheap as b but slower
  REQUIRE_FALSE(rows[6].pareto);
}

TEST_CASE("each hardware option's best plan is the plan search's on that cluster", "[compare]") {
  const std::string path = test::data_path("scenarios/plan_gpt2.json");
  const auto prices = strategy::load_prices(strategy::default_prices_path());
  strategy::SimulationInputs inputs;
  inputs.collectives = run::default_collective_config();
  inputs.prices = &prices;
  const topo::JsonReader reader(path, sim::ErrorKind::config);
  const auto doc = reader.parse_file();
  strategy::PlanOptions options;
  options.top = 1;
  const std::vector<strategy::HardwareOption> hardware{{"dgx-a100", 8}, {"dgx-h100", 8}, {"dgx-h100", 4}, {"thetagpu", 1000}};
  const auto rows = strategy::compare_hardware(path, doc, hardware, small_space(), options, inputs, 1e-9);
  REQUIRE(rows.size() == 4);
  for (std::size_t i = 0; i < 3; ++i) {
    INFO(hardware[i].cluster << " x " << hardware[i].gpus);
    REQUIRE(rows[i].best.has_value());
    const auto direct = strategy::search_plans(path, {{"cluster.preset", hardware[i].cluster},
                                                      {"cluster.gpus", std::to_string(hardware[i].gpus)}},
                                               small_space(), options, inputs);
    REQUIRE(direct.rows.front().status == strategy::PlanRow::Status::best);
    REQUIRE(rows[i].best->label == direct.rows.front().label);
    REQUIRE(rows[i].best->iteration_s == direct.rows.front().iteration_s);
    // 1000 steps at the iteration time, priced at the table's rate for 8 or 4 GPUs.
    REQUIRE(rows[i].best->run_s == Approx(1000 * rows[i].best->iteration_s).epsilon(1e-12));
    const double rate = prices.find(rows[i].gpu)->usd_per_gpu_hour.value();
    REQUIRE(rows[i].best->usd_run == Approx(rate * hardware[i].gpus * rows[i].best->run_s / 3600.0).epsilon(1e-9));
    REQUIRE_FALSE(rows[i].within_budget);  // a budget of 1e-9 USD
    REQUIRE_FALSE(rows[i].price_basis.empty());
  }
  REQUIRE(rows[0].gpu == "A100-SXM4-40GB");
  REQUIRE(rows[1].gpu == "H100-SXM5-80GB");
  // The H100 node runs the same global batch faster than half of it.
  REQUIRE(rows[1].best->iteration_s < rows[2].best->iteration_s);
  // An option whose cluster cannot be built says why instead of stopping the comparison.
  REQUIRE_FALSE(rows[3].best.has_value());
  REQUIRE_THAT(rows[3].reason, Contains("thetagpu has 192 GPUs"));
}

TEST_CASE("the options' searches run side by side and give what one thread gives", "[compare]") {
  // 3 threads for 4 options: three searches at a time, one thread each; the rows come back in
  // the options' order, each as its search alone finds it (pruning against its best: the same
  // plans simulated as with top 1), and every progress line arrives whole.
  const std::string path = test::data_path("scenarios/plan_gpt2.json");
  strategy::SimulationInputs inputs;
  inputs.collectives = run::default_collective_config();
  const topo::JsonReader reader(path, sim::ErrorKind::config);
  const auto doc = reader.parse_file();
  const std::vector<strategy::HardwareOption> hardware{{"dgx-a100", 8}, {"dgx-h100", 8}, {"dgx-h100", 4}, {"thetagpu", 1000}};
  strategy::PlanOptions serial;
  serial.top = 1;
  serial.jobs = 1;
  const auto one = strategy::compare_hardware(path, doc, hardware, small_space(), serial, inputs);
  strategy::PlanOptions threads = serial;
  threads.jobs = 3;
  threads.top = 50;  // a row shows its best alone: each search ranks its best only, whatever top says
  std::vector<std::string> lines;
  const auto three = strategy::compare_hardware(path, doc, hardware, small_space(), threads, inputs, 0.0,
                                                [&](const std::string& line) { lines.push_back(line); });
  REQUIRE(three.size() == one.size());
  for (std::size_t i = 0; i < one.size(); ++i) {
    INFO(hardware[i].cluster << " x " << hardware[i].gpus);
    REQUIRE(three[i].option.cluster == hardware[i].cluster);
    REQUIRE(three[i].option.gpus == hardware[i].gpus);
    REQUIRE(three[i].best.has_value() == one[i].best.has_value());
    REQUIRE(three[i].reason == one[i].reason);
    REQUIRE(three[i].simulated == one[i].simulated);
    if (one[i].best) {
      REQUIRE(three[i].best->label == one[i].best->label);
      REQUIRE(three[i].best->iteration_s == one[i].best->iteration_s);
    }
  }
  for (const auto& option : hardware) {
    const std::string name = fmt::format("{} x {}: ", option.cluster, option.gpus);
    REQUIRE(std::count(lines.begin(), lines.end(), name + "searching") == 1);
  }
  for (const auto& line : lines) {
    INFO(line);
    REQUIRE(std::count_if(hardware.begin(), hardware.end(), [&](const auto& o) {
              return line.rfind(fmt::format("{} x {}: ", o.cluster, o.gpus), 0) == 0;
            }) == 1);
  }
}
