#pragma once
/// Writing result files so that a failed or interrupted run never leaves a truncated one: the
/// text goes to a temporary file beside the target, which is then renamed over it.

#include <string>
#include <string_view>

namespace foresight::sim {

/// Writes `text` to `path` atomically; ConfigError naming the path when it cannot.
void write_file_atomically(const std::string& path, std::string_view text);

}  // namespace foresight::sim
