#include "run/calibration.hpp"

#include <fmt/core.h>

#include <cstdlib>

#include "common/error.hpp"

#ifndef FORESIGHT_DATA_DIR
#define FORESIGHT_DATA_DIR "validate/data"  // the build sets it (run/meson.build)
#endif

namespace foresight::run {
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

constexpr std::string_view kModel =
    "Simple: T = launch + (sqrt(T_bw) + sqrt(latency_scale * alpha))^2; LL, LL128: T = launch + "
    "latency_scale * alpha + T_bw; alpha is NCCL's latency and T_bw the larger of "
    "S / (NCCL algbw * efficiency[protocol]) and the links' own time. See collectives/collective_config.hpp";

}  // namespace

CalibrationFile parse_collective_calibration(const topo::JsonReader& r, const json& doc, const JsonPath& root) {
  r.check_object(doc, {"model", "profiles"}, root, "a collective calibration");
  (void)r.string_at(doc, "model", root, "a collective calibration");
  CalibrationFile file;
  const json& profiles = r.array_at(doc, "profiles", root, "a collective calibration");
  for (std::size_t i = 0; i < profiles.size(); ++i) {
    const JsonPath p = root.at("profiles").at(i);
    const json& o = profiles[i];
    constexpr std::string_view what = "a calibration profile";
    r.check_object(o, {"compute_capability", "name", "launch", "latency_scale", "efficiency", "pipelined", "fitted_on"},
                   p, what);
    CalibrationRecord rec;
    rec.compute_capability = static_cast<int>(r.integer_at(o, "compute_capability", p, what, 10, 200));
    auto& c = rec.calibration;
    c.name = r.string_at(o, "name", p, what);
    c.launch_us = r.time_at(o, "launch", p, what).microseconds();
    c.latency_scale = r.number_at(o, "latency_scale", p, what);
    if (!(c.latency_scale >= 0.0)) r.fail(p.at("latency_scale"), fmt::format("expected a non-negative scale, found {}", c.latency_scale));
    const json& eff = r.require(o, "efficiency", p, what);
    r.check_object(eff, {"LL", "LL128", "Simple"}, p.at("efficiency"), "protocol efficiencies");
    for (int k = 0; k < sim::kProtocolCount; ++k) {
      const auto name = sim::to_string(static_cast<sim::Protocol>(k));
      const double e = r.number_at(eff, name, p.at("efficiency"), "protocol efficiencies");
      if (!(e > 0.0)) r.fail(p.at("efficiency").at(name), fmt::format("expected a positive efficiency, found {}", e));
      c.efficiency[static_cast<std::size_t>(k)] = e;
    }
    c.pipelined = r.bool_at(o, "pipelined", p, what);
    const json& on = r.array_at(o, "fitted_on", p, what);
    for (std::size_t k = 0; k < on.size(); ++k) {
      if (!on[k].is_string()) r.fail(p.at("fitted_on").at(k), fmt::format("expected a case id, found {}", topo::shown(on[k])));
      rec.fitted_on.push_back(on[k].get<std::string>());
    }
    for (const auto& other : file.profiles) {
      if (other.compute_capability == rec.compute_capability) {
        r.fail(p.at("compute_capability"), fmt::format("a second profile for compute capability {}", rec.compute_capability));
      }
    }
    file.profiles.push_back(std::move(rec));
  }
  return file;
}

json to_json(const CalibrationFile& file) {
  json doc = json::object();
  doc["model"] = kModel;
  doc["profiles"] = json::array();
  for (const auto& rec : file.profiles) {
    const auto& c = rec.calibration;
    json eff = json::object();
    for (int k = 0; k < sim::kProtocolCount; ++k) {
      eff[std::string(sim::to_string(static_cast<sim::Protocol>(k)))] = c.efficiency[static_cast<std::size_t>(k)];
    }
    doc["profiles"].push_back(json{{"compute_capability", rec.compute_capability},
                                   {"name", c.name},
                                   {"launch", fmt::format("{:.6f} us", c.launch_us)},
                                   {"latency_scale", c.latency_scale},
                                   {"efficiency", eff},
                                   {"pipelined", c.pipelined},
                                   {"fitted_on", rec.fitted_on}});
  }
  return doc;
}

sim::CollectiveConfig collective_config(const CalibrationFile& file) {
  sim::CollectiveConfig cfg;
  for (const auto& rec : file.profiles) cfg.by_arch[rec.compute_capability] = rec.calibration;
  return cfg;
}

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

std::string default_calibration_path() {
  if (const char* env = std::getenv("FORESIGHT_DATA"); env != nullptr && *env != '\0') {
    return std::string(env) + "/calibration.json";
  }
  return std::string(FORESIGHT_DATA_DIR) + "/calibration.json";
}

sim::CollectiveConfig default_collective_config() {
  return collective_config(load_calibration(default_calibration_path()).collectives);
}

}  // namespace foresight::run
