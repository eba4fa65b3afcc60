#pragma once
/// PyTorch execution traces (traces/pytorch_et.hpp) as an execution graph: one iteration of each
/// rank, on the target cluster.
///
/// An ET is a tree of record_function ranges per CPU thread. Its "ops" are the outermost ranges
/// that are not user annotations (RecordScope 7: "## forward ##", ProfilerStep#N, optimizer
/// labels): aten operators and autograd functions, in the order they began (node id), over every
/// thread of the process (the main thread waits in backward() while the autograd thread runs).
/// Inside an op, what reaches the GPU (traces/pytorch_et_ops.hpp):
/// - GEMMs (aten::mm, addmm, bmm, baddbmm), convolutions (cuDNN forward; convolution_backward as
///   input and weight gradients per its output_mask) and fused attention
///   (scaled_dot_product_*_attention and its backward) become kernels with signatures of their
///   shapes, timed by the caller's compute model;
/// - every other leaf op that reads or writes a GPU tensor, except views and allocations, is a
///   memory-bound kernel moving its tensors' bytes (gather-like ops: twice their outputs);
/// - record_param_comms is a collective over its process group, on the communication stream,
///   after the compute stream's work so far (ProcessGroupNCCL's stream wait); its "wait" makes
///   the compute stream wait for it; aten::_local_scalar_dense (.item()) and blocking copies to
///   the host block the host until the GPU is done.
/// Copies between host and GPU memory move at the GPU's PCIe rate; without non_blocking they hold
/// the host until they are done. Host time (docs/reference/training-frameworks.md sec. 9): every
/// operator the ET records costs the C++ dispatcher's ~1 us, an op called from Python (a forward
/// op, not an autograd function) ~1 us more, and every kernel or collective it launches ~5 us
/// (CUDA's launch), so that a pointwise op from Python costs ~7 us, as measured. An iteration
/// ends when its host has seen the GPU finish.
///
/// Host+device ETs (the linker's output) are timed as measured instead: each GPU op runs on its
/// recorded stream for its recorded time (NCCL kernels included, as they ran on the trace's
/// cluster), launched when the host op that launched it ended, and the host's time between
/// ops is the recorded time between them.
///
/// Process groups: a collective spans every rank when the ETs give every member of its group
/// (pg_size, else the ETs' count). One ET whose groups are larger stands for that many identical
/// ranks (a folded communicator: the others run the same program).

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "exec/execution_graph.hpp"
#include "traces/pytorch_et.hpp"

namespace foresight::trace {

struct EtGraphOptions {
  /// A kernel's time on the target GPU; required unless every ET is a host+device one timed as
  /// measured.
  std::function<sim::Time(const sim::OpSignature&)> kernel_time;
  /// Host time per recorded operator (the dispatcher), per op called from Python, and per
  /// kernel or collective launched (see above).
  sim::Time op_overhead = sim::Time::from_ps(1'000'000);
  sim::Time python_overhead = sim::Time::from_ps(1'000'000);
  sim::Time launch = sim::Time::from_ps(5'000'000);
  /// Bytes/s of copies between host and GPU memory (the GPU's PCIe line rate); 0: such copies
  /// are timed as GPU memory traffic.
  double host_copy_bandwidth = 0.0;
  /// Host+device ETs: their measured times (true) or costs from shapes, as a host ET (false).
  bool measured = true;
};

struct EtGraph {
  sim::ExecutionGraph graph;
  bool measured = false;   ///< timed from host+device ETs' recorded times
  int stands_for = 1;      ///< GPUs each rank's groups span (> ranks: one ET stands for several)
  std::size_t ops = 0;     ///< ETs' ops (see above), over every rank
  std::size_t kernels = 0;
  std::size_t gemms = 0, convolutions = 0, attention = 0, memory = 0;
  std::size_t collectives = 0;
  std::size_t waits = 0;       ///< compute-stream waits for a collective
  std::size_t host_syncs = 0;  ///< host blocked on the GPU (.item(), nonzero, blocking copies)
  std::size_t host_copies = 0;  ///< copies between host and GPU memory
  std::map<std::string, std::size_t> collective_kinds;  ///< record_param_comms names, by count
  /// Per rank: the host markers at the iteration's start and end.
  std::vector<sim::NodeId> begin;
  std::vector<sim::NodeId> end;
  /// Host+device ETs: the recorded iteration, from the first op's start to the last op's end
  /// (the slowest rank's); nullopt for host ETs, which record no times.
  std::optional<double> recorded_s;
};

/// The graph of `ranks` (rank i on GPU i). TraceError naming the file and node for: an ET without
/// a thread root, a collective whose group the ETs do not cover, ranks whose collectives differ
/// (count or kind), a point-to-point or other collective NCCL lacks, and a host ET without
/// `kernel_time`.
EtGraph pytorch_et_graph(const std::vector<PytorchEt>& ranks, const EtGraphOptions& options);

/// The replayed iteration of each rank (seconds): from its begin to its end marker.
std::vector<double> et_rank_seconds(const EtGraph& g, const sim::LargeVector<sim::Time>& node_end);

}  // namespace foresight::trace
