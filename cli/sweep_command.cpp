// foresight sweep SCENARIO --gpus 8,16,32 --micro-batch 16,32: every combination, on all cores,
// into a CSV (one row per configuration) and an SVG plot. Finished rows are appended as they come,
// so an interrupted sweep keeps them and --resume continues; the finished file is rewritten in
// configuration order, so the result does not depend on thread scheduling.
#include <fmt/format.h>

#include <optional>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>

#include "cli/commands.hpp"
#include "cli/inputs.hpp"
#include "common/atomic_file.hpp"
#include "common/error.hpp"
#include "plots/svg_plot.hpp"

namespace foresight::cli {
namespace {

struct SweepOptions {
  std::string scenario;
  std::string gpus;
  std::string micro_batch;
  std::vector<std::string> vary;
  ScenarioFlags flags;
  std::string csv = "sweep.csv";
  std::string plot;
  bool resume = false;
  bool force = false;
  bool csv_given = false;  ///< --csv was passed (a named file may be rewritten; the default may not)
  int jobs = 0;
};

const std::vector<std::string> kResultColumns{"iteration_time_s", "run_time_s",  "samples_per_s", "tokens_per_s",
                                              "tflops_per_gpu",   "mfu",         "compute_s",     "exposed_comm_s",
                                              "bubble_s",         "host_s",      "peak_bytes",    "oom",
                                              "usd_run",          "kwh_run",     "error"};

/// One axis of the sweep: an override path and its values.
struct Dimension {
  std::string column;
  std::string path;
  std::vector<std::string> values;
};

std::vector<Dimension> dimensions(const SweepOptions& o) {
  std::vector<Dimension> dims;
  const auto list = comma_list;
  if (!o.gpus.empty()) dims.push_back({"gpus", "cluster.gpus", list("--gpus", o.gpus)});
  if (!o.micro_batch.empty()) dims.push_back({"micro_batch", "plan.micro_batch", list("--micro-batch", o.micro_batch)});
  for (const std::string& v : o.vary) {
    const auto eq = v.find('=');
    if (eq == std::string::npos || eq == 0) {
      throw sim::ConfigError(fmt::format("--vary: expected PATH=V1,V2,... such as plan.precision=fp32,amp_fp16, found \"{}\"", v));
    }
    dims.push_back({v.substr(0, eq), v.substr(0, eq), list("--vary", v.substr(eq + 1))});
  }
  if (dims.empty()) throw sim::ConfigError("sweep: nothing to vary: give --gpus, --micro-batch or --vary");
  return dims;
}

std::vector<std::vector<std::string>> combinations(const std::vector<Dimension>& dims) {
  std::vector<std::vector<std::string>> out{{}};
  for (const Dimension& d : dims) {
    std::vector<std::vector<std::string>> next;
    for (const auto& prefix : out) {
      for (const auto& v : d.values) {
        auto c = prefix;
        c.push_back(v);
        next.push_back(std::move(c));
      }
    }
    out = std::move(next);
  }
  return out;
}

/// The scenario overrides of one configuration: the shared flags, then one per dimension.
std::vector<strategy::Override> config_overrides(const SweepOptions& o, const std::vector<Dimension>& dims,
                                                 const std::vector<std::string>& config) {
  std::vector<strategy::Override> overrides = o.flags.overrides();
  for (std::size_t d = 0; d < dims.size(); ++d) overrides.push_back({dims[d].path, config[d]});
  return overrides;
}

/// "gpus=8 micro_batch=64": a configuration as the progress lines and errors name it.
std::string describe(const std::vector<Dimension>& dims, const std::vector<std::string>& config) {
  std::string out;
  for (std::size_t d = 0; d < dims.size(); ++d) out += fmt::format("{}{}={}", d ? " " : "", dims[d].column, config[d]);
  return out;
}

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

std::vector<std::string> result_fields(const strategy::SimulationOutput& out) {
  const strategy::Report& r = out.report;
  auto num = [](double v) { return fmt::format("{:.9g}", v); };
  return {num(r.iteration_time_s), num(r.run_time_s),  num(r.samples_per_s),      num(r.tokens_per_s),
          num(r.tflops_per_gpu),   num(r.mfu),         num(r.breakdown.compute_s), num(r.breakdown.exposed_comm_s),
          num(r.breakdown.bubble_s), num(r.breakdown.host_s), num(r.peak_bytes_max()), r.oom() ? "1" : "0",
          r.cost.priced ? num(r.cost.usd_run) : "", r.cost.powered ? num(r.cost.kwh_run) : "", ""};
}

void write_plot(const std::string& path, const std::vector<std::string>& header,
                const std::vector<std::vector<std::string>>& rows, const std::string& title) {
  const auto col = [&](const std::string& name) {
    return static_cast<std::size_t>(std::find(header.begin(), header.end(), name) - header.begin());
  };
  const std::size_t gpus = col("gpus");
  if (gpus == header.size()) throw sim::ConfigError("--plot: the sweep must vary --gpus (the plot's x axis)");
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
  validate::Chart times{"Iteration time", {"GPUs", log_x, gpu_ticks}, {"iteration time (s)", false, {}}, {}, {}};
  validate::Chart rates{"Throughput", {"GPUs", log_x, gpu_ticks}, {"samples / s", log_x, {}}, {}, {}};
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

int run_sweep(const SweepOptions& o) {
  const auto dims = dimensions(o);
  const auto configs = combinations(dims);
  std::vector<std::string> header;
  for (const auto& d : dims) header.push_back(d.column);
  header.insert(header.end(), kResultColumns.begin(), kResultColumns.end());

  // Checks that need no simulation, before any runs.
  if (!o.plot.empty() && std::find(header.begin(), header.end(), "gpus") == header.end()) {
    throw sim::ConfigError("--plot: the sweep must vary --gpus (the plot's x axis)");
  }
  std::error_code ec;
  if (!o.csv_given && !o.resume && !o.force && std::filesystem::exists(o.csv, ec)) {
    throw sim::ConfigError(fmt::format("{} exists (an earlier sweep's results): pass --csv FILE for another file, "
                                       "--resume to continue it, or --force to overwrite it",
                                       o.csv));
  }

  // Rows already there (--resume), keyed by their configuration columns.
  std::map<std::vector<std::string>, std::vector<std::string>> done;
  if (o.resume) {
    std::ifstream in(o.csv);
    std::string line;
    if (in && std::getline(in, line)) {
      if (parse_csv_line(line) != header) {
        throw sim::ConfigError(fmt::format("{}: its columns differ from this sweep's; resume needs the same sweep", o.csv));
      }
      while (std::getline(in, line)) {
        if (line.empty()) continue;
        auto fields = parse_csv_line(line);
        if (fields.size() != header.size()) continue;  // a row cut by an interruption
        done[std::vector<std::string>(fields.begin(), fields.begin() + static_cast<long>(dims.size()))] = fields;
      }
    }
  }
  std::vector<std::size_t> todo;
  for (std::size_t i = 0; i < configs.size(); ++i) {
    if (!done.count(configs[i])) todo.push_back(i);
  }
  // Every configuration is read and checked before any runs: a typo in a list fails the sweep at
  // once, naming the configuration, instead of surfacing as an error row after hours of work.
  for (const std::size_t i : todo) {
    try {
      (void)strategy::load_scenario(o.scenario, config_overrides(o, dims, configs[i]));
    } catch (const sim::Error& e) {
      throw sim::ConfigError(fmt::format("sweep configuration {}: {}", describe(dims, configs[i]), e.what()));
    }
  }

  // Append finished rows as they come: an interrupted sweep keeps them.
  std::ofstream live;
  if (o.resume && !done.empty()) {
    live.open(o.csv, std::ios::app);
  } else {
    live.open(o.csv, std::ios::trunc);
    live << join_row(header) << "\n";
  }
  if (!live) throw sim::ConfigError(fmt::format("{}: cannot write", o.csv));
  live.flush();

  const strategy::SimulationInputs inputs = o.flags.simulation_inputs();  // loaded once, shared read-only
  std::vector<std::vector<std::string>> rows(configs.size());
  for (std::size_t i = 0; i < configs.size(); ++i) {
    if (done.count(configs[i])) rows[i] = done[configs[i]];
  }
  struct Outcome {
    bool ran = false;
    bool oom = false;
    double iteration_s = 0.0;
  };
  std::vector<Outcome> outcomes(configs.size());
  std::mutex mu;
  std::atomic<std::size_t> next{0};
  std::size_t finished = 0;
  const unsigned hw = std::max(1u, std::thread::hardware_concurrency());
  const unsigned jobs = static_cast<unsigned>(std::min<std::size_t>(todo.size(), o.jobs > 0 ? static_cast<unsigned>(o.jobs) : hw));
  auto worker = [&] {
    for (std::size_t k = next++; k < todo.size(); k = next++) {
      const std::size_t i = todo[k];
      const std::vector<strategy::Override> overrides = config_overrides(o, dims, configs[i]);
      std::vector<std::string> row = configs[i];
      std::string summary;
      Outcome outcome;
      try {
        const auto out = strategy::simulate_scenario(strategy::load_scenario(o.scenario, overrides), inputs);
        const auto fields = result_fields(out);
        row.insert(row.end(), fields.begin(), fields.end());
        const auto& r = out.report;
        summary = fmt::format("iteration {}", sim::to_string(sim::Time::from_seconds(r.iteration_time_s)));
        if (r.oom()) {
          double capacity = 0.0;
          for (const auto& m : r.memory) capacity = m.bytes.total() >= r.peak_bytes_max() ? m.capacity : capacity;
          summary += fmt::format(", OUT OF MEMORY (peak {:.1f} GiB of {:.0f} GiB)", r.peak_bytes_max() / (1 << 30),
                                 capacity / (1 << 30));
        }
        outcome = Outcome{true, r.oom(), r.iteration_time_s};
      } catch (const sim::Error& e) {
        std::vector<std::string> empty(kResultColumns.size() - 1);
        row.insert(row.end(), empty.begin(), empty.end());
        row.emplace_back(e.what());
        summary = fmt::format("error: {}", e.what());
      }
      const std::lock_guard<std::mutex> lock(mu);
      outcomes[i] = outcome;
      rows[i] = row;
      live << join_row(row) << "\n";
      live.flush();
      ++finished;
      fmt::print(stderr, "sweep: [{}/{}] {}: {}\n", finished, todo.size(), describe(dims, configs[i]), summary);
    }
  };
  std::vector<std::thread> pool;
  for (unsigned t = 1; t < jobs; ++t) pool.emplace_back(worker);
  if (jobs > 0) worker();
  for (auto& t : pool) t.join();
  live.close();

  std::string text = join_row(header) + "\n";
  for (const auto& row : rows) text += join_row(row) + "\n";
  sim::write_file_atomically(o.csv, text);
  fmt::print(stderr, "sweep: {} configuration{} ({} run now, {} resumed) in {}\n", configs.size(),
             configs.size() == 1 ? "" : "s", todo.size(),
             configs.size() - todo.size(), o.csv);
  // The fastest configuration that fits, among those run now.
  std::optional<std::size_t> best;
  for (std::size_t i = 0; i < configs.size(); ++i) {
    if (outcomes[i].ran && !outcomes[i].oom && (!best || outcomes[i].iteration_s < outcomes[*best].iteration_s)) best = i;
  }
  if (best) {
    fmt::print(stderr, "sweep: best that fits: {}: iteration {}\n", describe(dims, configs[*best]),
               sim::to_string(sim::Time::from_seconds(outcomes[*best].iteration_s)));
  } else if (!todo.empty()) {
    fmt::print(stderr, "sweep: no configuration run now fits in memory\n");
  }
  if (!o.plot.empty()) {
    write_plot(o.plot, header, rows, fmt::format("foresight sweep {}", std::filesystem::path(o.scenario).filename().string()));
    fmt::print(stderr, "sweep: plot in {}\n", o.plot);
  }
  const auto failed = std::count_if(rows.begin(), rows.end(), [](const auto& row) { return !row.back().empty(); });
  if (failed > 0) {
    fmt::print(stderr, "foresight: error: {} of {} configurations failed; their rows carry the error\n", failed, rows.size());
    return 1;
  }
  return 0;
}

}  // namespace

void add_sweep_command(CLI::App& app, Runner& run) {
  auto o = std::make_shared<SweepOptions>();
  CLI::App* cmd = app.add_subcommand("sweep", "Simulate a scenario over lists of GPU counts, micro-batch sizes or any plan field");
  cmd->add_option("scenario", o->scenario, "Scenario JSON file")->required();
  cmd->add_option("--gpus", o->gpus, "GPU counts, comma separated (sets cluster.gpus and plan.dp)");
  cmd->add_option("--micro-batch", o->micro_batch, "Micro-batch sizes, comma separated");
  cmd->add_option("--vary", o->vary, "Any field over values: PATH=V1,V2,... (repeatable)");
  o->flags.add_to(*cmd, false);
  cmd->add_option("--csv", o->csv, "Results, one row per configuration (an existing default sweep.csv is kept: see --force)")
      ->capture_default_str()
      ->each([o](const std::string&) { o->csv_given = true; });
  cmd->add_flag("--force", o->force, "Overwrite an existing sweep.csv when --csv is not given");
  cmd->add_option("--plot", o->plot, "SVG plot of iteration time and throughput vs GPUs, one line per micro-batch");
  cmd->add_flag("--resume", o->resume, "Keep the rows already in --csv and run only the missing configurations");
  cmd->add_option("--jobs", o->jobs, "Parallel simulations (default: all cores)")->check(at_least(0));
  cmd->callback([o, &run] { run = [o] { return run_sweep(*o); }; });
}

}  // namespace foresight::cli
