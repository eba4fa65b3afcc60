// foresight calibrate-collectives: refit the collective calibration on the dataset's calibration
// cases and show every case's prediction error.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>

#include "cli/commands.hpp"
#include "sim/error.hpp"
#include "cli/inputs.hpp"
#include "validate/collective_fit.hpp"
#include "validate/thetagpu_dataset.hpp"

namespace foresight::cli {
namespace {

struct CalibrateOptions {
  std::string dataset;
  std::string write;
  bool write_default = false;
  std::string network = "flow";
};

int run_calibrate(const CalibrateOptions& o) {
  const std::string path = o.dataset.empty() ? validate::data_dir() + "/nccl_busbw.json" : o.dataset;
  const auto dataset = validate::load_nccl_dataset(path);
  const auto file = validate::fit_dataset(dataset);
  std::string text = fmt::format("# collective calibration fitted on {}\n# rule: {}\n", path, dataset.calibration_rule);
  for (const auto& rec : file.profiles) {
    const auto& c = rec.calibration;
    text += fmt::format("# sm{}: launch {:.3f} us, latency scale {:.4f}, efficiency LL {:.4f} LL128 {:.4f} Simple {:.4f}\n",
                        rec.compute_capability, c.launch_us, c.latency_scale, c.efficiency[0], c.efficiency[1],
                        c.efficiency[2]);
  }
  const auto results = validate::evaluate(dataset, validate::collective_config(file),
                                          sim::parse_network_kind(o.network, "--network"));
  text += fmt::format("#{:<42} {:<11} {:>10} {:>10} {:>8}  {}\n", "case", "role", "measured", "predicted", "error",
                      "algorithm");
  struct Worst {
    double from_1m = 0.0;
    double from_64m = 0.0;
    int n = 0;
  };
  std::map<std::string, Worst> worst;
  for (const auto& r : results) {
    text += fmt::format(" {:<42} {:<11} {:>10.2f} {:>10.2f} {:>7.1f}%  {}/{}\n", r.point->id, validate::to_string(r.point->role),
                        r.point->busbw_GBps, r.predicted_busbw_GBps, r.error_pct, r.algorithm, r.protocol);
    if (r.point->role != validate::Role::prediction) continue;
    Worst& w = worst[r.point->series.empty() ? "points" : r.point->series];
    ++w.n;
    if (r.point->size_bytes >= 1 << 20) w.from_1m = std::max(w.from_1m, std::abs(r.error_pct));
    if (r.point->size_bytes >= 64 << 20) w.from_64m = std::max(w.from_64m, std::abs(r.error_pct));
  }
  for (const auto& [name, w] : worst) {
    text += fmt::format("# {}: {} predictions, worst |error| from 1 MiB {:.1f}%, from 64 MiB {:.1f}%\n", name, w.n,
                        w.from_1m, w.from_64m);
  }
  std::fputs(text.c_str(), stdout);
  if (o.write_default || !o.write.empty()) {
    const std::string out = o.write.empty() ? validate::default_calibration_path() : o.write;
    emit(out, validate::to_json_text(file));
    fmt::print("# wrote {}\n", out);
  }
  return 0;
}

struct ThetaOptions {
  std::string dataset;
  bool write_default = false;
  ScenarioFlags flags;
};

int run_calibrate_thetagpu(const ThetaOptions& o) {
  const std::string path = o.dataset.empty() ? validate::data_dir() + "/thetagpu_resnet18_cifar100.json" : o.dataset;
  const auto d = validate::load_thetagpu_dataset(path);
  const auto inputs = o.flags.simulation_inputs();
  const auto c = validate::fit_thetagpu_ddp(d, inputs);
  fmt::print("# ThetaGPU ResNet-18 DDP: input_rate {:.2f} samples/s per process, fitted on", c.input_rate);
  for (const auto& id : c.fitted_on) fmt::print(" {}", id);
  fmt::print("\n#{:<10} {:<11} {:>10} {:>10} {:>8}\n", "run", "role", "measured", "predicted", "error");
  for (const auto& r : validate::evaluate_thetagpu_ddp(d, c, inputs)) {
    fmt::print(" {:<10} {:<11} {:>9.2f}s {:>9.2f}s {:>7.1f}%\n", r.run->id, validate::to_string(r.run->role),
               r.run->time_s, r.predicted_s, r.error_pct);
  }
  if (o.write_default) {
    const std::string out = validate::data_dir() + "/thetagpu_ddp_calibration.json";
    emit(out, validate::to_json_text(c));
    fmt::print("# wrote {}\n", out);
  }
  return 0;
}

}  // namespace

void add_calibrate_command(CLI::App& app, Runner& run) {
  auto t = std::make_shared<ThetaOptions>();
  CLI::App* theta = app.add_subcommand("calibrate-thetagpu-ddp",
                                       "Fit the ThetaGPU DDP input rate on the 2- and 8-GPU rows; predict the others");
  theta->add_option("--dataset", t->dataset, "Dataset file (default: validate/data/thetagpu_resnet18_cifar100.json)");
  theta->add_flag("--write-default", t->write_default, "Write the fit over the stored calibration file");
  t->flags.add_to(*theta, false);
  theta->callback([t, &run] { run = [t] { return run_calibrate_thetagpu(*t); }; });

  auto o = std::make_shared<CalibrateOptions>();
  CLI::App* cmd = app.add_subcommand("calibrate-collectives",
                                     "Refit the collective calibration on the nccl-tests dataset's calibration cases");
  cmd->add_option("--dataset", o->dataset, "Dataset file (default: validate/data/nccl_busbw.json)");
  cmd->add_flag("--write-default", o->write_default, "Write the fit over the stored calibration file");
  cmd->add_option("--write", o->write, "Write the fit to this file");
  cmd->add_option("--network", o->network, "Network model for the predictions: flow or analytical")->capture_default_str();
  cmd->callback([o, &run] { run = [o] { return run_calibrate(*o); }; });
}

}  // namespace foresight::cli
