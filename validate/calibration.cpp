#include "validate/calibration.hpp"

#include <fmt/format.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "sim/error.hpp"
#include "strategies/compute_model.hpp"
#include "topologies/gpu_spec.hpp"
#include "topologies/json_reader.hpp"
#include "validate/gemm_dataset.hpp"

namespace foresight::validate {
namespace {

using nlohmann::json;
using topo::JsonPath;
using topo::JsonReader;

constexpr std::string_view kDescription =
    "Every constant the simulator cannot know, its value and the calibration cases it was fitted on "
    "(ids of validate/data's datasets). Written by `foresight validate --calibrate`; never edit by hand.";
constexpr std::string_view kComputeMethod =
    "gemm_cap = measured TFLOP/s of the largest cubic GEMM / the dtype's dense datasheet peak; hbm_fraction = "
    "measured STREAM copy TB/s / the datasheet HBM bandwidth (gemm_and_memory.json)";
constexpr std::string_view kDdpMethod =
    "golden-section search over log(input_rate) in [10, 1e6] samples/s for the least squared relative error of the "
    "simulated 10-epoch times of the data-parallel calibration rows";

constexpr std::string_view kMegatronMethod =
    "golden-section search over log(gemm_efficiency) in [0.3, 2] for the least squared relative error of the "
    "simulated TFLOP/s per GPU (the paper's FLOP count over the iteration) of the declared calibration rows";

std::string gpipe_method() {
  return "grid search for the least squared relative error of the simulated 10-epoch times of the pipeline_gpipe "
         "calibration rows: microbatch_overhead in {0, 20, ..., 160} us x dispatch_gil in {3, 4, ..., 8} us (8 us is "
         "all of a forward op's dispatch); the input rate is thetagpu_ddp's";
}

std::vector<std::string> ids_at(const JsonReader& r, const json& o, const JsonPath& p, std::string_view what) {
  std::vector<std::string> ids;
  const json& on = r.array_at(o, "fitted_on", p, what);
  for (std::size_t k = 0; k < on.size(); ++k) {
    if (!on[k].is_string()) r.fail(p.at("fitted_on").at(k), fmt::format("expected a case id, found {}", topo::shown(on[k])));
    ids.push_back(on[k].get<std::string>());
  }
  if (ids.empty()) r.fail(p.at("fitted_on"), "expected at least one calibration case, found none");
  return ids;
}

double positive_at(const JsonReader& r, const json& o, std::string_view key, const JsonPath& p, std::string_view what) {
  const double v = r.number_at(o, key, p, what);
  if (!(v > 0.0)) r.fail(p.at(key), fmt::format("expected a positive number, found {}", v));
  return v;
}

std::string us_text(sim::Time t) { return fmt::format("{} us", t.microseconds()); }

}  // namespace

Calibration load_calibration(const std::string& path) {
  const JsonReader r(path, sim::ErrorKind::config);
  const json doc = r.parse_file();
  const JsonPath root;
  r.check_object(doc, {"description", "collectives", "compute", "thetagpu_ddp", "thetagpu_gpipe", "megatron_sc21"},
                 root, "a calibration file");
  Calibration c;
  c.collectives = parse_collective_calibration(r, r.require(doc, "collectives", root, "a calibration file"),
                                               root.at("collectives"));
  const json& compute = r.array_at(doc, "compute", root, "a calibration file");
  for (std::size_t i = 0; i < compute.size(); ++i) {
    const JsonPath p = root.at("compute").at(i);
    constexpr std::string_view what = "a compute calibration";
    r.check_object(compute[i], {"compute_capability", "gpu", "gemm_cap", "hbm_fraction", "fitted_on", "method"}, p, what);
    ComputeCalibration k;
    k.compute_capability = static_cast<int>(r.integer_at(compute[i], "compute_capability", p, what, 10, 200));
    k.gpu = r.string_at(compute[i], "gpu", p, what);
    k.gemm_cap = positive_at(r, compute[i], "gemm_cap", p, what);
    k.hbm_fraction = positive_at(r, compute[i], "hbm_fraction", p, what);
    k.fitted_on = ids_at(r, compute[i], p, what);
    c.compute.push_back(std::move(k));
  }
  {
    const JsonPath p = root.at("thetagpu_ddp");
    const json& o = r.require(doc, "thetagpu_ddp", root, "a calibration file");
    constexpr std::string_view what = "the ThetaGPU DDP calibration";
    r.check_object(o, {"input_rate", "unit", "fitted_on", "method"}, p, what);
    c.thetagpu_ddp.input_rate = positive_at(r, o, "input_rate", p, what);
    c.thetagpu_ddp.fitted_on = ids_at(r, o, p, what);
  }
  {
    const JsonPath p = root.at("thetagpu_gpipe");
    const json& o = r.require(doc, "thetagpu_gpipe", root, "a calibration file");
    constexpr std::string_view what = "the ThetaGPU GPipe calibration";
    r.check_object(o, {"microbatch_overhead", "dispatch_gil", "fitted_on", "method"}, p, what);
    c.thetagpu_gpipe.microbatch_overhead = r.time_at(o, "microbatch_overhead", p, what);
    c.thetagpu_gpipe.dispatch_gil = r.time_at(o, "dispatch_gil", p, what);
    c.thetagpu_gpipe.fitted_on = ids_at(r, o, p, what);
  }
  {
    const JsonPath p = root.at("megatron_sc21");
    const json& o = r.require(doc, "megatron_sc21", root, "a calibration file");
    constexpr std::string_view what = "the Megatron SC21 calibration";
    r.check_object(o, {"gemm_efficiency", "fitted_on", "method"}, p, what);
    c.megatron.gemm_efficiency = positive_at(r, o, "gemm_efficiency", p, what);
    c.megatron.fitted_on = ids_at(r, o, p, what);
  }
  return c;
}

std::string to_json_text(const Calibration& c) {
  json doc = json::object();
  doc["description"] = kDescription;
  doc["collectives"] = to_json(c.collectives);
  doc["compute"] = json::array();
  for (const ComputeCalibration& k : c.compute) {
    doc["compute"].push_back(json{{"compute_capability", k.compute_capability},
                                  {"gpu", k.gpu},
                                  {"gemm_cap", k.gemm_cap},
                                  {"hbm_fraction", k.hbm_fraction},
                                  {"fitted_on", k.fitted_on},
                                  {"method", kComputeMethod}});
  }
  doc["thetagpu_ddp"] = json{{"input_rate", c.thetagpu_ddp.input_rate},
                             {"unit", "samples/s per training process"},
                             {"fitted_on", c.thetagpu_ddp.fitted_on},
                             {"method", kDdpMethod}};
  doc["thetagpu_gpipe"] = json{{"microbatch_overhead", us_text(c.thetagpu_gpipe.microbatch_overhead)},
                               {"dispatch_gil", us_text(c.thetagpu_gpipe.dispatch_gil)},
                               {"fitted_on", c.thetagpu_gpipe.fitted_on},
                               {"method", gpipe_method()}};
  doc["megatron_sc21"] = json{{"gemm_efficiency", c.megatron.gemm_efficiency},
                              {"fitted_on", c.megatron.fitted_on},
                              {"method", kMegatronMethod}};
  return doc.dump(1) + "\n";
}

std::string default_calibration_path() { return data_dir() + "/calibration.json"; }

sim::CollectiveConfig default_collective_config() {
  return collective_config(load_calibration(default_calibration_path()).collectives);
}

void check_provenance(const Calibration& c, const CaseRoles& roles, const std::string& path,
                      const CalibrationParts& parts) {
  auto check = [&](const std::vector<std::string>& ids, const std::string& at) {
    for (std::size_t k = 0; k < ids.size(); ++k) {
      const auto it = roles.find(ids[k]);
      if (it == roles.end()) {
        throw sim::ConfigError(fmt::format("{}: {}/fitted_on/{}: expected a calibration case of a validation "
                                           "dataset, found \"{}\", which no dataset declares",
                                           path, at, k, ids[k]));
      }
      if (it->second.role != Role::calibration) {
        throw sim::ConfigError(fmt::format("{}: {}/fitted_on/{}: expected a calibration case, found \"{}\", a "
                                           "prediction case of {}: a prediction never feeds a constant",
                                           path, at, k, ids[k], it->second.dataset));
      }
    }
  };
  for (std::size_t i = 0; parts.collectives && i < c.collectives.profiles.size(); ++i) {
    check(c.collectives.profiles[i].fitted_on, fmt::format("/collectives/profiles/{}", i));
  }
  for (std::size_t i = 0; parts.compute && i < c.compute.size(); ++i) {
    check(c.compute[i].fitted_on, fmt::format("/compute/{}", i));
  }
  if (parts.thetagpu_ddp) check(c.thetagpu_ddp.fitted_on, "/thetagpu_ddp");
  if (parts.thetagpu_gpipe) check(c.thetagpu_gpipe.fitted_on, "/thetagpu_gpipe");
  if (parts.megatron) check(c.megatron.fitted_on, "/megatron_sc21");
}

std::vector<ComputeCalibration> fit_compute(const std::vector<ThroughputCase>& cases) {
  std::map<int, ComputeCalibration> by_arch;
  for (const ThroughputCase& tc : cases) {
    if (tc.role != Role::calibration || (tc.kind != "gemm" && tc.pattern != "copy")) continue;
    const topo::GpuSpec& gpu = topo::find_gpu_spec(tc.gpu);
    ComputeCalibration& k = by_arch[gpu.compute_capability];
    if (!k.gpu.empty() && k.gpu != gpu.name) {
      throw sim::ConfigError(fmt::format("gemm_and_memory: calibration cases of compute capability {} come from two "
                                         "GPUs, {} and {}",
                                         gpu.compute_capability, k.gpu, gpu.name));
    }
    k.compute_capability = gpu.compute_capability;
    k.gpu = gpu.name;
    if (tc.kind == "gemm") {
      const strategy::ComputeModel model(gpu);
      k.gemm_cap = tc.measured * 1e12 / model.peak(sim::parse_dtype(tc.dtype, tc.id)).per_second();
    } else {
      k.hbm_fraction = tc.measured * 1e12 / gpu.memory_bandwidth.bytes_per_second();
    }
    k.fitted_on.push_back(tc.id);
  }
  std::vector<ComputeCalibration> out;
  for (auto& [cc, k] : by_arch) {
    if (k.gemm_cap == 0.0 || k.hbm_fraction == 0.0) {
      throw sim::ConfigError(fmt::format("gemm_and_memory: compute capability {} needs one calibration GEMM and one "
                                         "calibration HBM copy, found {}",
                                         cc, k.fitted_on.size()));
    }
    out.push_back(std::move(k));
  }
  return out;
}

void check_compute_constants(const Calibration& c, const std::string& path) {
  for (std::size_t i = 0; i < c.compute.size(); ++i) {
    const ComputeCalibration& k = c.compute[i];
    const auto code = strategy::compute_constants(topo::find_gpu_spec(k.gpu));
    auto same = [](double a, double b) { return std::abs(a - b) <= 1e-9 * std::abs(b); };
    if (!same(k.gemm_cap, code.gemm_cap) || !same(k.hbm_fraction, code.hbm_fraction)) {
      throw sim::ConfigError(fmt::format(
          "{}: /compute/{}: gemm_cap {:.9g} and hbm_fraction {:.9g} differ from the compute model's {:.9g} and {:.9g} "
          "(strategies/compute_model.cpp): make them agree",
          path, i, k.gemm_cap, k.hbm_fraction, code.gemm_cap, code.hbm_fraction));
    }
  }
}

}  // namespace foresight::validate
