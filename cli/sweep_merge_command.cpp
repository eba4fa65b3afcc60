// foresight sweep-merge OUT.csv SHARD.csv...: the shard files of `foresight sweep --shard I/N`
// joined into the CSV that one `foresight sweep` with the same options writes, byte for byte.
// Every shard must come from the same sweep (the fingerprint on its first line), each of 0..N-1
// exactly once, each complete; otherwise nothing is written.
#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <set>

#include "cli/commands.hpp"
#include "cli/sweep_table.hpp"
#include "common/atomic_file.hpp"
#include "common/error.hpp"
#include "run/sweep.hpp"

namespace foresight::cli {
namespace {

struct MergeOptions {
  std::string output;
  std::vector<std::string> shards;
  std::string plot;
  bool force = false;
};

/// One shard file as read: its stamp, its columns (without "config") and its rows by configuration.
struct ShardFile {
  std::string path;
  ShardStamp stamp;
  std::vector<std::string> header;
  std::map<std::size_t, std::vector<std::string>> rows;
};

std::string read_text(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec))
    throw sim::ConfigError(fmt::format("{}: cannot open (no such file)", path));
  std::ifstream in(path, std::ios::binary);
  if (!in) throw sim::ConfigError(fmt::format("{}: cannot open", path));
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

ShardFile read_shard(const std::string& path) {
  ShardFile f;
  f.path = path;
  bool complete = true;
  const auto records = csv_records(read_text(path), &complete);
  const auto stamp = records.empty() ? std::nullopt : parse_stamp_line(records[0]);
  if (!stamp) {
    throw sim::ConfigError(fmt::format(
        "{}: not a sweep shard: expected a first line \"# foresight sweep shard I/N of C "
        "configurations, sweep ..., scenario ...\" as `foresight sweep --shard I/N` "
        "writes, found \"{}\"",
        path, records.empty() ? std::string() : records[0].substr(0, 80)));
  }
  f.stamp = *stamp;
  const auto columns = records.size() > 1 ? parse_csv_line(records[1]) : std::vector<std::string>{};
  const auto& results = strategy::sweep_result_columns();
  if (columns.size() < 2 + results.size() || columns[0] != "config" ||
      !std::equal(results.begin(), results.end(), columns.end() - static_cast<long>(results.size()))) {
    throw sim::ConfigError(fmt::format(
        "{}: line 2: expected the columns config, the swept fields, then {}..., found \"{}\"", path,
        results.front(), records.size() > 1 ? records[1] : std::string()));
  }
  f.header.assign(columns.begin() + 1, columns.end());
  for (std::size_t r = 2; r < records.size(); ++r) {
    const auto fields = parse_csv_line(records[r]);
    const auto config = whole_integer(fields[0]);
    const bool last = r + 1 == records.size();
    if (fields.size() != columns.size() || !config || *config < 0) {
      throw sim::ConfigError(fmt::format(
          "{}: line {}: expected {} fields, the first a configuration index, found \"{}\"{}", path,
          r + 1, columns.size(), records[r].substr(0, 80),
          last && !complete ? " (a row cut by an interruption: rerun the shard with --resume)"
                            : ""));
    }
    const auto i = static_cast<std::size_t>(*config);
    if (i >= f.stamp.configs || !f.stamp.shard.owns(i)) {
      throw sim::ConfigError(
          fmt::format("{}: line {}: configuration {} is not in shard {}/{} of {} configurations",
                      path, r + 1, i, f.stamp.shard.index, f.stamp.shard.count, f.stamp.configs));
    }
    if (f.rows.count(i))
      throw sim::ConfigError(
          fmt::format("{}: line {}: configuration {} a second time", path, r + 1, i));
    f.rows[i].assign(fields.begin() + 1, fields.end());
  }
  return f;
}

/// "gpus=8 micro_batch=32" from a row's configuration columns.
std::string describe_row(const std::vector<std::string>& header,
                         const std::vector<std::string>& row) {
  std::string out;
  const std::size_t results = strategy::sweep_result_columns().size();
  for (std::size_t c = 0; c + results < header.size(); ++c)
    out += fmt::format("{}{}={}", c ? " " : "", header[c], row[c]);
  return out;
}

int run_merge(const MergeOptions& o) {
  std::error_code ec;
  if (!o.force && std::filesystem::exists(o.output, ec)) {
    throw sim::ConfigError(
        fmt::format("{} exists: pass --force to overwrite it, or name another file", o.output));
  }
  std::vector<ShardFile> shards;
  for (const auto& path : o.shards) shards.push_back(read_shard(path));
  const ShardFile& first = shards.front();
  const std::size_t count = first.stamp.shard.count;
  std::map<std::size_t, const ShardFile*> by_index;
  for (const ShardFile& f : shards) {
    if (f.stamp.fingerprint != first.stamp.fingerprint || f.stamp.configs != first.stamp.configs ||
        f.header != first.header) {
      throw sim::ConfigError(fmt::format(
          "{}: a shard of another sweep (sweep {}, {} configurations of {}) than {} (sweep {}, "
          "{} configurations of {}): merge the shards of one sweep, run with the same "
          "scenario and options",
          f.path, f.stamp.fingerprint, f.stamp.configs, f.stamp.scenario, first.path,
          first.stamp.fingerprint, first.stamp.configs, first.stamp.scenario));
    }
    if (f.stamp.shard.count != count) {
      throw sim::ConfigError(
          fmt::format("{}: shard {}/{}, but {} is shard {}/{}: the shards of one merge must be cut "
                      "with the same N",
                      f.path, f.stamp.shard.index, f.stamp.shard.count, first.path,
                      first.stamp.shard.index, count));
    }
    const auto [it, added] = by_index.emplace(f.stamp.shard.index, &f);
    if (!added) {
      throw sim::ConfigError(fmt::format("shard {}/{} given twice: {} and {}", f.stamp.shard.index,
                                         count, it->second->path, f.path));
    }
  }
  if (by_index.size() != count) {
    std::string missing;
    for (std::size_t i = 0; i < count; ++i) {
      if (!by_index.count(i))
        missing += fmt::format("{}{}/{}", missing.empty() ? "" : ", ", i, count);
    }
    throw sim::ConfigError(fmt::format(
        "shard{} {} missing: a sweep cut into {} needs all {} shard files (0/{} to {}/{}), "
        "found {}",
        count - by_index.size() == 1 ? "" : "s", missing, count, count, count, count - 1, count,
        by_index.size()));
  }
  // Every configuration, from the one shard that owns it.
  std::vector<std::vector<std::string>> rows(first.stamp.configs);
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const ShardFile& f = *by_index.at(i % count);
    const auto row = f.rows.find(i);
    if (row == f.rows.end()) {
      throw sim::ConfigError(
          fmt::format("{}: shard {}/{} lacks configuration {} of {}: was it interrupted? rerun it "
                      "with the same options and --resume",
                      f.path, f.stamp.shard.index, count, i, rows.size()));
    }
    rows[i] = row->second;
  }
  sim::write_file_atomically(o.output, sweep_csv_text(first.header, rows));
  fmt::print(stderr, "sweep-merge: {} shard{}, {} configurations in {}\n", count,
             count == 1 ? "" : "s", rows.size(), o.output);
  if (!o.plot.empty()) {
    write_sweep_plot(o.plot, first.header, rows,
                     fmt::format("foresight sweep {}", first.stamp.scenario));
    fmt::print(stderr, "sweep-merge: plot in {}\n", o.plot);
  }
  std::size_t failed = 0;
  for (const auto& row : rows) failed += row.back().empty() ? 0 : 1;
  if (failed > 0) {
    for (const auto& row : rows) {
      if (!row.back().empty())
        fmt::print(stderr, "sweep-merge: {}: error: {}\n", describe_row(first.header, row),
                   row.back());
    }
    fmt::print(stderr,
               "foresight: error: {} of {} configurations failed; their rows carry the error\n",
               failed, rows.size());
    return 1;
  }
  return 0;
}

}  // namespace

void add_sweep_merge_command(CLI::App& app, Runner& run) {
  auto o = std::make_shared<MergeOptions>();
  CLI::App* cmd = app.add_subcommand(
      "sweep-merge",
      "Join the shard files of `foresight sweep --shard I/N` into the CSV one sweep writes");
  cmd->add_option("output", o->output, "The merged CSV (as `foresight sweep --csv` writes it)")
      ->required();
  cmd->add_option("shards", o->shards,
                  "Every shard file of the sweep, in any order (sweep-shard-*-of-N.csv)")
      ->required();
  cmd->add_option("--plot", o->plot,
                  "SVG plot of iteration time and throughput vs GPUs, as `foresight sweep --plot`");
  cmd->add_flag("--force", o->force, "Overwrite the output file when it exists");
  cmd->callback([o, &run] { run = [o] { return run_merge(*o); }; });
}

}  // namespace foresight::cli
