// ThetaGPU ResNet-18 / CIFAR-100 with DDP: the input rate fitted on the 2- and 8-GPU rows predicts
// the 4- and 6-GPU rows within 10% (the bound).
#include <catch2/catch.hpp>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "strategies/scenario.hpp"
#include "strategies/simulation.hpp"
#include "validate/collective_calibration.hpp"
#include "validate/thetagpu_dataset.hpp"

using namespace foresight;

namespace {

const validate::ThetaDataset& dataset() {
  static const auto d = validate::load_thetagpu_dataset(validate::data_dir() + "/thetagpu_resnet18_cifar100.json");
  return d;
}

strategy::SimulationInputs inputs() {
  strategy::SimulationInputs in;
  in.collectives = validate::default_collective_config();
  return in;
}

const validate::DdpCalibration& stored() {
  static const auto c = validate::load_ddp_calibration(validate::data_dir() + "/thetagpu_ddp_calibration.json");
  return c;
}

}  // namespace

TEST_CASE("ThetaGPU DDP: the 4- and 6-GPU runs are predicted within 10%", "[validate]") {
  std::size_t predictions = 0;
  for (const auto& r : validate::evaluate_thetagpu_ddp(dataset(), stored(), inputs())) {
    INFO(r.run->id << " measured " << r.run->time_s << " s, predicted " << r.predicted_s << " s");
    if (r.run->role == validate::Role::prediction) {
      REQUIRE(std::abs(r.error_pct) <= 10.0);
      ++predictions;
    }
  }
  REQUIRE(predictions == 2);
}

TEST_CASE("ThetaGPU DDP: the stored input rate is the fit of the calibration rows only", "[validate]") {
  const auto fitted = validate::fit_thetagpu_ddp(dataset(), inputs());
  REQUIRE(fitted.input_rate == Approx(stored().input_rate).epsilon(1e-6));
  REQUIRE(stored().fitted_on == std::vector<std::string>{"ddp-2gpu", "ddp-8gpu"});
  // Changing a prediction row's measurement changes nothing.
  auto changed = dataset();
  for (auto& r : changed.runs) {
    if (r.role == validate::Role::prediction) r.time_s *= 3;
  }
  REQUIRE(validate::fit_thetagpu_ddp(changed, inputs()).input_rate == Approx(fitted.input_rate).epsilon(1e-12));
  // The example scenario, which README's first command runs, carries the fitted value.
  const auto s = strategy::load_scenario(dataset().ddp_scenario);
  REQUIRE(s.plan.input_rate == Approx(stored().input_rate).epsilon(1e-5));
}

TEST_CASE("ThetaGPU GPipe: the 4- and 6-GPU runs are predicted within 15%, constants fitted on 2 and 8", "[validate]") {
  // The example is validate/data's GPipe calibration applied to the torchgpipe-style plan.
  std::string path = dataset().ddp_scenario;
  path.replace(path.find("ddp"), 3, "gpipe");
  const auto calibration = nlohmann::json::parse(std::ifstream(validate::data_dir() + "/thetagpu_gpipe_calibration.json"));
  REQUIRE(calibration["calibration_rows"][0]["gpus"] == 2);
  REQUIRE(calibration["calibration_rows"][1]["gpus"] == 8);
  const auto measured = nlohmann::json::parse(std::ifstream(validate::data_dir() + "/thetagpu_resnet18_cifar100.json"));
  std::size_t checked = 0;
  for (const auto& run : measured["runs"]) {
    if (run["strategy"] != "pipeline_gpipe") continue;
    const int gpus = run["gpus"].get<int>();
    if (gpus != 4 && gpus != 6) continue;
    const auto s = strategy::load_scenario(path, {{"cluster.gpus", std::to_string(gpus)}});
    REQUIRE(s.plan.pp == gpus);
    const auto out = strategy::simulate_scenario(s, inputs());
    const double m = run["time_s"].get<double>();
    INFO(gpus << " GPUs: measured " << m << " s, predicted " << out.report.run_time_s << " s");
    REQUIRE(std::abs(out.report.run_time_s - m) / m <= 0.15);
    ++checked;
  }
  REQUIRE(checked == 2);
}
