#include "fuzz/mutator.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <array>
#include <utility>

#include "common/error.hpp"

namespace foresight::fuzz {
namespace {

/// Numbers that find overflow, range and parsing mistakes: zero and signs, the edges of 32- and
/// 64-bit integers and one past them, beyond a double's range and below its smallest subnormal.
constexpr std::array<std::string_view, 16> kEdgeNumbers{
    "0",          "-0",         "-1",         "1",
    "2147483647", "2147483648", "4294967296", "-2147483649",
    "9223372036854775807", "9223372036854775808", "18446744073709551616", "1e308",
    "1e400",      "-1e400",     "1e-400",     "0.5"};

/// Bytes libFuzzer also favours: JSON's structure and quoting, NUL, the high bit, protobuf's
/// varint continuation.
constexpr std::array<char, 14> kEdgeBytes{'\0', '"', '\\', '{', '}', '[', ']', ',', ':', '-', '.', 'e',
                                          static_cast<char>(0x7f), static_cast<char>(0xff)};

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

bool is_digit(char c) { return c >= '0' && c <= '9'; }

}  // namespace

std::vector<std::string> parse_dictionary(std::string_view text, std::string_view origin) {
  std::vector<std::string> tokens;
  std::size_t line_no = 0;
  while (!text.empty()) {
    ++line_no;
    const std::size_t end = text.find('\n');
    std::string_view line = text.substr(0, end);
    text = end == std::string_view::npos ? std::string_view() : text.substr(end + 1);
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ' || line.back() == '\t')) line.remove_suffix(1);
    while (!line.empty() && (line.front() == ' ' || line.front() == '\t')) line.remove_prefix(1);
    if (line.empty() || line.front() == '#') continue;
    const auto bad = [&](std::string_view why) {
      sim::raise(sim::ErrorKind::config, fmt::format("{}: line {}: expected a dictionary entry [name=]\"token\", {}",
                                                     origin, line_no, why));
    };
    const std::size_t open = line.find('"');
    if (open == std::string_view::npos || line.back() != '"' || open + 1 >= line.size()) bad("found no quoted token");
    if (open > 0 && line[open - 1] != '=') bad("found text before the quote that is not name=");
    const std::string_view body = line.substr(open + 1, line.size() - open - 2);
    std::string token;
    for (std::size_t i = 0; i < body.size(); ++i) {
      if (body[i] != '\\') {
        token += body[i];
        continue;
      }
      if (i + 1 >= body.size()) bad("found a backslash at the end of the token");
      const char e = body[++i];
      if (e == '\\' || e == '"') {
        token += e;
      } else if (e == 'x' && i + 2 < body.size() && hex_digit(body[i + 1]) >= 0 && hex_digit(body[i + 2]) >= 0) {
        token += static_cast<char>(hex_digit(body[i + 1]) * 16 + hex_digit(body[i + 2]));
        i += 2;
      } else {
        bad(fmt::format("found the escape \\{}", e));
      }
    }
    tokens.push_back(std::move(token));
  }
  return tokens;
}

Mutator::Mutator(std::uint64_t seed, std::vector<std::string> corpus, std::vector<std::string> dictionary,
                 std::size_t max_size)
    : rng_(seed), corpus_(std::move(corpus)), dictionary_(std::move(dictionary)), max_size_(max_size) {
  if (corpus_.empty()) throw sim::InternalError("Mutator: an empty corpus");
  if (max_size_ == 0) throw sim::InternalError("Mutator: a zero maximum size");
}

std::size_t Mutator::below(std::size_t n) { return static_cast<std::size_t>(rng_() % n); }

std::string Mutator::next() {
  std::string s = corpus_[below(corpus_.size())];
  const std::size_t count = 1 + below(5);
  for (std::size_t i = 0; i < count; ++i) mutate_once(s);
  if (s.size() > max_size_) s.resize(max_size_);
  return s;
}

void Mutator::replace_number(std::string& s) {
  // A digit run starting at a random place (or the first after it), swapped for an edge value.
  if (s.empty()) return;
  std::size_t at = below(s.size());
  while (at < s.size() && !is_digit(s[at])) ++at;
  if (at == s.size()) return;
  std::size_t begin = at;
  while (begin > 0 && (is_digit(s[begin - 1]) || s[begin - 1] == '.' || s[begin - 1] == '-')) --begin;
  std::size_t end = at;
  while (end < s.size() && (is_digit(s[end]) || s[end] == '.' || s[end] == 'e' || s[end] == 'E' || s[end] == '+' ||
                            s[end] == '-')) {
    ++end;
  }
  s.replace(begin, end - begin, kEdgeNumbers[below(kEdgeNumbers.size())]);
}

void Mutator::mutate_once(std::string& s) {
  const std::size_t kinds = 11;
  switch (below(kinds)) {
    case 0:  // flip a bit
      if (!s.empty()) s[below(s.size())] ^= static_cast<char>(1u << below(8));
      break;
    case 1:  // set a byte to any value
      if (!s.empty()) s[below(s.size())] = static_cast<char>(below(256));
      break;
    case 2:  // set a byte to an edge value
      if (!s.empty()) s[below(s.size())] = kEdgeBytes[below(kEdgeBytes.size())];
      break;
    case 3: {  // erase a range
      if (s.empty()) break;
      const std::size_t at = below(s.size());
      s.erase(at, 1 + below(std::min<std::size_t>(64, s.size() - at)));
      break;
    }
    case 4: {  // insert one byte, repeated
      const std::size_t at = below(s.size() + 1);
      const char c = below(2) == 0 ? kEdgeBytes[below(kEdgeBytes.size())] : static_cast<char>(below(256));
      s.insert(at, 1 + (below(4) == 0 ? below(128) : 0), c);
      break;
    }
    case 5: {  // copy a range of the input to another place
      if (s.empty()) break;
      const std::size_t from = below(s.size());
      const std::string part = s.substr(from, 1 + below(std::min<std::size_t>(256, s.size() - from)));
      s.insert(below(s.size() + 1), part);
      break;
    }
    case 6: {  // splice: a range of another corpus input in place of this input's tail
      const std::string& other = corpus_[below(corpus_.size())];
      if (other.empty()) break;
      const std::size_t from = below(other.size());
      s.resize(below(s.size() + 1));
      s += other.substr(from, 1 + below(other.size() - from));
      break;
    }
    case 7:
    case 8: {  // a dictionary token inserted or written over the input (twice as likely)
      if (dictionary_.empty()) break;
      const std::string& token = dictionary_[below(dictionary_.size())];
      const std::size_t at = below(s.size() + 1);
      if (below(2) == 0) {
        s.insert(at, token);
      } else {
        s.replace(at, std::min(token.size(), s.size() - at), token);
      }
      break;
    }
    case 9:
    case 10:  // a number swapped for an edge value (twice as likely: the readers are mostly numbers)
      replace_number(s);
      break;
    default:
      break;
  }
}

}  // namespace foresight::fuzz
