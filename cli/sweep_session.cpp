#include "cli/sweep_session.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <iterator>

#include "cli/commands.hpp"
#include "common/atomic_file.hpp"
#include "common/error.hpp"

namespace foresight::cli {

SweepSession::SweepSession(const SweepOptions& o, const SweepDefinition& def)
    : options_(o), def_(def), rows_(def.configs.size()), outcomes_(def.configs.size()) {
  if (!o.shard_text.empty()) shard_ = parse_shard(o.shard_text);
  // Shards of one sweep usually share a folder: each gets its own default name.
  csv_ = shard_ && !o.csv_given
             ? fmt::format("sweep-shard-{}-of-{}.csv", shard_->index, shard_->count)
             : o.csv;

  // Checks that need no simulation, before any runs.
  if (!o.plot.empty() &&
      std::find(def.header.begin(), def.header.end(), "gpus") == def.header.end()) {
    throw sim::ConfigError("--plot: the sweep must vary --gpus (the plot's x axis)");
  }
  std::error_code ec;
  if (!o.csv_given && !o.resume && !o.force && std::filesystem::exists(csv_, ec)) {
    throw sim::ConfigError(
        fmt::format("{} exists (an earlier sweep's results): pass --csv FILE for another file, "
                    "--resume to continue it, or --force to overwrite it",
                    csv_));
  }
  if (o.resume) read_earlier_rows();
  for (std::size_t i = 0; i < def.configs.size(); ++i) {
    if (mine(i) && !earlier_.count(i)) todo_.push_back(i);
    if (earlier_.count(i)) rows_[i] = earlier_[i];
  }
  strategy::check_configurations(def, todo_);
  inputs_ = o.flags.simulation_inputs();
  open_live_file();
}

void SweepSession::read_earlier_rows() {
  std::ifstream in(csv_, std::ios::binary);
  if (!in) return;  // nothing yet: --resume starts from the beginning
  const std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  const auto records = csv_records(text, &earlier_ends_cleanly_);
  if (records.empty()) return;
  std::size_t first_row = 1;
  const std::size_t columns = def_.dims.size();
  if (shard_) {
    const ShardStamp want = shard_stamp(def_, *shard_);
    const auto found = parse_stamp_line(records[0]);
    if (!found || *found != want) {
      throw sim::ConfigError(
          fmt::format("{}: its first line is \"{}\", expected \"{}\"; resume needs the same sweep "
                      "and --shard",
                      csv_, records[0], stamp_line(want)));
    }
    if (records.size() < 2) return;
    if (records[1] != shard_header_line(def_.header)) {
      throw sim::ConfigError(fmt::format(
          "{}: its columns differ from this sweep's; resume needs the same sweep", csv_));
    }
    first_row = 2;
  } else if (parse_csv_line(records[0]) != def_.header) {
    throw sim::ConfigError(
        fmt::format("{}: its columns differ from this sweep's; resume needs the same sweep", csv_));
  }
  // Rows cut by an interruption (too few fields) are dropped and run again.
  std::map<std::vector<std::string>, std::vector<std::string>> by_values;
  for (std::size_t r = first_row; r < records.size(); ++r) {
    auto fields = parse_csv_line(records[r]);
    if (!shard_) {
      if (fields.size() == def_.header.size())
        by_values[{fields.begin(), fields.begin() + static_cast<long>(columns)}] = fields;
      continue;
    }
    const auto config = whole_integer(fields[0]);
    if (fields.size() != def_.header.size() + 1 || !config || *config < 0 ||
        static_cast<std::size_t>(*config) >= def_.configs.size() ||
        !mine(static_cast<std::size_t>(*config))) {
      continue;
    }
    fields.erase(fields.begin());
    const auto i = static_cast<std::size_t>(*config);
    if (std::equal(def_.configs[i].begin(), def_.configs[i].end(), fields.begin()))
      earlier_[i] = fields;
  }
  if (!shard_) {
    // A plain sweep's rows are known by their configuration values.
    for (std::size_t i = 0; i < def_.configs.size(); ++i) {
      const auto found = by_values.find(def_.configs[i]);
      if (found != by_values.end()) earlier_[i] = found->second;
    }
  }
}

void SweepSession::open_live_file() {
  // Append finished rows as they come: an interrupted sweep keeps them.
  if (options_.resume && !earlier_.empty()) {
    live_.open(csv_, std::ios::app | std::ios::binary);
    if (!earlier_ends_cleanly_) live_ << "\n";  // end the cut row, so the next one starts a line
  } else {
    live_.open(csv_, std::ios::trunc | std::ios::binary);
    if (shard_) {
      live_ << stamp_line(shard_stamp(def_, *shard_)) << "\n"
            << shard_header_line(def_.header) << "\n";
    } else {
      live_ << join_row(def_.header) << "\n";
    }
  }
  live_.flush();
  if (!live_) throw sim::ConfigError(fmt::format("{}: cannot write", csv_));
}

void SweepSession::record(std::size_t config, const strategy::ConfigResult& result) {
  const std::lock_guard<std::mutex> lock(mu_);
  outcomes_.at(config) = Outcome{result.ran, result.oom, result.iteration_s};
  rows_[config] = result.row;
  live_ << (shard_ ? shard_row_line(config, result.row) : join_row(result.row)) << "\n";
  live_.flush();
  ++finished_;
  fmt::print(stderr, "sweep: [{}/{}] {}: {}\n", finished_, todo_.size(), def_.describe(config),
             result.summary);
}

int SweepSession::finish() {
  live_.close();
  const std::size_t total = def_.configs.size();
  std::size_t owned = 0;
  std::size_t failed = 0;
  for (std::size_t i = 0; i < total; ++i) {
    if (!mine(i)) continue;
    ++owned;
    if (rows_[i].size() != def_.header.size()) {
      throw sim::InternalError(
          fmt::format("sweep: configuration {} has no result", def_.describe(i)));
    }
    if (!rows_[i].back().empty()) ++failed;
  }
  const std::size_t resumed = owned - todo_.size();
  if (shard_) {
    sim::write_file_atomically(csv_,
                               shard_csv_text(shard_stamp(def_, *shard_), def_.header, rows_));
    fmt::print(stderr,
               "sweep: shard {}/{}: {} of {} configurations ({} run now, {} resumed) in {}\n",
               shard_->index, shard_->count, owned, total, todo_.size(), resumed, csv_);
  } else {
    sim::write_file_atomically(csv_, sweep_csv_text(def_.header, rows_));
    fmt::print(stderr, "sweep: {} configuration{} ({} run now, {} resumed) in {}\n", total,
               total == 1 ? "" : "s", todo_.size(), resumed, csv_);
  }
  // The fastest configuration that fits, among those run now.
  std::optional<std::size_t> best;
  for (std::size_t i = 0; i < total; ++i) {
    if (outcomes_[i].ran && !outcomes_[i].oom &&
        (!best || outcomes_[i].iteration_s < outcomes_[*best].iteration_s))
      best = i;
  }
  if (best) {
    fmt::print(stderr, "sweep: best that fits: {}: iteration {}\n", def_.describe(*best),
               sim::to_string(sim::Time::from_seconds(outcomes_[*best].iteration_s)));
  } else if (!todo_.empty()) {
    fmt::print(stderr, "sweep: no configuration run now fits in memory\n");
  }
  if (!options_.plot.empty()) {
    write_sweep_plot(options_.plot, def_.header, rows_, def_.title());
    fmt::print(stderr, "sweep: plot in {}\n", options_.plot);
  }
  if (failed > 0) {
    fmt::print(stderr,
               "foresight: error: {} of {} configurations failed; their rows carry the error\n",
               failed, owned);
    return 1;
  }
  return 0;
}

}  // namespace foresight::cli
