// ThetaGPU ResNet-18 / CIFAR-100: the constants fitted on the 2- and 8-GPU rows (data parallel: the
// input rate; GPipe: per-task bookkeeping and GIL-held dispatch) predict the 4- and 6-GPU rows
// within the issues' bounds (10% and 15%), and the stored calibration is what the fit gives.
#include <catch2/catch.hpp>

#include <cmath>
#include <string>

#include "run/scenario.hpp"
#include "run/simulation.hpp"
#include "validate/calibration.hpp"
#include "validate/thetagpu_dataset.hpp"

using namespace foresight;

namespace {

const validate::ThetaDataset& dataset() {
  static const auto d = validate::load_thetagpu_dataset(validate::data_dir() + "/thetagpu_resnet18_cifar100.json");
  return d;
}

const validate::Calibration& stored_calibration() {
  static const auto c = run::load_calibration(run::default_calibration_path());
  return c;
}

strategy::SimulationInputs inputs() {
  strategy::SimulationInputs in;
  in.collectives = run::collective_config(stored_calibration().collectives);
  return in;
}

}  // namespace

TEST_CASE("ThetaGPU DDP: the 4- and 6-GPU runs are predicted within 10%", "[validate]") {
  std::size_t predictions = 0;
  for (const auto& r : validate::evaluate_thetagpu_ddp(dataset(), stored_calibration().thetagpu_ddp, inputs())) {
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
  REQUIRE(fitted.input_rate == Approx(stored_calibration().thetagpu_ddp.input_rate).epsilon(1e-6));
  REQUIRE(stored_calibration().thetagpu_ddp.fitted_on == std::vector<std::string>{"ddp-2gpu", "ddp-8gpu"});
  // Changing a prediction row's measurement changes nothing.
  auto changed = dataset();
  for (auto& r : changed.runs) {
    if (r.role == validate::Role::prediction) r.time_s *= 3;
  }
  REQUIRE(validate::fit_thetagpu_ddp(changed, inputs()).input_rate == Approx(fitted.input_rate).epsilon(1e-12));
  // The example scenario, which README's first command runs, carries the fitted value.
  const auto s = strategy::load_scenario(dataset().ddp_scenario);
  REQUIRE(s.plan.input_rate == Approx(stored_calibration().thetagpu_ddp.input_rate).epsilon(1e-5));
}

TEST_CASE("ThetaGPU GPipe: the 4- and 6-GPU runs are predicted within 15%, constants fitted on 2 and 8", "[validate]") {
  const auto& g = stored_calibration().thetagpu_gpipe;
  REQUIRE(g.fitted_on == std::vector<std::string>{"gpipe-2gpu", "gpipe-8gpu"});
  std::size_t predictions = 0;
  for (const auto& r : validate::evaluate_thetagpu_gpipe(dataset(), stored_calibration().thetagpu_ddp.input_rate, g, inputs())) {
    INFO(r.run->id << " measured " << r.run->time_s << " s, predicted " << r.predicted_s << " s");
    REQUIRE(r.report.gpus == r.run->gpus);
    if (r.run->role == validate::Role::prediction) {
      REQUIRE(std::abs(r.error_pct) <= 15.0);
      ++predictions;
    }
  }
  REQUIRE(predictions == 2);
  // The example carries the stored constants and the data-parallel input rate.
  const auto s = strategy::load_scenario(dataset().gpipe_scenario);
  REQUIRE(s.plan.microbatch_overhead == g.microbatch_overhead);
  REQUIRE(s.plan.dispatch_gil == g.dispatch_gil);
  REQUIRE(s.plan.input_rate == Approx(stored_calibration().thetagpu_ddp.input_rate).epsilon(1e-5));
}

TEST_CASE("ThetaGPU GPipe: the stored constants are the grid fit of the calibration rows only", "[validate]") {
  const auto fitted = validate::fit_thetagpu_gpipe(dataset(), stored_calibration().thetagpu_ddp.input_rate, inputs());
  REQUIRE(fitted.microbatch_overhead == stored_calibration().thetagpu_gpipe.microbatch_overhead);
  REQUIRE(fitted.dispatch_gil == stored_calibration().thetagpu_gpipe.dispatch_gil);
  auto changed = dataset();
  for (auto& r : changed.runs) {
    if (r.role == validate::Role::prediction) r.time_s /= 4;
  }
  const auto again = validate::fit_thetagpu_gpipe(changed, stored_calibration().thetagpu_ddp.input_rate, inputs());
  REQUIRE(again.microbatch_overhead == fitted.microbatch_overhead);
  REQUIRE(again.dispatch_gil == fitted.dispatch_gil);
}
