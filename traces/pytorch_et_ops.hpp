#pragma once
/// What the ops of a PyTorch execution trace (traces/pytorch_et.hpp) put on the GPU: which ops
/// launch nothing (views, allocations), which are user annotations, the kernels of the ops whose
/// shapes cost them (GEMMs, convolutions, fused attention), the bytes other ops move, and what a
/// record_param_comms says about its collective. traces/pytorch_et_graph.hpp builds on these.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "collectives/collective_types.hpp"
#include "exec/op_signature.hpp"
#include "traces/pytorch_et.hpp"

namespace foresight::trace {

/// Leaf ops that launch no kernel: views, metadata, allocations (the caching allocator), and the
/// nccl:* ranges inside record_param_comms.
bool et_launches_nothing(std::string_view name);
/// User annotations and the trace's own ranges (RecordScope 7, "## ... ##", ProfilerStep#N, the
/// process and thread roots): not ops themselves.
bool et_annotation(const EtNode& n);
bool et_thread_root(const EtNode& n);
bool et_touches_gpu(const EtNode& n);
/// Bytes an op moves: its GPU tensors read and written (a tensor once per side).
double et_moved_bytes(const EtNode& n);
double et_output_bytes(const EtNode& n);
/// "mm" of "aten::mm".
std::string_view et_short_name(std::string_view name);
/// The kernels of a GEMM (aten::mm, addmm, bmm, baddbmm), a 2-D convolution (cuDNN's forward;
/// convolution_backward's input and weight gradients as its output_mask asks, and a bias
/// gradient) or fused attention (scaled_dot_product_*_attention, _flash/_efficient_attention and
/// their backward), from the op's shapes; nullopt for other ops and for these without GPU tensors
/// of the expected rank (a wrapper whose parts are costed instead).
std::optional<std::vector<sim::OpSignature>> et_shaped_kernels(const EtNode& n);

/// What a collective's record_param_comms says.
struct EtCommInfo {
  std::string name;  ///< lower case, without underscores: "allreduce", "allgather", "wait", ...
  std::int64_t seq = -1;
  std::int64_t pg_size = -1;  ///< the group's size where recorded, else -1
  std::string pg_name;
  double bytes = 0.0;          ///< its tensors' bytes (inputs)
  double output_bytes = 0.0;
  std::vector<std::int64_t> in_split;
};

EtCommInfo et_comm_info(const EtNode& n);
/// NCCL's collective for record_param_comms's name; nullopt for a wait, and a TraceError naming
/// `where` for point-to-point, gather and scatter, which are not replayed.
std::optional<sim::CollectiveOp> et_collective(const EtCommInfo& c, const std::string& where);

}  // namespace foresight::trace
