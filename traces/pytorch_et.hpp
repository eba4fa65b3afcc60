#pragma once
/// Reading PyTorch execution traces (ETs): the JSON that torch.profiler.ExecutionTraceObserver
/// writes, Chakra's "host ET", and the "host+device ET" that Chakra's trace linker (chakra_trace_link)
/// makes of one and a Kineto trace of the same run.
///
/// Two layouts are read (PyTorch and Chakra name them by the document's "schema"):
/// - 1.0.1: flat nodes {name, id, rf_id, parent, fw_parent, seq_id, scope, tid, fw_tid,
///   op_schema, inputs, input_shapes, input_types, outputs, output_shapes, output_types};
/// - 1.0.2 and later (1.0.2-chakra.0.0.4, 1.1.0-chakra.0.0.4, ...): {id, name, ctrl_deps (the
///   parent's id), inputs and outputs as {values, shapes, types}, attrs: [{name, type, value}]}
///   with rf_id, scope, tid, op_schema and, on record_param_comms from 1.1.0 on, the collective
///   (collective_name, pg_name, pg_size, in_msg_nelems, dtype, ...).
/// A tensor argument is [tensor id, storage id, offset, elements, bytes per element, device]; a
/// list of tensors (GenericList[Tensor(...)]) a list of them.
///
/// The linker's additions are read too: a host op matched to the Kineto trace carries
/// inclusive_dur, exclusive_dur and ts (microseconds on the Kineto clock); a GPU op is a node of
/// its own with cat ("kernel", "gpu_memcpy"), ts, inclusive_dur and stream, whose ctrl_deps is the
/// host op that launched it.
///
/// Errors are TraceErrors naming the file, the node (index and id) and the field, with what was
/// expected and what was found. Keys the reader does not use are ignored: the format grows a key
/// with most PyTorch releases.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace foresight::trace {

/// A tensor argument.
struct EtTensor {
  std::int64_t id = 0;
  std::int64_t storage = 0;
  std::int64_t offset = 0;
  std::int64_t elements = 0;
  std::int64_t element_bytes = 0;
  std::string device;  ///< "cuda:0", "cpu", ...
  bool on_gpu() const { return device.rfind("cuda", 0) == 0; }
  double bytes() const { return static_cast<double>(elements) * static_cast<double>(element_bytes); }
};

/// One argument of an op, as the ET types it.
struct EtArg {
  std::string type;                   ///< "Tensor(float)", "Int", "GenericList[Tensor(float)]", "String", ...
  std::vector<EtTensor> tensors;      ///< a tensor, or a list of tensors
  std::vector<std::int64_t> shape;    ///< a tensor's shape (the first, for a list); empty otherwise
  std::optional<std::int64_t> integer;
  std::optional<std::string> text;
  std::optional<bool> boolean;
  std::vector<std::int64_t> integers;  ///< a list of integers (GenericList[Int,...])
  std::vector<bool> bools;             ///< a list of booleans
};

struct EtNode {
  std::uint64_t id = 0;
  std::uint64_t parent = 0;  ///< "parent" (1.0.1) or "ctrl_deps" (later); a root names itself or 0
  std::string name;
  std::int64_t rf_id = -1;
  std::int64_t tid = 0;
  int scope = 0;  ///< PyTorch's RecordScope: 0 an operator, 1 a backward function, 7 a user annotation
  std::vector<EtArg> inputs;
  std::vector<EtArg> outputs;
  // record_param_comms (1.1.0 on): what the attributes say; empty / -1 where absent.
  std::string collective_name;
  std::string pg_name;
  std::int64_t pg_size = -1;
  // The linker's additions (host+device ETs), microseconds; -1 where absent.
  std::string cat;  ///< a GPU op's category ("kernel", "gpu_memcpy", "gpu_memset"); empty for host ops
  double ts_us = -1.0;
  double inclusive_us = -1.0;
  double exclusive_us = -1.0;
  std::int64_t stream = -1;
  bool gpu_op() const { return !cat.empty(); }
};

struct PytorchEt {
  std::string path;
  std::string schema;
  std::vector<EtNode> nodes;  ///< by id
  /// Process groups of "## process_group:init ##": name, size and ranks ([] = every rank).
  struct Group {
    std::string name;
    int size = 0;
    std::vector<int> ranks;
  };
  std::vector<Group> groups;
  /// Whether it holds the linker's GPU ops (a host+device ET).
  bool has_device_ops() const;
};

/// Whether `text` looks like a PyTorch ET: an object with "schema" and "nodes" (a cheap check on
/// its first bytes, for telling ETs from Kineto traces).
bool looks_like_pytorch_et(std::string_view text);
/// Parses ET text; `origin` names it in messages.
PytorchEt parse_pytorch_et(const std::string& text, const std::string& origin);
/// The ETs of `path`: one .json / .json.gz file, or every .json member of a .tar.gz / .tgz
/// archive (each named "ARCHIVE:MEMBER"), ordered by rank: the last number in each file name
/// (dlrm_eg_3.json, host.3.json), file order when the names do not number them distinctly.
std::vector<PytorchEt> load_pytorch_ets(const std::string& path);
/// Whether `path` holds PyTorch ETs (a file whose text, or an archive whose first .json member,
/// looks like one). False for files it cannot read.
bool is_pytorch_et_path(const std::string& path);

}  // namespace foresight::trace
