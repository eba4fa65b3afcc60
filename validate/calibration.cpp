#include "validate/calibration.hpp"

#include <fmt/core.h>

#include <cmath>

#include "common/error.hpp"
#include "models/compute_model.hpp"
#include "topologies/gpu_spec.hpp"
#include "validate/gemm_dataset.hpp"

namespace foresight::validate {

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
          "(models/compute_model.cpp): make them agree",
          path, i, k.gemm_cap, k.hbm_fraction, code.gemm_cap, code.hbm_fraction));
    }
  }
}

}  // namespace foresight::validate
