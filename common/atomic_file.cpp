#include "common/atomic_file.hpp"

#include <fcntl.h>
#include <fmt/core.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <streambuf>
#include <utility>

#include "common/error.hpp"

namespace foresight::sim {
namespace {

/// An output stream buffer over a file descriptor; remembers the first write error.
class FdBuf final : public std::streambuf {
 public:
  explicit FdBuf(int fd) : fd_(fd) { setp(buf_.data(), buf_.data() + buf_.size()); }
  /// errno of the first failed write, or 0.
  int error() const noexcept { return error_; }
  int sync() override { return drain() ? 0 : -1; }

 protected:
  int_type overflow(int_type c) override {
    if (!drain()) return traits_type::eof();
    if (!traits_type::eq_int_type(c, traits_type::eof())) {
      *pptr() = traits_type::to_char_type(c);
      pbump(1);
    }
    return traits_type::not_eof(c);
  }
  std::streamsize xsputn(const char* s, std::streamsize n) override {
    if (n >= static_cast<std::streamsize>(buf_.size())) {  // large pieces go straight out
      if (!drain() || !write_all(s, static_cast<std::size_t>(n))) return 0;
      return n;
    }
    return std::streambuf::xsputn(s, n);
  }

 private:
  bool drain() {
    const auto n = static_cast<std::size_t>(pptr() - pbase());
    setp(buf_.data(), buf_.data() + buf_.size());
    return write_all(buf_.data(), n);
  }
  bool write_all(const char* p, std::size_t n) {
    if (error_ != 0) return false;
    while (n > 0) {
      const ssize_t w = ::write(fd_, p, n);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) {
        error_ = w < 0 ? errno : EIO;
        return false;
      }
      p += w;
      n -= static_cast<std::size_t>(w);
    }
    return true;
  }
  int fd_;
  int error_ = 0;
  std::array<char, 1 << 16> buf_{};
};

std::string folder_of(const std::string& path) {
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  return parent.empty() ? std::string(".") : parent.string();
}

/// An unnamed file in `folder`, or -1 when its file system has none (errno says why).
int open_unnamed(const std::string& folder) {
#ifdef O_TMPFILE
  return ::open(folder.c_str(), O_TMPFILE | O_WRONLY | O_CLOEXEC, 0666);
#else
  (void)folder;
  errno = EOPNOTSUPP;
  return -1;
#endif
}

/// Whether open_unnamed's failure means only that the file system cannot (so a named file may).
bool unnamed_unsupported(int err) { return err == EOPNOTSUPP || err == EISDIR || err == EINVAL; }

std::string tmp_name(const std::string& path) { return fmt::format("{}.tmp-{}", path, ::getpid()); }

}  // namespace

PendingFile::PendingFile(const std::string& path, const std::function<void(std::ostream&)>& write)
    : path_(path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {
    // A device, pipe or terminal (/dev/null, /dev/stdout) is written as it is: renaming over it
    // would replace it.
    direct_ = true;
    fd_ = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd_ < 0) throw ConfigError(fmt::format("{}: cannot write ({})", path, std::strerror(errno)));
  } else {
    fd_ = open_unnamed(folder_of(path));
  }
  if (fd_ < 0) {
    const int err = errno;
    if (!unnamed_unsupported(err)) throw ConfigError(fmt::format("{}: cannot write ({})", path, std::strerror(err)));
    named_tmp_ = tmp_name(path);
    fd_ = ::open(named_tmp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
    if (fd_ < 0) {
      const int named_err = errno;
      named_tmp_.clear();
      throw ConfigError(fmt::format("{}: cannot write ({})", path, std::strerror(named_err)));
    }
  }
  try {
    FdBuf buf(fd_);
    std::ostream out(&buf);
    write(out);
    out.flush();
    if (buf.error() != 0 || !out) {
      throw ConfigError(fmt::format("{}: write failed ({})", path,
                                    std::strerror(buf.error() != 0 ? buf.error() : EIO)));
    }
  } catch (...) {
    discard();
    throw;
  }
}

PendingFile::PendingFile(PendingFile&& other) noexcept
    : path_(std::move(other.path_)),
      fd_(std::exchange(other.fd_, -1)),
      named_tmp_(std::move(other.named_tmp_)),
      direct_(other.direct_) {
  other.named_tmp_.clear();
}

PendingFile& PendingFile::operator=(PendingFile&& other) noexcept {
  if (this != &other) {
    discard();
    path_ = std::move(other.path_);
    fd_ = std::exchange(other.fd_, -1);
    named_tmp_ = std::move(other.named_tmp_);
    other.named_tmp_.clear();
    direct_ = other.direct_;
  }
  return *this;
}

PendingFile::~PendingFile() { discard(); }

void PendingFile::discard() noexcept {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  if (!named_tmp_.empty()) ::unlink(named_tmp_.c_str());
  named_tmp_.clear();
}

void PendingFile::commit() {
  if (fd_ < 0) throw InternalError(fmt::format("{}: committed twice, or after a failure", path_));
  if (direct_) {
    if (::close(std::exchange(fd_, -1)) != 0) {
      throw ConfigError(fmt::format("{}: write failed ({})", path_, std::strerror(errno)));
    }
    return;
  }
  std::string tmp = named_tmp_;
  if (tmp.empty()) {
    // Give the unnamed file a name beside the target, then move that name over the target.
    tmp = tmp_name(path_);
    ::unlink(tmp.c_str());  // a leftover of a process with our pid, long gone
    const std::string self = fmt::format("/proc/self/fd/{}", fd_);
    if (::linkat(AT_FDCWD, self.c_str(), AT_FDCWD, tmp.c_str(), AT_SYMLINK_FOLLOW) != 0) {
      const int err = errno;
      discard();
      throw ConfigError(fmt::format("{}: cannot put the result in place ({})", path_, std::strerror(err)));
    }
    named_tmp_ = tmp;
  }
  if (::close(std::exchange(fd_, -1)) != 0) {
    const int err = errno;
    discard();
    throw ConfigError(fmt::format("{}: write failed ({})", path_, std::strerror(err)));
  }
  if (::rename(tmp.c_str(), path_.c_str()) != 0) {
    const int err = errno;
    discard();
    throw ConfigError(fmt::format("{}: cannot rename the result into place ({})", path_, std::strerror(err)));
  }
  named_tmp_.clear();
}

void write_file_atomically(const std::string& path, std::string_view text) {
  write_file_atomically(path, [text](std::ostream& out) {
    out.write(text.data(), static_cast<std::streamsize>(text.size()));
  });
}

void write_file_atomically(const std::string& path, const std::function<void(std::ostream&)>& write) {
  PendingFile(path, write).commit();
}

}  // namespace foresight::sim
