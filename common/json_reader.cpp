#include "common/json_reader.hpp"

#include <fmt/core.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <span>
#include <sstream>

#include "common/unit_parser.hpp"

namespace foresight::topo {
namespace {

using nlohmann::json;

/// A JSON pointer token: "~" -> "~0", "/" -> "~1" (RFC 6901).
std::string escape_token(std::string_view key) {
  std::string out;
  for (const char c : key) {
    if (c == '~') {
      out += "~0";
    } else if (c == '/') {
      out += "~1";
    } else {
      out += c;
    }
  }
  return out;
}

std::string join(std::span<const std::string_view> items) {
  std::string out;
  for (const auto item : items) {
    if (!out.empty()) out += ", ";
    out += item;
  }
  return out;
}

/// The byte offset of the first '[' or '{' that opens level `limit` or deeper (the outermost
/// value is level 0, so `limit` levels are allowed), or npos. Brackets inside strings do not
/// count; a malformed text is left to the parser.
std::size_t nesting_past(std::string_view text, int limit) {
  int depth = -1;
  bool in_string = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;  // the escaped character, whatever it is
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth >= limit) return i;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return std::string_view::npos;
}

}  // namespace

JsonPath JsonPath::at(std::string_view key) const {
  return {pointer + "/" + escape_token(key), element};
}

JsonPath JsonPath::at(std::size_t index) const {
  return {pointer + "/" + std::to_string(index), element};
}

std::string shown(const json& v) {
  std::string s = v.dump();
  if (s.size() > 60) s = s.substr(0, 57) + "...";
  return fmt::format("{} {}", v.type_name(), s);
}

json JsonReader::parse(std::string_view text) const {
  // Nesting is bounded by a scan of the brackets outside strings, before nlohmann parses. A parser
  // callback could count it too, but any callback makes nlohmann 3.11's DOM parser search the
  // enclosing array for discarded values at every closing brace: quadratic in the array's length
  // (replaying a 54 MB Kineto trace took 24 s that way, 2.0 s without).
  if (const std::size_t at = nesting_past(text, kMaxDepth); at != std::string_view::npos) {
    sim::raise(kind_, fmt::format("{}: expected JSON nested at most {} levels deep, found deeper nesting at byte {}",
                                  origin_, kMaxDepth, at));
  }
  try {
    return json::parse(text);
  } catch (const json::parse_error& e) {
    sim::raise(kind_, fmt::format("{}: malformed JSON at byte {}: {}", origin_, e.byte, e.what()));
  } catch (const json::out_of_range& e) {
    // A number beyond a double's range (1e400): nlohmann stops with out_of_range.406.
    sim::raise(kind_, fmt::format("{}: malformed JSON: {}", origin_, e.what()));
  }
}

json JsonReader::parse_file() const {
  std::error_code ec;
  if (std::filesystem::exists(origin_, ec) && !std::filesystem::is_regular_file(origin_, ec)) {
    sim::raise(kind_, fmt::format("{}: expected a regular file, found a device, folder or other special file", origin_));
  }
  if (const auto size = std::filesystem::file_size(origin_, ec); !ec && size > kMaxFileBytes) {
    sim::raise(kind_, fmt::format("{}: expected a JSON file of at most {} bytes, found {} bytes", origin_,
                                  kMaxFileBytes, size));
  }
  std::ifstream in(origin_, std::ios::binary);
  if (!in) sim::raise(kind_, fmt::format("{}: cannot open the file", origin_));
  std::ostringstream text;
  text << in.rdbuf();
  return parse(text.str());
}

std::string JsonReader::where(const JsonPath& p) const {
  const std::string pointer = p.pointer.empty() ? "/" : p.pointer;
  if (p.element.empty()) return fmt::format("{}: {}", origin_, pointer);
  return fmt::format("{}: {} ({})", origin_, pointer, p.element);
}

void JsonReader::fail(const JsonPath& p, const std::string& message) const {
  sim::raise(kind_, fmt::format("{}: {}", where(p), message));
}

void JsonReader::check_object(const json& value, std::initializer_list<std::string_view> allowed,
                              const JsonPath& p, std::string_view what) const {
  check_object(value, std::span<const std::string_view>(allowed.begin(), allowed.size()), p, what);
}

void JsonReader::check_object(const json& value, std::span<const std::string_view> allowed, const JsonPath& p,
                              std::string_view what) const {
  if (!value.is_object()) fail(p, fmt::format("expected {} (an object), found {}", what, shown(value)));
  for (const auto& [key, unused] : value.items()) {
    bool known = false;
    for (const auto a : allowed) known = known || key == a;
    if (!known) {
      fail(p.at(key), fmt::format("unknown key \"{}\" in {}; expected only {}", key, what, join(allowed)));
    }
  }
}

