#include "validate/collective_calibration.hpp"

#include <fmt/format.h>

#include "sim/error.hpp"
#include "topologies/json_reader.hpp"

namespace foresight::validate {
namespace {

using nlohmann::json;
using topo::JsonPath;

constexpr std::string_view kModel =
    "Simple: T = launch + (sqrt(T_bw) + sqrt(latency_scale * alpha))^2; LL, LL128: T = launch + "
    "latency_scale * alpha + T_bw; alpha is NCCL's latency and T_bw the larger of "
    "S / (NCCL algbw * efficiency[protocol]) and the links' own time. See sim/collective_config.hpp";

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

}  // namespace foresight::validate
