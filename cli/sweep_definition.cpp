#include "cli/sweep_definition.hpp"

#include <fmt/core.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "cli/commands.hpp"
#include "common/error.hpp"
#include "run/calibration.hpp"
#include "run/prices.hpp"

namespace foresight::cli {

Shard parse_shard(const std::string& text) {
  // Digits, one slash, digits: whole_integer alone would take " 3" and "+3".
  const auto slash = text.find('/');
  const bool plain = text.find_first_not_of("0123456789/") == std::string::npos &&
                     slash != std::string::npos && text.find('/', slash + 1) == std::string::npos;
  const auto index = plain ? whole_integer(text.substr(0, slash)) : std::nullopt;
  const auto count = plain ? whole_integer(text.substr(slash + 1)) : std::nullopt;
  if (!index || !count || *index < 0 || *count < 1) {
    throw sim::ConfigError(fmt::format(
        "expected I/N, shard I of N with 0 <= I < N (such as 0/4), found \"{}\"", text));
  }
  if (*index >= *count) {
    // Slurm numbers array tasks as --array asks, 1..N included: say which convention this is.
    throw sim::ConfigError(
        fmt::format("shard {} of {} does not exist: shards count from 0, expected 0 to {} "
                    "(use --array=0-{} and --shard $SLURM_ARRAY_TASK_ID/{}), found \"{}\"",
                    *index, *count, *count - 1, *count - 1, *count, text));
  }
  return {static_cast<std::size_t>(*index), static_cast<std::size_t>(*count)};
}

namespace {

std::vector<strategy::SweepDimension> dimensions(const SweepOptions& o) {
  std::vector<strategy::SweepDimension> dims;
  const auto list = comma_list;
  if (!o.gpus.empty()) dims.push_back({"gpus", "cluster.gpus", list("--gpus", o.gpus)});
  if (!o.micro_batch.empty())
    dims.push_back({"micro_batch", "plan.micro_batch", list("--micro-batch", o.micro_batch)});
  for (const std::string& v : o.vary) {
    const auto eq = v.find('=');
    if (eq == std::string::npos || eq == 0) {
      throw sim::ConfigError(fmt::format(
          "--vary: expected PATH=V1,V2,... such as plan.precision=fp32,amp_fp16, found \"{}\"", v));
    }
    dims.push_back({v.substr(0, eq), v.substr(0, eq), list("--vary", v.substr(eq + 1))});
  }
  if (dims.empty())
    throw sim::ConfigError("sweep: nothing to vary: give --gpus, --micro-batch or --vary");
  return dims;
}

/// 64-bit FNV-1a: stable across machines and builds (std::hash is neither).
class Fnv1a {
 public:
  void add(std::string_view bytes) {
    for (const char c : bytes) {
      hash_ ^= static_cast<unsigned char>(c);
      hash_ *= 0x100000001b3ULL;
    }
    // A separator after each piece, so that ("ab", "c") and ("a", "bc") differ.
    hash_ ^= 0xffU;
    hash_ *= 0x100000001b3ULL;
  }
  /// The bytes of the file at `path`, or its name when it cannot be read (the sweep then fails on
  /// it anyway, with the loader's message).
  void add_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in || !std::filesystem::is_regular_file(path)) {
      add("unreadable " + path);
      return;
    }
    add(std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()));
  }
  std::string hex() const { return fmt::format("{:016x}", hash_); }

 private:
  std::uint64_t hash_ = 0xcbf29ce484222325ULL;
};

std::string fingerprint(const SweepOptions& o, const std::vector<strategy::Override>& shared,
                        const std::vector<strategy::SweepDimension>& dims) {
  Fnv1a h;
  h.add("foresight sweep 1");  // the format of what is hashed; change it when that changes
  h.add_file(o.scenario);
  for (const auto& s : shared) h.add(s.path + "=" + s.value);
  for (const auto& d : dims) {
    h.add(d.column);
    h.add(d.path);
    for (const auto& v : d.values) h.add(v);
  }
  h.add_file(o.flags.calibration.empty() ? run::default_calibration_path() : o.flags.calibration);
  h.add_file(o.flags.prices.empty() ? strategy::default_prices_path() : o.flags.prices);
  h.add(o.flags.profile.empty() ? std::string("no profile") : std::string("profile"));
  if (!o.flags.profile.empty()) h.add_file(o.flags.profile);
  return h.hex();
}

}  // namespace

std::string SweepDefinition::title() const {
  return fmt::format("foresight sweep {}", std::filesystem::path(scenario.path).filename().string());
}

SweepDefinition make_sweep_definition(const SweepOptions& o) {
  // The overrides before the dimensions: a bad --set is reported before a bad --vary.
  auto shared = o.flags.overrides();
  auto dims = dimensions(o);
  SweepDefinition def{strategy::make_sweep({o.scenario, std::nullopt}, std::move(shared), std::move(dims)), ""};
  def.fingerprint = fingerprint(o, def.shared, def.dims);
  return def;
}

std::string encode_result(const strategy::ConfigResult& r) {
  std::string out;
  const auto put = [&out](const std::string& s) { out += fmt::format("{}:{}", s.size(), s); };
  put(r.summary);
  put(r.ran ? "1" : "0");
  put(r.oom ? "1" : "0");
  put(fmt::format("{:.17g}", r.iteration_s));  // 17 digits: the double exactly
  for (const auto& field : r.row) put(field);
  return out;
}

strategy::ConfigResult decode_result(const std::string& bytes) {
  std::vector<std::string> items;
  std::size_t pos = 0;
  while (pos < bytes.size()) {
    const auto colon = bytes.find(':', pos);
    const auto size =
        colon == std::string::npos ? std::nullopt : whole_integer(bytes.substr(pos, colon - pos));
    if (!size || *size < 0 || static_cast<std::size_t>(*size) > bytes.size() - colon - 1) {
      throw sim::InternalError(
          fmt::format("sweep: a malformed result message at byte {} of {}", pos, bytes.size()));
    }
    items.push_back(bytes.substr(colon + 1, static_cast<std::size_t>(*size)));
    pos = colon + 1 + static_cast<std::size_t>(*size);
  }
  if (items.size() < 4)
    throw sim::InternalError(
        fmt::format("sweep: a result message of {} items, expected 4 or more", items.size()));
  strategy::ConfigResult r;
  r.summary = items[0];
  r.ran = items[1] == "1";
  r.oom = items[2] == "1";
  r.iteration_s = std::stod(items[3]);
  r.row.assign(items.begin() + 4, items.end());
  return r;
}

}  // namespace foresight::cli