const json& JsonReader::require(const json& obj, std::string_view key, const JsonPath& p,
                                std::string_view what) const {
  const auto it = obj.find(key);
  if (it == obj.end()) fail(p, fmt::format("missing required key \"{}\" in {}", key, what));
  return *it;
}

const json& JsonReader::array_at(const json& obj, std::string_view key, const JsonPath& p,
                                 std::string_view what) const {
  const json& v = require(obj, key, p, what);
  if (!v.is_array()) fail(p.at(key), fmt::format("expected an array, found {}", shown(v)));
  return v;
}

std::string JsonReader::string_at(const json& obj, std::string_view key, const JsonPath& p,
                                  std::string_view what) const {
  const json& v = require(obj, key, p, what);
  if (!v.is_string()) fail(p.at(key), fmt::format("expected a string, found {}", shown(v)));
  const auto& s = v.get_ref<const std::string&>();
  if (s.empty()) fail(p.at(key), "expected a non-empty string, found \"\"");
  return s;
}

double JsonReader::number_at(const json& obj, std::string_view key, const JsonPath& p,
                             std::string_view what) const {
  const json& v = require(obj, key, p, what);
  if (!v.is_number()) fail(p.at(key), fmt::format("expected a number, found {}", shown(v)));
  const double d = v.get<double>();
  if (!std::isfinite(d)) fail(p.at(key), fmt::format("expected a finite number, found {}", shown(v)));
  return d;
}

long long JsonReader::integer_at(const json& obj, std::string_view key, const JsonPath& p,
                                 std::string_view what, long long lo, long long hi) const {
  const json& v = require(obj, key, p, what);
  bool ok = false;
  if (v.is_number_unsigned()) {
    const auto u = v.get<unsigned long long>();
    ok = u <= static_cast<unsigned long long>(hi) && (lo <= 0 || u >= static_cast<unsigned long long>(lo));
  } else if (v.is_number_integer()) {
    const auto i = v.get<long long>();
    ok = i >= lo && i <= hi;
  } else if (v.is_number_float()) {
    // A whole number written with an exponent ("tokens": 2e12) is an integer; exact up to 2^53.
    const double d = v.get<double>();
    ok = std::isfinite(d) && d == std::floor(d) && std::fabs(d) <= 9007199254740992.0 &&
         d >= static_cast<double>(lo) && d <= static_cast<double>(hi);
    if (ok) return static_cast<long long>(d);
  }
  if (!ok) fail(p.at(key), fmt::format("expected an integer from {} to {}, found {}", lo, hi, shown(v)));
  return v.get<long long>();
}

bool JsonReader::bool_at(const json& obj, std::string_view key, const JsonPath& p,
                         std::string_view what) const {
  const json& v = require(obj, key, p, what);
  if (!v.is_boolean()) fail(p.at(key), fmt::format("expected true or false, found {}", shown(v)));
  return v.get<bool>();
}

std::string JsonReader::quantity_text(const json& obj, std::string_view key, const JsonPath& p,
                                      std::string_view what, std::string_view example) const {
  const json& v = require(obj, key, p, what);
  if (!v.is_string()) {
    fail(p.at(key), fmt::format("expected a quantity with a unit as a string such as \"{}\", found {}",
                                example, shown(v)));
  }
  return v.get<std::string>();
}

template <typename F>
auto JsonReader::parsed(const JsonPath& p, F&& parse) const {
  try {
    return parse(where(p));
  } catch (const sim::ConfigError& e) {
    sim::raise(kind_, e.what());
  }
}

sim::Bandwidth JsonReader::bandwidth_at(const json& obj, std::string_view key, const JsonPath& p,
                                        std::string_view what) const {
  const std::string text = quantity_text(obj, key, p, what, "25 GB/s");
  return parsed(p.at(key), [&](const std::string& w) { return sim::parse_bandwidth(text, w); });
}

sim::Time JsonReader::time_at(const json& obj, std::string_view key, const JsonPath& p,
                              std::string_view what) const {
  const std::string text = quantity_text(obj, key, p, what, "0.5 us");
  return parsed(p.at(key), [&](const std::string& w) { return sim::parse_time(text, w); });
}

sim::Bytes JsonReader::bytes_at(const json& obj, std::string_view key, const JsonPath& p,
                                std::string_view what) const {
  const std::string text = quantity_text(obj, key, p, what, "1.5 GiB");
  return parsed(p.at(key), [&](const std::string& w) { return sim::parse_bytes(text, w); });
}

}  // namespace foresight::topo
