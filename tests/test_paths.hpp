#pragma once
// Test data is found through the paths Meson passes in (FORESIGHT_TEST_DATA, FORESIGHT_SOURCE_ROOT,
// FORESIGHT_SHARED),
// never through relative paths such as ../../.

#include <cstdlib>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <string_view>

namespace foresight::test {

/// Absolute path of `relative` under tests/data.
inline std::string data_path(std::string_view relative) {
  const char* root = std::getenv("FORESIGHT_TEST_DATA");
  if (root == nullptr) throw std::runtime_error("FORESIGHT_TEST_DATA is not set (run via meson test)");
  return (std::filesystem::path(root) / relative).string();
}

/// Absolute path of `relative` under the repository root (FORESIGHT_SOURCE_ROOT): examples/, docs/.
inline std::string source_path(std::string_view relative) {
  const char* root = std::getenv("FORESIGHT_SOURCE_ROOT");
  if (root == nullptr) throw std::runtime_error("FORESIGHT_SOURCE_ROOT is not set (run via meson test)");
  return (std::filesystem::path(root) / relative).string();
}

/// Absolute path of `relative` under the shared measured-data folder, or "" when that folder is
/// absent (tests that need it skip with a message).
inline std::string shared_path(std::string_view relative) {
  const char* root = std::getenv("FORESIGHT_SHARED");
  if (root == nullptr) return {};
  const auto p = std::filesystem::path(root) / relative;
  return std::filesystem::exists(p) ? p.string() : std::string{};
}

}  // namespace foresight::test
