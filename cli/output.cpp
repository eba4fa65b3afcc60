#include <fmt/core.h>

#include <cstdio>
#include <iostream>
#include <string>

#include "cli/commands.hpp"
#include "common/atomic_file.hpp"
#include "common/error.hpp"

namespace foresight::cli {

std::optional<long> whole_integer(const std::string& text) {
  std::size_t used = 0;
  long v = 0;
  try {
    v = std::stol(text, &used);
  } catch (const std::exception&) {
    return std::nullopt;
  }
  if (used != text.size() || used == 0) return std::nullopt;
  return v;
}

std::vector<std::string> comma_list(const std::string& flag, const std::string& text) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (true) {
    const auto comma = text.find(',', start);
    out.push_back(text.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (out.back().empty()) throw sim::ConfigError(fmt::format("{}: empty value in \"{}\"", flag, text));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

CLI::Validator at_least(long min) {
  return CLI::Validator(
      [min](std::string& value) -> std::string {
        const auto v = whole_integer(value);
        if (!v || *v < min) {
          return fmt::format("expected an integer >= {}, found \"{}\"", min, value);
        }
        return {};
      },
      fmt::format("INT>={}", min));
}

Outputs::~Outputs() {
  for (Staged& s : staged_) {
    if (s.discard) s.discard();
  }
}

void Outputs::emit(const std::string& path, const std::string& text) {
  emit(path, [&text](std::ostream& out) { out.write(text.data(), static_cast<std::streamsize>(text.size())); });
}

void Outputs::emit(const std::string& path, const std::function<void(std::ostream&)>& write) {
  if (path.empty() || path == "-") {
    std::cout.flush();
    write(std::cout);
    std::cout.flush();
    return;
  }
  staged_.push_back(Staged{sim::PendingFile(path, write), {}, {}});
}

void Outputs::stage(std::function<void()> put, std::function<void()> discard) {
  staged_.push_back(Staged{std::nullopt, std::move(put), std::move(discard)});
}

void emit(const std::string& path, const std::string& text) {
  Outputs out;
  out.emit(path, text);
  out.commit();
}

void Outputs::commit() {
  for (Staged& s : staged_) {
    if (s.file) {
      s.file->commit();
    } else {
      s.put();
      s.discard = nullptr;
    }
  }
  staged_.clear();
}

}  // namespace foresight::cli
