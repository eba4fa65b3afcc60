#include <fmt/format.h>

#include <cstdio>
#include <iostream>
#include <string>

#include "cli/commands.hpp"
#include "common/atomic_file.hpp"

namespace foresight::cli {

CLI::Validator at_least(long min) {
  return CLI::Validator(
      [min](std::string& value) -> std::string {
        std::size_t used = 0;
        long v = 0;
        try {
          v = std::stol(value, &used);
        } catch (const std::exception&) {
          used = 0;
        }
        if (used != value.size() || used == 0 || v < min) {
          return fmt::format("expected an integer >= {}, found \"{}\"", min, value);
        }
        return {};
      },
      fmt::format("INT>={}", min));
}

void emit(const std::string& path, const std::string& text) {
  if (path.empty() || path == "-") {
    std::fputs(text.c_str(), stdout);
    return;
  }
  sim::write_file_atomically(path, text);
}

void emit(const std::string& path, const std::function<void(std::ostream&)>& write) {
  if (path.empty() || path == "-") {
    std::cout.flush();
    write(std::cout);
    std::cout.flush();
    return;
  }
  sim::write_file_atomically(path, write);
}

}  // namespace foresight::cli
