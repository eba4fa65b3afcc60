#include "validate/nccl_dataset.hpp"

#include <fmt/core.h>

#include <cstdlib>
#include <set>

#include "common/error.hpp"
#include "common/json_reader.hpp"

namespace foresight::validate {
namespace {

using nlohmann::json;
using topo::JsonPath;
using topo::JsonReader;

void read_scenario(const JsonReader& r, const json& obj, const JsonPath& p, NcclPoint& pt) {
  pt.system = r.string_at(obj, "system", p, "a measurement");
  pt.source = r.string_at(obj, "source", p, "a measurement");
  pt.cluster = r.string_at(obj, "cluster", p, "a measurement");
  pt.gpus = static_cast<int>(r.integer_at(obj, "gpus", p, "a measurement", 1, 1 << 20));
  pt.op = sim::parse_collective_op(r.string_at(obj, "op", p, "a measurement"), r.where(p.at("op")));
  if (obj.contains("algorithm")) {
    pt.algorithm = sim::parse_algorithm(r.string_at(obj, "algorithm", p, "a measurement"),
                                        r.where(p.at("algorithm")));
  }
}

double positive(const JsonReader& r, const json& v, const JsonPath& p, std::string_view what) {
  if (!v.is_number() || !(v.get<double>() > 0.0)) {
    r.fail(p, fmt::format("expected a positive number ({}), found {}", what, topo::shown(v)));
  }
  return v.get<double>();
}

}  // namespace

std::string_view to_string(Role r) { return r == Role::calibration ? "calibration" : "prediction"; }

std::string data_dir() {
  if (const char* env = std::getenv("FORESIGHT_DATA"); env != nullptr && *env != '\0') return env;
  return FORESIGHT_DATA_DIR;
}

NcclDataset load_nccl_dataset(const std::string& path) {
  const JsonReader r(path, sim::ErrorKind::config);
  const json doc = r.parse_file();
  const JsonPath root;
  r.check_object(doc, {"dataset", "source", "definitions", "calibration_rule", "series", "points"}, root,
                 "an nccl_busbw dataset");
  NcclDataset ds;
  if (r.string_at(doc, "dataset", root, "the dataset") != "nccl_busbw") {
    r.fail(root.at("dataset"), fmt::format("expected \"nccl_busbw\", found {}", topo::shown(doc.at("dataset"))));
  }
  ds.source = r.string_at(doc, "source", root, "the dataset");
  ds.calibration_rule = r.string_at(doc, "calibration_rule", root, "the dataset");
  (void)r.string_at(doc, "definitions", root, "the dataset");

  const json& series = r.array_at(doc, "series", root, "the dataset");
  for (std::size_t i = 0; i < series.size(); ++i) {
    const JsonPath p = root.at("series").at(i);
    const json& s = series[i];
    r.check_object(s, {"id", "system", "source", "cluster", "gpus", "op", "algorithm", "note", "calibration_sizes",
                       "size_bytes", "busbw_GBps"},
                   p, "a series");
    NcclPoint base;
    base.series = r.string_at(s, "id", p, "a series");
    read_scenario(r, s, p, base);
    const json& sizes = r.array_at(s, "size_bytes", p, "a series");
    const json& bw = r.array_at(s, "busbw_GBps", p, "a series");
    if (sizes.size() != bw.size()) {
      r.fail(p.at("busbw_GBps"), fmt::format("expected {} values (one per size), found {}", sizes.size(), bw.size()));
    }
    std::set<double> calibration;
    const json& cal = r.array_at(s, "calibration_sizes", p, "a series");
    for (std::size_t k = 0; k < cal.size(); ++k) calibration.insert(positive(r, cal[k], p.at("calibration_sizes").at(k), "bytes"));
    std::set<double> found;
    for (std::size_t k = 0; k < sizes.size(); ++k) {
      NcclPoint pt = base;
      pt.size_bytes = positive(r, sizes[k], p.at("size_bytes").at(k), "bytes");
      pt.busbw_GBps = positive(r, bw[k], p.at("busbw_GBps").at(k), "GB/s");
      pt.id = fmt::format("{}@{}", base.series, static_cast<long long>(pt.size_bytes));
      pt.role = calibration.count(pt.size_bytes) != 0 ? Role::calibration : Role::prediction;
      if (pt.role == Role::calibration) found.insert(pt.size_bytes);
      ds.points.push_back(std::move(pt));
    }
    for (const double c : calibration) {
      if (found.count(c) == 0) {
        r.fail(p.at("calibration_sizes"), fmt::format("calibration size {} is not one of the series' sizes", c));
      }
    }
  }
  const json& points = r.array_at(doc, "points", root, "the dataset");
  for (std::size_t i = 0; i < points.size(); ++i) {
    const JsonPath p = root.at("points").at(i);
    const json& o = points[i];
    r.check_object(o, {"id", "system", "source", "cluster", "gpus", "op", "algorithm", "note", "size_bytes", "busbw_GBps"},
                   p, "a point");
    NcclPoint pt;
    pt.id = r.string_at(o, "id", p, "a point");
    read_scenario(r, o, p, pt);
    pt.size_bytes = positive(r, r.require(o, "size_bytes", p, "a point"), p.at("size_bytes"), "bytes");
    pt.busbw_GBps = positive(r, r.require(o, "busbw_GBps", p, "a point"), p.at("busbw_GBps"), "GB/s");
    pt.role = Role::prediction;
    ds.points.push_back(std::move(pt));
  }
  std::set<std::string> ids;
  for (const NcclPoint& pt : ds.points) {
    if (!ids.insert(pt.id).second) throw sim::ConfigError(fmt::format("{}: duplicate point id \"{}\"", path, pt.id));
  }
  return ds;
}

}  // namespace foresight::validate
