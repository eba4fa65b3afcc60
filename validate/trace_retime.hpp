#pragma once
/// Replaying a trace on another GPU model (traces/gpu_retime.hpp) from the catalog's GPUs, and
/// its validation on two traces of one workload measured on two GPU models.

#include <optional>
#include <string>

#include "topologies/gpu_spec.hpp"
#include "traces/gpu_retime.hpp"
#include "traces/kineto.hpp"
#include "validate/suite.hpp"

namespace foresight::validate {

/// What retiming reads of a catalog GPU: its compute capability, SMs and the compute model's
/// achievable HBM bandwidth.
trace::RetimeGpu retime_gpu(const topo::GpuSpec& gpu);

/// The catalog model trace `t` ran on: `named` when given (a catalog name, as --trace-gpu), else
/// the model its recorded GPU name resolves to (topo::find_gpu_by_device_name). ConfigError
/// naming the trace and the recorded name when neither resolves.
const topo::GpuSpec& trace_gpu(const trace::KinetoTrace& t, const std::string& named);

/// The retimer from the GPU of `t` (as trace_gpu finds it) to `target`; nullopt when both are
/// the same model.
std::optional<trace::KernelRetimer> retimer_for(const trace::KinetoTrace& t, const std::string& named,
                                                const topo::GpuSpec& target);

/// The "trace_retime" dataset: HTA's trace_diff pair (one DLRM workload on a V100-SXM2-16GB and
/// on an A100-PG509-200, hta/trace_diff/{test,control} under `traces_dir`). The V100 trace's
/// kernels are retimed to the A100 and compared with what the A100 measured:
/// - the kernels both traces ran with one launch configuration (name, grid and block sizes), as
///   the sum of each configuration's median time x its instances in both, split into those under
///   one wave on both GPUs (kept) and the others (scaled by bandwidth);
/// - the matrix operators both traces ran at one shape (traces/profile_import.hpp; cuBLAS picks
///   other kernels on each GPU, so they match by operator, not by kernel name): the sum of their
///   median times.
/// A message and no cases when the traces are absent.
DatasetResult run_trace_retime(const std::string& traces_dir);

}  // namespace foresight::validate
