#pragma once
/// Strict reading of Foresight's JSON inputs (topologies, calibration and dataset files, and the
/// scenario files of later libraries): unknown keys are rejected, types are checked, quantities
/// go through sim's unit parser, and every error names the file, the JSON pointer and the
/// element, what was expected and what was found. The error class is the caller's choice.

#include <initializer_list>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <string_view>

#include "common/error.hpp"
#include "common/units.hpp"

namespace foresight::topo {

/// Where a value is: its JSON pointer (RFC 6901) and, optionally, a readable element name.
struct JsonPath {
  std::string pointer;
  std::string element;  ///< e.g. "n0.gpu0", or empty
  JsonPath at(std::string_view key) const;
  JsonPath at(std::size_t index) const;
};

/// A JSON value as found, shortened for a message: `string "abc"`, `number 3`.
std::string shown(const nlohmann::json& value);

class JsonReader {
 public:
  /// `origin` names the document in messages (usually its file path).
  JsonReader(std::string origin, sim::ErrorKind kind) : origin_(std::move(origin)), kind_(kind) {}

  /// Parses `text`; a syntax error names the origin and nlohmann's byte position, a number beyond
  /// a double's range (1e400) the origin and the number, and nesting deeper than kMaxDepth is an
  /// error (nlohmann's dump and comparisons recurse: a document of 200,000 nested arrays
  /// overflowed the stack when an error message showed it).
  nlohmann::json parse(std::string_view text) const;
  /// Reads and parses the file `origin` names: a regular file of at most kMaxFileBytes (a device
  /// such as /dev/zero would be read until memory runs out).
  nlohmann::json parse_file() const;

  /// Foresight's JSON formats nest a few levels deep; Kineto traces under ten.
  static constexpr int kMaxDepth = 64;
  static constexpr std::uintmax_t kMaxFileBytes = std::uintmax_t{1} << 30;

  /// "file: /pointer (element)".
  std::string where(const JsonPath& p) const;
  [[noreturn]] void fail(const JsonPath& p, const std::string& message) const;

  /// Fails unless `value` is an object whose keys are all in `allowed`.
  void check_object(const nlohmann::json& value, std::initializer_list<std::string_view> allowed,
                    const JsonPath& p, std::string_view what) const;
  void check_object(const nlohmann::json& value, std::span<const std::string_view> allowed, const JsonPath& p,
                    std::string_view what) const;
  const nlohmann::json& require(const nlohmann::json& obj, std::string_view key, const JsonPath& p,
                                std::string_view what) const;
  const nlohmann::json& array_at(const nlohmann::json& obj, std::string_view key,
                                 const JsonPath& p, std::string_view what) const;

  std::string string_at(const nlohmann::json& obj, std::string_view key, const JsonPath& p,
                        std::string_view what) const;
  double number_at(const nlohmann::json& obj, std::string_view key, const JsonPath& p,
                   std::string_view what) const;
  /// An integer in [lo, hi]; a whole number written as a float (2e12, 8.0) counts, up to 2^53.
  long long integer_at(const nlohmann::json& obj, std::string_view key, const JsonPath& p,
                       std::string_view what, long long lo, long long hi) const;
  bool bool_at(const nlohmann::json& obj, std::string_view key, const JsonPath& p,
               std::string_view what) const;
  /// Quantities: strings with units, parsed by sim's unit parser.
  sim::Bandwidth bandwidth_at(const nlohmann::json& obj, std::string_view key, const JsonPath& p,
                              std::string_view what) const;
  sim::Time time_at(const nlohmann::json& obj, std::string_view key, const JsonPath& p,
                    std::string_view what) const;
  sim::Bytes bytes_at(const nlohmann::json& obj, std::string_view key, const JsonPath& p,
                      std::string_view what) const;

 private:
  std::string quantity_text(const nlohmann::json& obj, std::string_view key, const JsonPath& p,
                            std::string_view what, std::string_view example) const;
  template <typename F>
  auto parsed(const JsonPath& p, F&& parse) const;

  std::string origin_;
  sim::ErrorKind kind_;
};

}  // namespace foresight::topo
