#pragma once
/// The files a sweep writes and reads back: the CSV of a whole sweep, the CSV of one shard, and
/// the SVG plot. A whole sweep's CSV is its header, then a row per configuration in order:
///
///     gpus,micro_batch,iteration_time_s,...,error
///     2,16,0.0032,...,
///
/// A shard's (foresight sweep --shard 1/3) starts with a stamp line naming the shard and the sweep,
/// and has a config column, the configuration's index, before the same fields:
///
///     # foresight sweep shard 1/3 of 6 configurations, sweep 1c914d6edaafd0f0, scenario s.json
///     config,gpus,micro_batch,iteration_time_s,...,error
///     1,2,32,0.0064,...,
///     4,8,16,0.0032,...,
///
/// Merging drops the config column and orders the rows, so the merged file is the whole sweep's,
/// byte for byte (parse_csv_line undoes join_row exactly).

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "cli/sweep_definition.hpp"

namespace foresight::cli {

/// `s` as a CSV field: quoted when it holds a comma, a quote or a newline.
std::string csv_field(const std::string& s);
std::string join_row(const std::vector<std::string>& fields);
/// The fields of one CSV record (the inverse of join_row).
std::vector<std::string> parse_csv_line(const std::string& line);
/// `text` cut into records at the line ends outside quotes (an error message may hold a newline);
/// a last record without its line end is kept, and `complete` says whether there was one.
std::vector<std::string> csv_records(const std::string& text, bool* complete = nullptr);

/// A whole sweep's CSV: the header, then rows[i] for each configuration i in order.
std::string sweep_csv_text(const std::vector<std::string>& header,
                           const std::vector<std::vector<std::string>>& rows);

/// The first line of a shard's CSV: which shard of which sweep it holds.
struct ShardStamp {
  Shard shard;
  std::size_t configs = 0;  ///< configurations of the whole sweep
  std::string fingerprint;  ///< SweepDefinition::fingerprint
  std::string scenario;     ///< the scenario's file name, for the merged plot's title

  bool operator==(const ShardStamp&) const = default;
};
ShardStamp shard_stamp(const SweepDefinition& def, const Shard& shard);
std::string stamp_line(const ShardStamp& stamp);
/// The stamp of a shard CSV's first line, or nullopt when it is not one.
std::optional<ShardStamp> parse_stamp_line(const std::string& line);
/// A shard CSV's column line: "config", then the sweep's header.
std::string shard_header_line(const std::vector<std::string>& header);
/// A shard CSV's row line of configuration `config` (no line end).
std::string shard_row_line(std::size_t config, const std::vector<std::string>& row);
/// A shard's CSV: the stamp, the column line, then rows[i] for each configuration i it owns.
std::string shard_csv_text(const ShardStamp& stamp, const std::vector<std::string>& header,
                           const std::vector<std::vector<std::string>>& rows);

/// Iteration time and throughput against GPUs, one line per value of the other columns, from the
/// rows without an error; ConfigError when the header has no gpus column or no row succeeded.
void write_sweep_plot(const std::string& path, const std::vector<std::string>& header,
                      const std::vector<std::vector<std::string>>& rows, const std::string& title);

}  // namespace foresight::cli
