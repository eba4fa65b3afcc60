#pragma once
/// Writing result files so that a failed or interrupted run never leaves a truncated one: the
/// text goes to a temporary file beside the target, which is then renamed over it.

#include <functional>
#include <ostream>
#include <string>
#include <string_view>

namespace foresight::sim {

/// Writes `text` to `path` atomically; ConfigError naming the path when it cannot.
void write_file_atomically(const std::string& path, std::string_view text);
/// The same for output made in pieces: `write` streams into the temporary file. When it throws,
/// or the file cannot be written, the temporary file is removed and nothing replaces `path`.
void write_file_atomically(const std::string& path, const std::function<void(std::ostream&)>& write);

}  // namespace foresight::sim
