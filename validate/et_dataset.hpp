#pragma once
/// The "execution_traces" dataset: PyTorch execution traces replayed from their shapes alone
/// (validate/et_replay.hpp), against steps measured on the same job.

#include <string>

#include "validate/suite.hpp"

namespace foresight::validate {

/// Under `traces_dir`: PARAM's DLRM job (param/dlrm_pytorch_et.tar.gz, eight ranks' host ETs,
/// and param/dlrm_kineto.tar.gz, the same ranks' Kineto traces, per SOURCES.txt), replayed on
/// eight V100-SXM2-32GB (validate/data/topologies/v100-8gpu.json): each rank's replayed iteration
/// is a prediction of its measured ProfilerStep. The other ETs there, whose runs recorded no
/// time, are replayed and reported without a comparison. A message and no cases when absent.
DatasetResult run_execution_traces(const std::string& traces_dir);

}  // namespace foresight::validate
