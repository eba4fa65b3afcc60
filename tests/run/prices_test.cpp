// Cost and energy: GPU-hours at each GPU's price, and hours at its board and server power.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "common/error.hpp"
#include "run/calibration.hpp"
#include "run/prices.hpp"
#include "run/scenario.hpp"
#include "run/simulation.hpp"
#include "tests/test_paths.hpp"
#include "topologies/gpu_spec.hpp"

using namespace foresight;
using Catch::Matchers::Contains;
using nlohmann::json;

namespace {

strategy::SimulationOutput simulate_priced(const json& cluster, const strategy::PriceTable& prices) {
  const json doc{{"model", {{"name", "resnet18-cifar"}}},
                 {"cluster", cluster},
                 {"plan", {{"dp", 8}, {"micro_batch", 64}}},
                 {"workload", {{"steps", 100}}}};
  strategy::SimulationInputs inputs;
  inputs.collectives = run::default_collective_config();
  inputs.prices = &prices;
  return strategy::simulate_scenario(strategy::parse_scenario(doc, "priced.json"), inputs);
}

}  // namespace

TEST_CASE("the stored price table names catalog GPUs, each with its source and basis", "[prices]") {
  const auto table = strategy::load_prices(strategy::default_prices_path());
  // Every model but the PCIe boards (A100, H100), whose servers have no citable system power.
  REQUIRE(table.gpus.size() == topo::gpu_catalog().size() - 2);
  REQUIRE(table.find("A100-PCIE-40GB") == nullptr);
  REQUIRE(table.find("H100-PCIE-80GB") == nullptr);
  for (const auto& g : table.gpus) {
    INFO(g.gpu);
    REQUIRE(g.gpu_watts > 0.0);
    REQUIRE(g.server_watts_per_gpu > 0.0);
    REQUIRE_FALSE(g.source.empty());
    REQUIRE_FALSE(g.basis.empty());
    // A price, or the basis says there is none (and the source says why).
    if (g.usd_per_gpu_hour) {
      REQUIRE(*g.usd_per_gpu_hour > 0.0);
    } else {
      REQUIRE(g.basis == "unpriced");
      REQUIRE_THAT(g.source, Catch::Matchers::Contains("no price"));
    }
  }
  // A100 40 GB, H100 and H200 share one basis (one AWS table), so they compare like with like.
  REQUIRE(table.find("H100-SXM5-80GB")->basis.rfind("AWS Capacity Blocks", 0) == 0);
  REQUIRE(table.find("H200-SXM-141GB")->basis.rfind("AWS Capacity Blocks", 0) == 0);
  REQUIRE(table.find("A100-SXM4-40GB")->basis.rfind("AWS Capacity Blocks", 0) == 0);
  // DGX B200: (14.3 kW - 8 x 1000 W) / 8 of the server per GPU.
  REQUIRE(table.find("B200-SXM-180GB")->server_watts_per_gpu == Approx((14300.0 - 8 * 1000.0) / 8));
}

TEST_CASE("a run's cost is its GPU-hours at the price, its energy its hours at the watts", "[prices]") {
  const auto table = strategy::load_prices(strategy::default_prices_path());
  const auto out = simulate_priced(json{{"preset", "dgx-a100"}, {"gpus", 8}}, table);
  const auto& r = out.report;
  const auto* a100 = table.find("A100-SXM4-40GB");
  REQUIRE(a100 != nullptr);
  REQUIRE(r.cost.priced);
  REQUIRE(r.cost.gpu_hours_run == Approx(8 * r.run_time_s / 3600.0).epsilon(1e-12));
  REQUIRE(r.cost.usd_run == Approx(8 * *a100->usd_per_gpu_hour * r.run_time_s / 3600.0).epsilon(1e-12));
  REQUIRE(r.cost.usd_per_iteration == Approx(r.cost.usd_run / 100.0).epsilon(1e-9));
  REQUIRE(r.cost.kwh_run ==
          Approx(8 * (a100->gpu_watts + a100->server_watts_per_gpu) * r.run_time_s / 3.6e6).epsilon(1e-12));
}

TEST_CASE("mixed GPUs add their own prices; a GPU the table lacks leaves the run unpriced, said", "[prices]") {
  const auto table = strategy::load_prices(strategy::default_prices_path());
  const auto mixed = simulate_priced(json{{"topology", test::data_path("topologies/mixed-a100-v100.json")}}, table);
  const auto& r = mixed.report;
  const double per_hour = 4 * *table.find("A100-SXM4-80GB")->usd_per_gpu_hour + 4 * *table.find("V100-SXM2-32GB")->usd_per_gpu_hour;
  REQUIRE(r.cost.usd_run == Approx(per_hour * r.run_time_s / 3600.0).epsilon(1e-12));
  strategy::PriceTable only_v100 = table;
  std::erase_if(only_v100.gpus, [](const strategy::GpuPrice& g) { return g.gpu != "V100-SXM2-32GB"; });
  const auto unpriced = simulate_priced(json{{"topology", test::data_path("topologies/mixed-a100-v100.json")}}, only_v100);
  REQUIRE_FALSE(unpriced.report.cost.priced);
  REQUIRE_THAT(unpriced.report.cost.note, Contains("A100-SXM4-80GB has no entry"));
}

TEST_CASE("a bad price file is refused with its file, pointer and what was expected", "[prices]") {
  const auto bad = [](const char* name) { return test::data_path(std::string("bad/prices/") + name); };
  REQUIRE_THROWS_WITH(strategy::load_prices(bad("unknown_gpu.json")),
                      Contains("/gpus/0/gpu") && Contains("expected a catalog GPU"));
  REQUIRE_THROWS_WITH(strategy::load_prices(bad("negative_price.json")),
                      Contains("/gpus/0/usd_per_gpu_hour") && Contains("expected a number >= 0, found -1"));
  REQUIRE_THROWS_WITH(strategy::load_prices(bad("unknown_key.json")), Contains("unknown key \"usd_per_hour\""));
}
