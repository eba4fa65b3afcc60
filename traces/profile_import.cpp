#include "traces/profile_import.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <optional>

#include "common/error.hpp"

namespace foresight::trace {
namespace {

bool is_matrix_op(const std::string& name) { return name == "aten::addmm" || name == "aten::mm" || name == "aten::bmm"; }

bool is_linear_backward(const std::string& name) {
  return name.ends_with("AddmmBackward0") || name.ends_with("MmBackward0") || name.ends_with("LinearBackward0");
}

bool contains(const std::string& s, const char* part) { return s.find(part) != std::string::npos; }

std::optional<sim::DType> element_type(const std::string& type, const std::vector<const KinetoGpuOp*>& kernels) {
  if (type == "c10::Half") return sim::DType::fp16;
  if (type == "c10::BFloat16") return sim::DType::bf16;
  if (type != "float") return std::nullopt;
  for (const KinetoGpuOp* k : kernels) {
    if (contains(k->name, "tf32") || contains(k->name, "s1688") || contains(k->name, "s16816")) return sim::DType::tf32;
  }
  return sim::DType::fp32;
}

/// A matrix operator of the trace with the kernels it launched.
struct Instance {
  const KinetoCpuOp* op;
  const KinetoCpuOp* backward = nullptr;  ///< its enclosing linear backward node, if any
  std::vector<const KinetoGpuOp*> kernels;
};

bool two_d(const std::vector<std::int64_t>& d) { return d.size() == 2 && d[0] > 0 && d[1] > 0; }

/// The signature of `x`; nullopt when its shapes are not as expected.
std::optional<sim::OpSignature> signature(const Instance& x, const std::vector<Instance>& siblings) {
  const KinetoCpuOp& op = *x.op;
  const auto& d = op.input_dims;
  sim::OpSignature s;
  s.type = sim::OpType::gemm;
  if (op.name == "aten::addmm") {
    if (d.size() < 3 || !two_d(d[1]) || !two_d(d[2]) || d[1][1] != d[2][0]) return std::nullopt;
    s.kernel = "linear_fwd";
    s.shape = {d[1][0], d[2][1], d[1][1], 1};
  } else if (op.name == "aten::bmm") {
    if (d.size() < 2 || d[0].size() != 3 || d[1].size() != 3 || d[0][2] != d[1][1]) return std::nullopt;
    s.kernel = "bmm";
    s.shape = {d[0][1], d[1][2], d[0][2], d[0][0]};
    s.batch_axis = 3;
  } else {
    if (d.size() < 2 || !two_d(d[0]) || !two_d(d[1]) || d[0][1] != d[1][0]) return std::nullopt;
    const std::int64_t m = d[0][0], k = d[0][1], n = d[1][1];
    if (x.backward == nullptr) {
      s.kernel = "mm";
      s.shape = {m, n, k, 1};
    } else {
      // The weight gradient's second input is the node's gradient, which its sibling (the input
      // gradient) takes first; a lone mm is the weight gradient.
      bool wgrad = true;
      for (const Instance& o : siblings) {
        if (&o == &x || o.backward != x.backward || o.op->input_dims.size() < 2) continue;
        wgrad = o.op->input_dims[0] == d[1];
      }
      if (wgrad) {
        s.kernel = "linear_wgrad";  // x^T [in, rows] x grad [rows, out]: {out, in, rows}
        s.shape = {n, m, k, 1};
        s.batch_axis = 2;
      } else {
        s.kernel = "linear_dgrad";  // grad [rows, out] x w [out, in]: {rows, in, out}
        s.shape = {m, n, k, 1};
      }
    }
  }
  const auto dtype = element_type(op.input_types.empty() ? std::string() : op.input_types.front(), x.kernels);
  if (!dtype) return std::nullopt;
  s.dtype = *dtype;
  s.flops = 2.0 * static_cast<double>(s.shape[0] * s.shape[1] * s.shape[2] * s.shape[3]);
  return s;
}

/// The matrix operators of `t` inside [from, to) with their kernels.
std::vector<Instance> instances(const KinetoTrace& t, double from, double to) {
  std::map<std::int64_t, const KinetoGpuOp*> by_correlation;
  for (const KinetoGpuOp& op : t.gpu_ops) {
    if (op.correlation >= 0 && op.kind == KinetoGpuOp::Kind::kernel) by_correlation.emplace(op.correlation, &op);
  }
  std::map<std::int64_t, std::vector<const KinetoRuntimeCall*>> calls;  // per thread, in start order
  for (const KinetoRuntimeCall& c : t.runtime) calls[c.tid].push_back(&c);
  std::map<std::int64_t, std::vector<const KinetoCpuOp*>> backward;  // per thread
  for (const KinetoCpuOp& op : t.cpu_ops) {
    if (is_linear_backward(op.name)) backward[op.tid].push_back(&op);
  }
  std::vector<Instance> out;
  for (const KinetoCpuOp& op : t.cpu_ops) {
    if (!is_matrix_op(op.name) || op.ts_us < from || op.ts_us >= to) continue;
    Instance x{&op, nullptr, {}};
    for (const KinetoCpuOp* b : backward[op.tid]) {
      if (b->ts_us <= op.ts_us && op.ts_us + op.dur_us <= b->ts_us + b->dur_us) x.backward = b;  // the innermost
    }
    const auto& list = calls[op.tid];
    auto it = std::lower_bound(list.begin(), list.end(), op.ts_us,
                               [](const KinetoRuntimeCall* c, double ts) { return c->ts_us < ts; });
    for (; it != list.end() && (*it)->ts_us < op.ts_us + op.dur_us; ++it) {
      const auto k = by_correlation.find((*it)->correlation);
      if (k != by_correlation.end()) x.kernels.push_back(k->second);
    }
    out.push_back(std::move(x));
  }
  // A kernel counts for the innermost matrix operator around its launch only.
  for (std::size_t i = 0; i < out.size(); ++i) {
    for (std::size_t j = 0; j < out.size(); ++j) {
      const KinetoCpuOp& a = *out[i].op;
      const KinetoCpuOp& b = *out[j].op;
      if (i == j || a.tid != b.tid || !(a.ts_us <= b.ts_us && b.ts_us + b.dur_us <= a.ts_us + a.dur_us)) continue;
      std::erase_if(out[i].kernels, [&](const KinetoGpuOp* k) {
        return std::find(out[j].kernels.begin(), out[j].kernels.end(), k) != out[j].kernels.end();
      });
    }
  }
  return out;
}

}  // namespace

ImportedProfile import_profile(const std::vector<KinetoTrace>& traces, const std::string& gpu) {
  ImportedProfile out;
  out.db.gpu = gpu;
  std::map<std::string, std::pair<sim::OpSignature, std::vector<double>>> times;  // key + batch
  std::vector<std::string> paths;
  for (const KinetoTrace& t : traces) {
    paths.push_back(t.path);
    std::vector<std::pair<double, double>> windows;
    for (const KinetoStep& s : t.steps) windows.emplace_back(s.ts_us, s.ts_us + s.dur_us);
    if (windows.empty()) windows.emplace_back(-1e300, 1e300);
    for (const auto& [from, to] : windows) {
      const std::vector<Instance> found = instances(t, from, to);
      for (const Instance& x : found) {
        const auto sig = signature(x, found);
        if (!sig) {
          ++out.no_shapes;
          continue;
        }
        if (x.kernels.empty()) {
          ++out.no_kernels;
          continue;
        }
        double us = 0.0;
        for (const KinetoGpuOp* k : x.kernels) us += k->dur_us;
        auto& slot = times[fmt::format("{}@{}", sig->key(), sig->batch())];
        slot.first = *sig;
        slot.second.push_back(us * 1e-6);
        ++out.instances;
      }
    }
  }
  if (out.instances == 0) {
    throw sim::TraceError(fmt::format("{}: no matrix operator could be timed ({} without recorded shapes or a known "
                                      "dtype, {} without their kernels): record with record_shapes=True",
                                      fmt::join(paths, ", "), out.no_shapes, out.no_kernels));
  }
  for (auto& [key, slot] : times) {
    auto& list = slot.second;
    std::sort(list.begin(), list.end());
    const std::size_t h = list.size() / 2;
    out.db.add(slot.first, list.size() % 2 == 1 ? list[h] : 0.5 * (list[h - 1] + list[h]));
  }
  out.db.source = fmt::format("imported from the PyTorch-profiler trace(s) {}: median GPU time of {} matrix operator "
                              "instances",
                              fmt::join(paths, ", "), out.instances);
  return out;
}

}  // namespace foresight::trace
