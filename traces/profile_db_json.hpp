#pragma once
/// The profile database's file format (written by foresight-profile and by trace import, read by
/// `foresight simulate --profile`):
///   { "format": "foresight-profile-db", "version": 1,
///     "gpu": "A100-SXM4-40GB",                     (catalog name of the GPU measured)
///     "source": "how the numbers were obtained",
///     "memory_timing": "kernel",                   (optional: "kernel", the default, or "copy":
///                                                   memory-bound entries timed as a D2D copy of
///                                                   their bytes; sim::MemoryTiming)
///     "provenance": {"driver": "...", "cuda": "13.0", "date": "..."},   (scalars only, optional)
///     "kernels": [ {"kernel": "conv2d", "type": "conv_fprop", "dtype": "tf32",
///                   "shape": [128, 64, 32, 32, 64, 3, 3, 1, 1, 1], "batch_axis": 0,
///                   "seconds": 1.25e-4}, ... ] }
/// A kernel is matched by sim::OpSignature::key (kernel, dtype and every dimension but the batch
/// axis) and interpolated along its batch dimension. Unknown keys are rejected.

#include <string>
#include <string_view>

#include "exec/profile_db.hpp"

namespace foresight::trace {

/// Reads a profile database; ConfigError naming the file, JSON pointer, expected and found.
sim::ProfileDb load_profile_db(const std::string& path);
/// Parses profile-database text; `origin` names it in messages (a path, "<string>").
sim::ProfileDb parse_profile_db(std::string_view text, const std::string& origin);
/// The file text of `db`, with `provenance` pairs (key, value) written as strings.
std::string profile_db_json(const sim::ProfileDb& db, const std::vector<std::pair<std::string, std::string>>& provenance);

}  // namespace foresight::trace
