#include "traces/kernel_agreement.hpp"

#include <algorithm>
#include <unordered_set>
#include <vector>

namespace foresight::trace {
namespace {

/// The kernels launched inside the step, in the GPU's start order.
std::vector<const KinetoGpuOp*> launched_kernels(const KinetoTrace& t, int index) {
  const KinetoStep& s = t.step_at(index);
  std::unordered_set<std::int64_t> inside;  // correlation ids of the calls made inside the step
  for (const KinetoRuntimeCall& c : t.runtime) {
    if (c.ts_us >= s.ts_us && c.ts_us < s.ts_us + s.dur_us && c.correlation >= 0) inside.insert(c.correlation);
  }
  std::vector<const KinetoGpuOp*> out;
  for (const KinetoGpuOp& op : t.gpu_ops) {
    if (op.kind == KinetoGpuOp::Kind::kernel && inside.count(op.correlation) != 0) out.push_back(&op);
  }
  // Launch order is the GPU's start order on one stream; across streams, start order too.
  std::stable_sort(out.begin(), out.end(), [](const KinetoGpuOp* x, const KinetoGpuOp* y) { return x->ts_us < y->ts_us; });
  return out;
}

double quantile(std::vector<double> v, double q) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  return v[static_cast<std::size_t>(q * static_cast<double>(v.size() - 1) + 0.5)];
}

}  // namespace

KernelAgreement compare_step_kernels(const KinetoTrace& a, const KinetoTrace& b, int index) {
  const std::vector<const KinetoGpuOp*> ka = launched_kernels(a, index);
  const std::vector<const KinetoGpuOp*> kb = launched_kernels(b, index);
  KernelAgreement r;
  r.kernels_a = ka.size();
  r.kernels_b = kb.size();
  for (const KinetoGpuOp* k : ka) r.total_a_us += k->dur_us;
  for (const KinetoGpuOp* k : kb) r.total_b_us += k->dur_us;
  const std::size_t n = std::min(ka.size(), kb.size());
  r.first_mismatch = n;
  std::vector<double> ratios;
  for (std::size_t i = 0; i < n; ++i) {
    if (ka[i]->name != kb[i]->name) {
      if (r.first_mismatch == n) {
        r.first_mismatch = i;
        r.mismatch_a = ka[i]->name;
        r.mismatch_b = kb[i]->name;
      }
      continue;
    }
    ++r.same_name_in_order;
    if (ka[i]->dur_us > 0.0) ratios.push_back(kb[i]->dur_us / ka[i]->dur_us);
  }
  r.median_ratio = quantile(ratios, 0.5);
  r.p10_ratio = quantile(ratios, 0.1);
  r.p90_ratio = quantile(ratios, 0.9);
  return r;
}

}  // namespace foresight::trace
