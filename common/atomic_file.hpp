#pragma once
/// Writing result files so that a failed or interrupted run never leaves a truncated one, nor a
/// temporary file behind.
///
/// A PendingFile is written in full before anything appears under its name. On Linux it is an
/// unnamed file in the target's folder (open with O_TMPFILE): if the process dies, even by
/// SIGKILL, the kernel drops it, since no name points at it. commit() links it under a temporary
/// name and renames that over the target in the same instant, so the target is either the old
/// file or the whole new one. Where the folder's file system has no unnamed files, the file is
/// written as `TARGET.tmp-PID` and renamed; an error or a discarded PendingFile removes it (a
/// SIGKILL between its creation and commit can then leave it, the only case that does). A target
/// that exists and is not a regular file (/dev/null, a pipe) is written directly.
///
/// A command that writes several files stages them all first and commits them only when every
/// one was written, so that one failing output leaves none of the others (cli::Outputs).

#include <functional>
#include <memory>
#include <ostream>
#include <string>
#include <string_view>

namespace foresight::sim {

class PendingFile {
 public:
  /// Writes `write`'s output to a new file that will replace `path`; ConfigError naming the path
  /// when it cannot be written, and whatever `write` throws (nothing is left behind either way).
  PendingFile(const std::string& path, const std::function<void(std::ostream&)>& write);
  PendingFile(PendingFile&& other) noexcept;
  PendingFile& operator=(PendingFile&& other) noexcept;
  PendingFile(const PendingFile&) = delete;
  PendingFile& operator=(const PendingFile&) = delete;
  /// Discards the file when it was not committed.
  ~PendingFile();

  const std::string& path() const noexcept { return path_; }
  /// Puts the file in place of `path` (once); ConfigError when it cannot.
  void commit();

 private:
  void discard() noexcept;
  std::string path_;
  int fd_ = -1;            ///< the unnamed file, or -1
  std::string named_tmp_;  ///< the named fallback, or empty
  bool direct_ = false;    ///< writing to `path` itself: a device or pipe, not a regular file
};

/// Writes `text` to `path` atomically; ConfigError naming the path when it cannot.
void write_file_atomically(const std::string& path, std::string_view text);
/// The same for output made in pieces: `write` streams into the new file. When it throws, or the
/// file cannot be written, nothing replaces `path` and no file is left.
void write_file_atomically(const std::string& path, const std::function<void(std::ostream&)>& write);

}  // namespace foresight::sim
