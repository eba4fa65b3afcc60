#include "validate/gemm_dataset.hpp"

#include <fmt/core.h>

#include "common/error.hpp"
#include "models/compute_model.hpp"
#include "common/json_reader.hpp"

namespace foresight::validate {

std::vector<ThroughputCase> load_gemm_dataset(const std::string& path) {
  using nlohmann::json;
  const topo::JsonReader r(path, sim::ErrorKind::config);
  const json doc = r.parse_file();
  const topo::JsonPath root;
  r.check_object(doc, {"dataset", "source", "calibration_rule", "cases"}, root, "a gemm_and_memory dataset");
  (void)r.string_at(doc, "source", root, "the dataset");
  const json& cases = r.array_at(doc, "cases", root, "the dataset");
  std::vector<ThroughputCase> out;
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const topo::JsonPath p = root.at("cases").at(i);
    const json& o = cases[i];
    ThroughputCase c;
    const std::string kind = o.is_object() && o.contains("kind") && o["kind"].is_string() ? o["kind"].get<std::string>() : "";
    if (kind == "gemm") {
      r.check_object(o, {"id", "gpu", "kind", "dtype", "m", "n", "k", "tflops", "role"}, p, "a GEMM case");
      c.dtype = r.string_at(o, "dtype", p, "a GEMM case");
      c.m = r.integer_at(o, "m", p, "a GEMM case", 1, 1LL << 40);
      c.n = r.integer_at(o, "n", p, "a GEMM case", 1, 1LL << 40);
      c.k = r.integer_at(o, "k", p, "a GEMM case", 1, 1LL << 40);
      c.measured = r.number_at(o, "tflops", p, "a GEMM case");
    } else if (kind == "hbm") {
      r.check_object(o, {"id", "gpu", "kind", "pattern", "tbps", "role"}, p, "an HBM case");
      c.pattern = r.string_at(o, "pattern", p, "an HBM case");
      c.measured = r.number_at(o, "tbps", p, "an HBM case");
    } else {
      r.fail(p.at("kind"), fmt::format("expected \"gemm\" or \"hbm\", found {}", o.is_object() && o.contains("kind") ? topo::shown(o["kind"]) : "nothing"));
    }
    c.kind = kind;
    c.id = r.string_at(o, "id", p, "a case");
    c.gpu = r.string_at(o, "gpu", p, "a case");
    const std::string role = r.string_at(o, "role", p, "a case");
    if (role != "calibration" && role != "prediction") {
      r.fail(p.at("role"), fmt::format("expected calibration or prediction, found \"{}\"", role));
    }
    c.role = role == "calibration" ? Role::calibration : Role::prediction;
    if (!(c.measured > 0.0)) r.fail(p, fmt::format("expected a positive measurement, found {}", c.measured));
    out.push_back(std::move(c));
  }
  return out;
}

std::vector<ThroughputResult> evaluate_gemm_dataset(const std::vector<ThroughputCase>& cases) {
  std::vector<ThroughputResult> out;
  for (const ThroughputCase& c : cases) {
    const topo::GpuSpec& gpu = topo::find_gpu_spec(c.gpu);
    const strategy::ComputeModel model(gpu);
    ThroughputResult r;
    r.c = &c;
    if (c.kind == "gemm") {
      sim::OpSignature sig;
      sig.type = sim::OpType::gemm;
      sig.dtype = sim::parse_dtype(c.dtype, c.id);
      sig.kernel = "gemm";
      sig.shape = {c.m, c.n, c.k, 1};
      sig.flops = 2.0 * static_cast<double>(c.m) * static_cast<double>(c.n) * static_cast<double>(c.k);
      sig.bytes = static_cast<double>(c.m * c.k + c.k * c.n + c.m * c.n) * sim::dtype_bytes(sig.dtype);
      r.predicted = sig.flops / model.analytical(sig).seconds() * 1e-12;
    } else {
      sim::OpSignature sig;
      sig.kernel = "stream_" + c.pattern;
      sig.shape = {1};
      sig.bytes = 1073741824.0;
      r.predicted = sig.bytes / model.analytical(sig).seconds() * 1e-12;
    }
    r.error_pct = (r.predicted - c.measured) / c.measured * 100.0;
    out.push_back(r);
  }
  return out;
}

}  // namespace foresight::validate
