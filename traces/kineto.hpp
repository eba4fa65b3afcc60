#pragma once
/// Reading PyTorch-profiler (Kineto) traces: the Chrome-trace JSON that torch.profiler writes,
/// plain or gzip-compressed (.json.gz). What replay and profile import need is extracted:
/// - GPU activities (cat kernel, gpu_memcpy, gpu_memset): name, start and duration (us), device,
///   stream and the correlation id of the runtime call that launched them; NCCL kernels with the
///   collective, message elements, dtype and group size where Kineto recorded them;
/// - CUDA runtime calls (cat cuda_runtime): name, CPU thread, start, duration, correlation id;
/// - CPU operators (cat cpu_op): name, thread, start, duration and External id;
/// - iterations: the ProfilerStep#N annotations;
/// - the GPUs' properties (deviceProperties) and distributedInfo (rank, world size).
/// A malformed document is a TraceError naming the file and the byte where parsing failed, a
/// truncated gzip stream one naming the file; events missing what their category needs are
/// TraceErrors naming the event's index.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace foresight::trace {

struct KinetoGpuOp {
  enum class Kind : std::uint8_t { kernel, memcpy, memset };
  Kind kind = Kind::kernel;
  std::string name;
  double ts_us = 0.0;
  double dur_us = 0.0;
  int device = 0;
  std::int64_t stream = 0;
  std::int64_t correlation = -1;
  /// NCCL kernels: "allreduce", "broadcast", ... from Kineto's "Collective name", or the kind
  /// parsed from the kernel name (ncclKernel_AllReduce_..., ncclDevKernel_SendRecv); empty otherwise.
  std::string collective;
  double message_elems = -1.0;  ///< "In msg nelems" where recorded, else -1
  std::string dtype;
  int group_size = 0;
  /// Kernels: the launch configuration where Kineto recorded it ("grid", "block", "registers per
  /// thread", "shared memory" per block); 0 where not.
  std::int64_t blocks = 0;  ///< grid x * y * z
  int threads_per_block = 0;
  int registers_per_thread = 0;
  std::int64_t shared_bytes = 0;
  bool nccl() const { return !collective.empty(); }
};

struct KinetoRuntimeCall {
  std::string name;
  std::int64_t tid = 0;
  double ts_us = 0.0;
  double dur_us = 0.0;
  std::int64_t correlation = -1;
};

struct KinetoCpuOp {
  std::string name;
  std::int64_t tid = 0;
  double ts_us = 0.0;
  double dur_us = 0.0;
  std::int64_t external_id = -1;
  /// "Input Dims" and "Input type" where recorded (record_shapes=True): one entry per input,
  /// an empty shape for scalars; empty when not recorded.
  std::vector<std::vector<std::int64_t>> input_dims;
  std::vector<std::string> input_types;
};

struct KinetoStep {
  int number = 0;  ///< N of ProfilerStep#N
  double ts_us = 0.0;
  double dur_us = 0.0;
};

struct KinetoTrace {
  std::string path;
  std::vector<KinetoGpuOp> gpu_ops;         ///< in start order
  std::vector<KinetoRuntimeCall> runtime;  ///< in start order
  std::vector<KinetoCpuOp> cpu_ops;        ///< in start order
  std::vector<KinetoStep> steps;           ///< in start order
  std::string gpu_name;  ///< deviceProperties[0].name, or empty
  int sm_count = 0;
  int rank = -1;        ///< distributedInfo.rank, or -1
  int world_size = 0;   ///< distributedInfo.world_size, or 0

  /// GPU ops starting inside step `s`'s window.
  std::vector<const KinetoGpuOp*> gpu_ops_in(const KinetoStep& s) const;
  /// Step `index` (0-based; -1 the last, -2 the one before...); TraceError naming the file when
  /// the trace has no step or none at that index.
  const KinetoStep& step_at(int index) const;
};

/// The text of a trace file: a .json file's bytes, a .json.gz file's decompressed; TraceError
/// naming the file when it is not a regular file, is too large, or is corrupt.
std::string read_trace_text(const std::string& path);
/// Reads `path` (.json or .json.gz); TraceError as described above.
KinetoTrace load_kineto(const std::string& path);
/// The decompressed bytes of gzip data (one member or several concatenated); TraceError naming
/// `origin` when it is corrupt or truncated, or past `max_bytes` (a gzip bomb).
std::string gunzip(std::string_view bytes, const std::string& origin, std::size_t max_bytes);
/// The .json files of an (uncompressed) tar archive, as (member name, text), in archive order;
/// TraceError naming `origin` for a member cut short.
std::vector<std::pair<std::string, std::string>> tar_json_members(std::string_view tar, const std::string& origin);
/// The .json files of a gzip-compressed tar archive (.tar.gz, .tgz: several ranks' traces),
/// as (member name, text), in archive order; TraceError for a truncated or malformed archive.
std::vector<std::pair<std::string, std::string>> read_tar_gz_json(const std::string& path);
/// The traces of `path`: the members of a .tar.gz / .tgz archive (each named "ARCHIVE:MEMBER"),
/// or the one trace of a .json / .json.gz file; TraceError for a member that is not a Kineto
/// trace or an archive without one.
std::vector<KinetoTrace> load_kineto_files(const std::string& path);
/// Parses trace text; `origin` names it in messages.
KinetoTrace parse_kineto(const std::string& text, const std::string& origin);

}  // namespace foresight::trace
