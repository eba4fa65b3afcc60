#include "cli/sweep_table.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <regex>

#include "cli/commands.hpp"
#include "common/atomic_file.hpp"
#include "common/error.hpp"
#include "plots/svg_plot.hpp"

namespace foresight::cli {

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string q = "\"";
  for (const char c : s) q += c == '"' ? std::string("\"\"") : std::string(1, c);
  return q + "\"";
}

std::string join_row(const std::vector<std::string>& fields) {
  std::string out;
  for (std::size_t i = 0; i < fields.size(); ++i) out += (i ? "," : "") + csv_field(fields[i]);
  return out;
}

std::vector<std::string> parse_csv_line(const std::string& line) {
  std::vector<std::string> out;
  std::string cur;
  bool quoted = false;
  for (std::size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quoted) {
      if (c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
        cur += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        cur += c;
      }
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      out.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  out.push_back(cur);
  return out;
}

std::vector<std::string> csv_records(const std::string& text, bool* complete) {
  std::vector<std::string> out;
  std::string cur;
  bool quoted = false;
  for (const char c : text) {
    if (c == '"') quoted = !quoted;  // a doubled quote toggles twice: still right
    if (c == '\n' && !quoted) {
      out.push_back(std::move(cur));
      cur.clear();
    } else {
      cur += c;
    }
  }
  if (complete != nullptr) *complete = cur.empty();
  if (!cur.empty()) out.push_back(std::move(cur));
  return out;
}

std::string sweep_csv_text(const std::vector<std::string>& header,
                           const std::vector<std::vector<std::string>>& rows) {
  std::string text = join_row(header) + "\n";
  for (const auto& row : rows) text += join_row(row) + "\n";
  return text;
}

ShardStamp shard_stamp(const SweepDefinition& def, const Shard& shard) {
  return {shard, def.configs.size(), def.fingerprint,
          std::filesystem::path(def.scenario.path).filename().string()};
}

std::string stamp_line(const ShardStamp& s) {
  return fmt::format("# foresight sweep shard {}/{} of {} configurations, sweep {}, scenario {}",
                     s.shard.index, s.shard.count, s.configs, s.fingerprint, s.scenario);
}

std::optional<ShardStamp> parse_stamp_line(const std::string& line) {
  static const std::regex pattern(
      R"(# foresight sweep shard (\d{1,9})/(\d{1,9}) of (\d{1,12}) configurations, sweep ([0-9a-f]{16}), scenario (.*))");
  std::smatch m;
  if (!std::regex_match(line, m, pattern)) return std::nullopt;
  ShardStamp s;
  s.shard = {std::stoul(m[1]), std::stoul(m[2])};
  s.configs = std::stoul(m[3]);
  s.fingerprint = m[4];
  s.scenario = m[5];
  if (s.shard.count == 0 || s.shard.index >= s.shard.count) return std::nullopt;
  return s;
}

std::string shard_header_line(const std::vector<std::string>& header) {
  return "config," + join_row(header);
}

std::string shard_row_line(std::size_t config, const std::vector<std::string>& row) {
  return fmt::format("{},{}", config, join_row(row));
}

std::string shard_csv_text(const ShardStamp& stamp, const std::vector<std::string>& header,
                           const std::vector<std::vector<std::string>>& rows) {
  std::string text = stamp_line(stamp) + "\n" + shard_header_line(header) + "\n";
  for (std::size_t i = 0; i < rows.size(); ++i) {
    if (stamp.shard.owns(i)) text += shard_row_line(i, rows[i]) + "\n";
  }
  return text;
}

void write_sweep_plot(const std::string& path, const std::vector<std::string>& header,
                      const std::vector<std::vector<std::string>>& rows, const std::string& title) {
  const auto col = [&](const std::string& name) {
    return static_cast<std::size_t>(std::find(header.begin(), header.end(), name) - header.begin());
  };
  const std::size_t gpus = col("gpus");
  if (gpus == header.size())
    throw sim::ConfigError("--plot: the sweep must vary --gpus (the plot's x axis)");
  const std::size_t iteration = col("iteration_time_s");
  const std::size_t throughput = col("samples_per_s");
  const std::size_t error = col("error");
  std::map<std::string, validate::Series> time_series;
  std::map<std::string, validate::Series> rate_series;
  std::vector<std::string> order;
  double lo = 1e300, hi = 0;
  for (const auto& row : rows) {
    if (!row[error].empty()) continue;
    std::string label;
    for (std::size_t i = 0; i < iteration; ++i) {
      if (i == gpus) continue;
      label += (label.empty() ? "" : ", ") + header[i] + " " + row[i];
    }
    if (label.empty()) label = "all";
    if (!time_series.count(label)) order.push_back(label);
    const double x = std::stod(row[gpus]);
    lo = std::min(lo, x);
    hi = std::max(hi, x);
    time_series[label].label = label;
    time_series[label].points.emplace_back(x, std::stod(row[iteration]));
    rate_series[label].label = label;
    rate_series[label].points.emplace_back(x, std::stod(row[throughput]));
  }
  if (order.empty()) throw sim::ConfigError("--plot: no configuration of the sweep succeeded");
  // GPU counts usually double: a log x axis with a tick at each count shows them evenly; the
  // throughput axis is logarithmic too, so linear scaling is a straight line.
  const bool log_x = hi / lo >= 8;
  std::vector<double> gpu_ticks;
  for (const auto& row : rows) {
    if (row[error].empty()) gpu_ticks.push_back(std::stod(row[gpus]));
  }
  std::sort(gpu_ticks.begin(), gpu_ticks.end());
  gpu_ticks.erase(std::unique(gpu_ticks.begin(), gpu_ticks.end()), gpu_ticks.end());
  if (gpu_ticks.size() > 12) gpu_ticks.clear();  // too many to label: round ticks instead
  validate::Chart times{
      "Iteration time", {"GPUs", log_x, gpu_ticks}, {"iteration time (s)", false, {}}, {}, {}};
  validate::Chart rates{
      "Throughput", {"GPUs", log_x, gpu_ticks}, {"samples / s", log_x, {}}, {}, {}};
  for (const auto& label : order) {
    auto t = time_series[label];
    auto q = rate_series[label];
    std::sort(t.points.begin(), t.points.end());
    std::sort(q.points.begin(), q.points.end());
    times.series.push_back(t);
    rates.series.push_back(q);
  }
  sim::write_file_atomically(path, validate::svg_charts(title, {times, rates}));
}

}  // namespace foresight::cli
