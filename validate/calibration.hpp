#pragma once
/// Fitting and checking the stored calibration (validate/data/calibration.json; run/calibration.hpp
/// reads and writes it). How each part is fitted:
/// - "collectives": per GPU generation, NCCL launch, latency scale, protocol efficiencies
///   (Levenberg-Marquardt on nccl_busbw's calibration sizes);
/// - "compute": per GPU generation, the GEMM cap and the achievable HBM fraction, each the ratio
///   of one calibration case of gemm_and_memory to the datasheet peak;
/// - "thetagpu_ddp": the per-process input rate (golden-section search);
/// - "thetagpu_gpipe": torchgpipe's per-task bookkeeping and GIL-held dispatch (grid search);
/// - "megatron_sc21": Megatron's matrix-kernel efficiency relative to the cuBLASLt benchmark
///   (golden-section search on the declared SC21 row).
/// `foresight validate --calibrate` refits all of them from the datasets' calibration cases and
/// rewrites the file; plain `foresight validate`, `simulate` and the tests read it. A prediction
/// case never feeds a constant: check_provenance rejects a file that names one.

#include <map>
#include <string>
#include <vector>

#include "run/simulation.hpp"
#include "run/calibration.hpp"
#include "validate/gemm_dataset.hpp"
#include "validate/megatron_dataset.hpp"
#include "validate/nccl_dataset.hpp"
#include "validate/thetagpu_dataset.hpp"

namespace foresight::validate {

using run::Calibration;
using run::CalibrationFile;
using run::ComputeCalibration;
using run::DdpCalibration;
using run::GpipeCalibration;
using run::MegatronCalibration;

/// Every case id of the validation datasets with its role and the dataset that declares it.
struct CaseRole {
  Role role = Role::prediction;
  std::string dataset;
};
using CaseRoles = std::map<std::string, CaseRole>;

/// Which parts of a calibration file to check (those whose dataset is in the suite).
struct CalibrationParts {
  bool collectives = true;
  bool compute = true;
  bool thetagpu_ddp = true;
  bool thetagpu_gpipe = true;
  bool megatron = true;
};

/// ConfigError naming `path` and the pointer of the offending entry when a checked constant's
/// fitted_on names a case that no dataset declares, or a prediction case.
void check_provenance(const Calibration& c, const CaseRoles& roles, const std::string& path,
                      const CalibrationParts& parts = {});

/// The compute constants fitted on `cases`' calibration cases: GEMM cap = measured TFLOP/s /
/// the dtype's dense peak (the largest cubic GEMM); HBM fraction = measured copy TB/s / the
/// datasheet bandwidth.
std::vector<ComputeCalibration> fit_compute(const std::vector<ThroughputCase>& cases);

/// ConfigError when `c`'s compute constants differ (relative 1e-9) from the compute model's
/// (models/compute_model.cpp), so code and file cannot drift apart.
void check_compute_constants(const Calibration& c, const std::string& path);

}  // namespace foresight::validate
