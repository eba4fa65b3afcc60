#include <cstdio>

#include "cli/commands.hpp"
#include "sim/atomic_file.hpp"

namespace foresight::cli {

void emit(const std::string& path, const std::string& text) {
  if (path.empty() || path == "-") {
    std::fputs(text.c_str(), stdout);
    return;
  }
  sim::write_file_atomically(path, text);
}

}  // namespace foresight::cli
