#include "common/atomic_file.hpp"

#include <fmt/format.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "common/error.hpp"

namespace foresight::sim {

void write_file_atomically(const std::string& path, std::string_view text) {
  write_file_atomically(path, [text](std::ostream& out) {
    out.write(text.data(), static_cast<std::streamsize>(text.size()));
  });
}

void write_file_atomically(const std::string& path, const std::function<void(std::ostream&)>& write) {
  const std::filesystem::path target(path);
  std::filesystem::path tmp = target;
  tmp += ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) {
      throw ConfigError(fmt::format("{}: cannot write ({})", tmp.string(), std::strerror(errno)));
    }
    try {
      write(out);
    } catch (...) {
      out.close();
      std::filesystem::remove(tmp);
      throw;
    }
    out.flush();
    if (!out) {
      out.close();
      std::filesystem::remove(tmp);
      throw ConfigError(fmt::format("{}: write failed", tmp.string()));
    }
  }
  std::error_code ec;
  std::filesystem::rename(tmp, target, ec);
  if (ec) {
    std::filesystem::remove(tmp);
    throw ConfigError(fmt::format("{}: cannot rename the result into place ({})", path, ec.message()));
  }
}

}  // namespace foresight::sim
