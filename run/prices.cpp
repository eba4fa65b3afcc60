#include "run/prices.hpp"

#include <fmt/core.h>

#include <cmath>
#include <cstdlib>
#include <nlohmann/json.hpp>

#include "common/error.hpp"
#include "common/json_reader.hpp"
#include "topologies/gpu_spec.hpp"

#ifndef FORESIGHT_PRICES_FILE
#define FORESIGHT_PRICES_FILE "run/data/prices.json"  // the build sets it (run/meson.build)
#endif

namespace foresight::strategy {

const GpuPrice* PriceTable::find(std::string_view gpu) const {
  for (const GpuPrice& p : gpus) {
    if (p.gpu == gpu) return &p;
  }
  return nullptr;
}

PriceTable load_prices(const std::string& path) {
  const topo::JsonReader r(path, sim::ErrorKind::config);
  const nlohmann::json doc = r.parse_file();
  const topo::JsonPath root;
  r.check_object(doc, {"description", "currency", "gpus"}, root, "a price file");
  if (r.string_at(doc, "currency", root, "a price file") != "USD") {
    r.fail(root.at("currency"), fmt::format("expected \"USD\", found \"{}\"", r.string_at(doc, "currency", root, "")));
  }
  PriceTable table;
  table.path = path;
  const nlohmann::json& gpus = r.array_at(doc, "gpus", root, "a price file");
  for (std::size_t i = 0; i < gpus.size(); ++i) {
    const topo::JsonPath p = root.at("gpus").at(i);
    constexpr std::string_view what = "a GPU price";
    r.check_object(gpus[i], {"gpu", "usd_per_gpu_hour", "basis", "gpu_watts", "server_watts_per_gpu", "source"}, p, what);
    GpuPrice g;
    g.gpu = r.string_at(gpus[i], "gpu", p, what);
    bool known = false;
    for (const auto& spec : topo::gpu_catalog()) known = known || spec.name == g.gpu;
    if (!known) r.fail(p.at("gpu"), fmt::format("expected a catalog GPU (foresight --list), found \"{}\"", g.gpu));
    if (table.find(g.gpu) != nullptr) r.fail(p.at("gpu"), fmt::format("expected each GPU once, found \"{}\" again", g.gpu));
    auto non_negative = [&](std::string_view key) {
      const double v = r.number_at(gpus[i], key, p, what);
      if (!(v >= 0.0) || !std::isfinite(v)) r.fail(p.at(key), fmt::format("expected a number >= 0, found {}", v));
      return v;
    };
    if (gpus[i].contains("usd_per_gpu_hour")) g.usd_per_gpu_hour = non_negative("usd_per_gpu_hour");
    g.gpu_watts = non_negative("gpu_watts");
    g.server_watts_per_gpu = non_negative("server_watts_per_gpu");
    g.source = r.string_at(gpus[i], "source", p, what);
    if (gpus[i].contains("basis")) g.basis = r.string_at(gpus[i], "basis", p, what);
    table.gpus.push_back(std::move(g));
  }
  return table;
}

std::string default_prices_path() { return FORESIGHT_PRICES_FILE; }

void add_costs(Report& r, const topo::Cluster& cluster, const PriceTable& prices) {
  Costs c;
  double usd_per_hour = 0.0;
  double watts = 0.0;
  c.priced = true;
  c.powered = true;
  for (int g = 0; g < r.gpus; ++g) {
    const std::string_view name = cluster.gpu_model(static_cast<sim::GpuId>(g)).name;
    const GpuPrice* p = prices.find(name);
    if (p == nullptr) {
      c.priced = c.powered = false;
      c.note = fmt::format("{} has no entry in {}", name, prices.path);
      break;
    }
    if (p->usd_per_gpu_hour) {
      usd_per_hour += *p->usd_per_gpu_hour;
    } else if (c.priced) {
      c.priced = false;
      c.note = fmt::format("{} has no price in {}", name, prices.path);
    }
    watts += p->gpu_watts + p->server_watts_per_gpu;
  }
  c.gpu_hours_run = r.gpus * r.run_time_s / 3600.0;
  if (c.priced) {
    c.usd_per_iteration = usd_per_hour * r.iteration_time_s / 3600.0;
    c.usd_run = usd_per_hour * r.run_time_s / 3600.0;
  }
  if (c.powered) {
    c.kwh_per_iteration = watts * r.iteration_time_s / 3.6e6;
    c.kwh_run = watts * r.run_time_s / 3.6e6;
  }
  r.cost = std::move(c);
}

}  // namespace foresight::strategy
