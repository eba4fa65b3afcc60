// The `foresight` Python module: the CLI's simulate, sweep, plan, replay, validate, topology,
// collective and params as functions taking Python values and returning plain dicts and lists
// (the CLI's --json objects, the sweep's CSV rows). Foresight's errors become foresight.Error subclasses carrying the
// messages the CLI prints. The simulations run without the GIL.
#include <pybind11/pybind11.h>

#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "common/atomic_file.hpp"
#include "common/error.hpp"
#include "python/json_bridge.hpp"
#include "python/scenario_args.hpp"
#include "run/calibration.hpp"
#include "run/collective_sweep.hpp"
#include "run/params.hpp"
#include "run/plan_json.hpp"
#include "run/sweep.hpp"
#include "topologies/cluster_builders.hpp"
#include "topologies/topology_report.hpp"
#include "validate/simulation_timeline.hpp"
#include "validate/suite_report.hpp"
#include "traces/pytorch_et.hpp"
#include "validate/et_replay.hpp"
#include "validate/trace_replay.hpp"

namespace foresight::python {
namespace py = pybind11;
namespace {

/// Sets the Python error of class `name` (a module attribute) with the C++ error's message.
void set_error(const char* name, const std::exception& e) {
  const py::object cls = py::module_::import("foresight").attr(name);
  PyErr_SetString(cls.ptr(), e.what());
}

// By value: pybind11's ExceptionTranslator is void (*)(std::exception_ptr).
void translate(std::exception_ptr p) {  // NOLINT(performance-unnecessary-value-param)
  try {
    if (p) std::rethrow_exception(p);
  } catch (const sim::ConfigError& e) {
    set_error("ConfigError", e);
  } catch (const sim::TopologyError& e) {
    set_error("TopologyError", e);
  } catch (const sim::ModelError& e) {
    set_error("ModelError", e);
  } catch (const sim::TraceError& e) {
    set_error("TraceError", e);
  } catch (const sim::GraphError& e) {
    set_error("GraphError", e);
  } catch (const sim::InternalError& e) {
    set_error("InternalError", e);
  } catch (const sim::Error& e) {
    set_error("Error", e);
  }
}

py::object add_error(py::module_& m, const char* name, py::handle bases, const char* doc) {
  const std::string full = std::string("foresight.") + name;
  auto cls = py::reinterpret_steal<py::object>(
      PyErr_NewExceptionWithDoc(full.c_str(), doc, bases.ptr(), nullptr));
  if (!cls) throw py::error_already_set();
  m.attr(name) = cls;
  return cls;
}

/// A list of whole numbers >= `lo` (the CLI's comma-separated integer flags); ConfigError naming
/// `name`.
std::vector<int> integers(py::handle values, const std::string& name, int lo) {
  std::vector<int> out;
  if (py::isinstance<py::str>(values) || !py::hasattr(values, "__iter__")) {
    throw py::type_error(fmt::format("{}: expected a list of integers, found {}", name, type_name(values)));
  }
  for (const py::handle v : values) {
    if (v.is_none()) throw sim::ConfigError(fmt::format("{}: expected integers >= {}, found None", name, lo));
    out.push_back(optional_count(v, name, lo));
  }
  if (out.empty()) throw sim::ConfigError(fmt::format("{}: expected at least one value", name));
  return out;
}

std::vector<std::string> strings(py::handle values, const std::string& name) {
  std::vector<std::string> out;
  if (py::isinstance<py::str>(values) || !py::hasattr(values, "__iter__")) {
    throw py::type_error(fmt::format("{}: expected a list of strings, found {}", name, type_name(values)));
  }
  for (const py::handle v : values) {
    if (!py::isinstance<py::str>(v) && !py::hasattr(v, "__fspath__")) {
      throw py::type_error(fmt::format("{}: expected strings, found {} ({})", name, py::repr(v).cast<std::string>(),
                                       type_name(v)));
    }
    out.push_back(optional_path(v, name));
    if (out.back().empty()) throw sim::ConfigError(fmt::format("{}: empty value", name));
  }
  if (out.empty()) throw sim::ConfigError(fmt::format("{}: expected at least one value", name));
  return out;
}

py::object py_simulate(py::handle scenario, py::handle base_dir, py::handle gpus, py::handle micro_batch, py::handle cluster,
                    py::handle overrides, py::handle calibration, py::handle profile, py::handle prices,
                    py::handle trace_path) {
  const strategy::ScenarioSource source = scenario_source(scenario, base_dir);
  const auto edits = strategy::scenario_overrides(optional_path(cluster, "cluster"), optional_count(gpus, "gpus", 1),
                                                  optional_count(micro_batch, "micro_batch", 1), override_list(overrides));
  const strategy::InputPaths paths{optional_path(calibration, "calibration"), optional_path(profile, "profile"),
                                   optional_path(prices, "prices")};
  const std::string trace = optional_path(trace_path, "trace");
  nlohmann::json out;
  {
    const py::gil_scoped_release unlocked;
    // As cli/simulate_command.cpp's run_simulate.
    const strategy::Scenario s = strategy::load_scenario(source, edits);
    const strategy::InputFiles files = input_files(paths);
    strategy::SimulationInputs in = files.inputs();
    if (!trace.empty()) in.link_sample_interval = validate::kTimelineSampleInterval;
    strategy::SimulationOutput o = strategy::simulate_scenario(s, in);
    o.report.measured.changed = !edits.empty();  // the measured run belongs to the scenario as written
    if (!trace.empty()) {
      sim::write_file_atomically(trace,
                                 [&](std::ostream& os) { validate::write_simulation_timeline(os, o, source.path); });
    }
    out = strategy::to_json(o.report, o.plan);
  }
  return to_python(out);
}

/// One sweep dimension from Python: its values' override texts, the values kept for the rows.
void add_dimension(std::vector<strategy::SweepDimension>& dims, std::vector<std::vector<py::object>>& kept,
                   const std::string& column, const std::string& path, py::handle values) {
  if (py::isinstance<py::str>(values) || py::isinstance<py::dict>(values) || !py::hasattr(values, "__iter__")) {
    throw py::type_error(fmt::format("sweep: {}: expected a list of values, found {}", column, type_name(values)));
  }
  strategy::SweepDimension d{column, path, {}};
  std::vector<py::object> items;
  for (const py::handle v : values) {
    d.values.push_back(override_text(v, column));
    items.push_back(py::reinterpret_borrow<py::object>(v));
  }
  dims.push_back(std::move(d));
  kept.push_back(std::move(items));
}

py::list py_sweep(py::handle scenario, py::handle vary, py::handle gpus, py::handle micro_batch, py::handle base_dir,
               py::handle overrides, py::handle calibration, py::handle profile, py::handle prices, py::handle jobs,
               py::handle shard) {
  const strategy::ScenarioSource source = scenario_source(scenario, base_dir);
  std::optional<strategy::SweepShard> part;
  if (!shard.is_none()) {
    // (index, count), 0 <= index < count, as `foresight sweep --shard I/N`.
    const bool pair = py::isinstance<py::tuple>(shard) && py::len(shard) == 2;
    const auto bad = [&] {
      return sim::ConfigError(fmt::format("shard: expected (index, count) with 0 <= index < count, found {}",
                                          py::repr(shard).cast<std::string>()));
    };
    if (!pair) throw bad();
    const py::tuple t = py::reinterpret_borrow<py::tuple>(shard);
    if (!py::isinstance<py::int_>(t[0]) || !py::isinstance<py::int_>(t[1]) || py::isinstance<py::bool_>(t[0]) ||
        py::isinstance<py::bool_>(t[1])) {
      throw bad();
    }
    const long long index = t[0].cast<long long>();
    const long long count = t[1].cast<long long>();
    if (index < 0 || count < 1 || index >= count) throw bad();
    part = strategy::SweepShard{static_cast<std::size_t>(index), static_cast<std::size_t>(count)};
  }
  std::vector<strategy::SweepDimension> dims;
  std::vector<std::vector<py::object>> kept;
  // The CLI's order: --gpus, --micro-batch, then each --vary.
  if (!gpus.is_none()) add_dimension(dims, kept, "gpus", "cluster.gpus", gpus);
  if (!micro_batch.is_none()) add_dimension(dims, kept, "micro_batch", "plan.micro_batch", micro_batch);
  if (!vary.is_none()) {
    if (!py::isinstance<py::dict>(vary)) {
      throw py::type_error(fmt::format("vary: expected a dict {{PATH: [VALUES]}}, found {}", type_name(vary)));
    }
    for (const auto& [key, values] : py::reinterpret_borrow<py::dict>(vary)) {
      if (!py::isinstance<py::str>(key) || key.cast<std::string>().empty()) {
        throw sim::ConfigError(fmt::format("vary: expected PATH strings such as \"plan.precision\" as keys, found {}",
                                           py::repr(key).cast<std::string>()));
      }
      add_dimension(dims, kept, key.cast<std::string>(), key.cast<std::string>(), values);
    }
  }
  const auto sets = override_list(overrides);
  const strategy::InputPaths paths{optional_path(calibration, "calibration"), optional_path(profile, "profile"),
                                   optional_path(prices, "prices")};
  const int threads = optional_count(jobs, "jobs", 0);
  strategy::SweepDefinition def;
  std::vector<strategy::ConfigResult> results;
  std::vector<std::size_t> owned;  ///< the configurations run: all, or the shard's
  {
    const py::gil_scoped_release unlocked;
    // As cli/sweep_command.cpp's sweep on threads, without its files.
    const strategy::InputFiles files = input_files(paths);
    if (dims.empty()) throw sim::ConfigError("sweep: nothing to vary: give gpus, micro_batch or vary");
    for (const strategy::SweepDimension& d : dims) {
      if (d.values.empty()) throw sim::ConfigError(fmt::format("sweep: {}: expected at least one value", d.column));
    }
    def = strategy::make_sweep(source, sets, dims);
    for (std::size_t i = 0; i < def.configs.size(); ++i) {
      if (!part || part->owns(i)) owned.push_back(i);
    }
    // Every configuration is checked, a shard's or not, as the CLI does.
    std::vector<std::size_t> all(def.configs.size());
    for (std::size_t i = 0; i < all.size(); ++i) all[i] = i;
    strategy::check_configurations(def, all);
    results.resize(all.size());
    // Each thread writes its own configurations' slots.
    strategy::run_on_threads(def, owned, files.inputs(), threads,
                             [&results](std::size_t i, const strategy::ConfigResult& r) { results[i] = r; });
  }
  // The CSV's fields as values: numbers as float, oom as bool, empty fields as None.
  const auto& columns = strategy::sweep_result_columns();
  py::list out;
  for (const std::size_t i : owned) {
    py::dict d;
    if (part) d["config"] = py::int_(i);  // its place in the whole sweep, as a shard CSV's first column
    const std::vector<std::size_t> picks = def.value_indices(i);
    for (std::size_t k = 0; k < dims.size(); ++k) d[py::str(dims[k].column)] = kept[k][picks[k]];
    for (std::size_t c = 0; c < columns.size(); ++c) {
      const std::string& f = results[i].row[dims.size() + c];
      if (f.empty()) {
        d[py::str(columns[c])] = py::none();
      } else if (columns[c] == "error") {
        d[py::str(columns[c])] = py::str(f);
      } else if (columns[c] == "oom") {
        d[py::str(columns[c])] = py::bool_(f == "1");
      } else {
        d[py::str(columns[c])] = py::float_(std::stod(f));
      }
    }
    out.append(std::move(d));
  }
  return out;
}

py::object py_plan(py::handle scenario, py::handle base_dir, py::handle overrides, py::handle tp, py::handle pp,
                py::handle virtual_stages, py::handle micro_batches, py::handle recompute, py::handle zero,
                py::handle sequence_parallel, py::handle ep, py::handle expert_tp, double memory_margin, py::handle top, py::handle jobs, py::handle clusters,
                py::handle gpus, double budget, py::handle calibration, py::handle profile, py::handle prices) {
  const strategy::ScenarioSource source = scenario_source(scenario, base_dir);
  strategy::PlanSpace space;  // a dimension left empty: the planner's default for each cluster
  if (!tp.is_none()) space.tp = integers(tp, "tp", 1);
  if (!pp.is_none()) space.pp = integers(pp, "pp", 1);
  if (!virtual_stages.is_none()) space.virtual_stages = integers(virtual_stages, "virtual_stages", 1);
  if (!micro_batches.is_none()) space.micro_batch = integers(micro_batches, "micro_batches", 1);
  if (!zero.is_none()) space.zero = integers(zero, "zero", 0);
  if (!ep.is_none()) space.ep = integers(ep, "ep", 1);
  if (!recompute.is_none()) space.recompute = strings(recompute, "recompute");
  if (!sequence_parallel.is_none()) {
    if (py::isinstance<py::str>(sequence_parallel) || !py::hasattr(sequence_parallel, "__iter__")) {
      throw py::type_error(fmt::format("sequence_parallel: expected a list of bools, found {}", type_name(sequence_parallel)));
    }
    for (const py::handle v : sequence_parallel) {
      // True/False, or the CLI's "on"/"off".
      const bool on = py::isinstance<py::str>(v) && v.cast<std::string>() == "on";
      const bool off = py::isinstance<py::str>(v) && v.cast<std::string>() == "off";
      if (!py::isinstance<py::bool_>(v) && !on && !off) {
        throw sim::ConfigError(fmt::format("sequence_parallel: expected True, False, \"on\" or \"off\", found {}",
                                           py::repr(v).cast<std::string>()));
      }
      space.sequence_parallel.push_back(on || (py::isinstance<py::bool_>(v) && v.cast<bool>()));
    }
  }
  if (!expert_tp.is_none()) {
    if (py::isinstance<py::str>(expert_tp) || !py::hasattr(expert_tp, "__iter__")) {
      throw py::type_error(fmt::format("expert_tp: expected a list of \"tp\" and 1, found {}", type_name(expert_tp)));
    }
    for (const py::handle v : expert_tp) {
      // "tp" (experts split as TP) or an integer e >= 1, as the CLI's --expert-tp.
      const bool split = py::isinstance<py::str>(v) && v.cast<std::string>() == "tp";
      const bool number = py::isinstance<py::int_>(v) && !py::isinstance<py::bool_>(v) && v.cast<long long>() >= 1 &&
                          v.cast<long long>() <= (1 << 20);
      if (!split && !number) {
        throw sim::ConfigError(fmt::format("expert_tp: expected \"tp\" or an integer >= 1, found {}",
                                           py::repr(v).cast<std::string>()));
      }
      space.expert_tp.push_back(split ? 0 : v.cast<int>());
    }
  }
  strategy::PlanOptions options;
  options.memory_margin = memory_margin;
  if (!(memory_margin >= 0.0 && memory_margin < 1.0)) {
    throw sim::ConfigError(fmt::format("memory_margin: expected a fraction in [0, 1), found {}", memory_margin));
  }
  options.top = top.is_none() ? options.top : optional_count(top, "top", 1);
  options.jobs = optional_count(jobs, "jobs", 0);
  const std::vector<std::string> cluster_list = clusters.is_none() ? std::vector<std::string>{} : strings(clusters, "clusters");
  const std::vector<int> counts = gpus.is_none() ? std::vector<int>{} : integers(gpus, "gpus", 1);
  if (!(budget >= 0.0) || !std::isfinite(budget)) {
    throw sim::ConfigError(fmt::format("budget: expected a number of USD >= 0, found {}", budget));
  }
  const bool compare = !clusters.is_none() || !gpus.is_none();
  if (budget > 0.0 && !compare) throw sim::ConfigError("budget compares hardware: give clusters and/or gpus with it");
  const auto sets = override_list(overrides);
  const strategy::InputPaths paths{optional_path(calibration, "calibration"), optional_path(profile, "profile"),
                                   optional_path(prices, "prices")};
  nlohmann::json out;
  {
    const py::gil_scoped_release unlocked;
    // As cli/plan_command.cpp's run_plan and run_compare.
    const nlohmann::json doc = strategy::scenario_document(source, sets);
    if (!compare) {
      const strategy::InputFiles files = input_files(paths);
      out = strategy::plan_search_json(strategy::search_document(source.path, doc, space, options, files.inputs()));
    } else {
      const strategy::Scenario base = strategy::parse_scenario(doc, source.path);
      const auto hardware = strategy::hardware_options(base, cluster_list, counts);
      const strategy::InputFiles files = input_files(paths);
      out = strategy::hardware_json(
          strategy::compare_hardware(source.path, doc, hardware, space, options, files.inputs(), budget));
    }
  }
  return to_python(out);
}

py::object py_replay(py::handle traces, py::handle step, py::handle cluster, py::handle gpus, py::handle trace_gpu,
                  bool keep_stalls, py::handle timeline) {
  std::vector<std::string> paths;
  if (py::isinstance<py::str>(traces) || py::hasattr(traces, "__fspath__")) {
    paths.push_back(optional_path(traces, "traces"));
  } else {
    paths = strings(traces, "traces");
  }
  validate::ReplaySettings settings;
  if (!step.is_none()) {
    if (py::isinstance<py::bool_>(step) || !py::isinstance<py::int_>(step)) {
      throw py::type_error(fmt::format("step: expected an integer, found {}", type_name(step)));
    }
    settings.step = step.cast<int>();
  }
  settings.cluster = optional_path(cluster, "cluster");
  settings.gpus = optional_count(gpus, "gpus", 2);
  if (!trace_gpu.is_none()) settings.trace_gpu = py::str(trace_gpu).cast<std::string>();
  settings.keep_stalls = keep_stalls;
  const std::string trace = optional_path(timeline, "trace");
  const bool pytorch_ets = !paths.empty() && std::all_of(paths.begin(), paths.end(), trace::is_pytorch_et_path);
  if (pytorch_ets && (!step.is_none() || !trace_gpu.is_none() || keep_stalls)) {
    throw sim::ConfigError("step, trace_gpu and keep_stalls apply to Kineto traces, not to PyTorch execution traces");
  }
  nlohmann::json out;
  {
    const py::gil_scoped_release unlocked;
    // As cli/replay_command.cpp's replay_one, replay_joint and run_pytorch_et with --json.
    if (paths.empty()) throw sim::ConfigError("replay: expected at least one trace file");
    const auto write_timeline = [&](const sim::ExecutionGraph& graph, const sim::ExecutionResult& result,
                                    const std::string& cluster_name) {
      if (trace.empty()) return;
      sim::write_file_atomically(trace, [&](std::ostream& os) {
        validate::write_replay_timeline(os, paths, graph, result, cluster_name);
      });
    };
    if (pytorch_ets) {
      // PyTorch execution traces, as cli/replay_command.cpp's run_pytorch_et with --json.
      std::vector<trace::PytorchEt> ets;
      for (const std::string& p : paths) {
        for (trace::PytorchEt& e : trace::load_pytorch_ets(p)) ets.push_back(std::move(e));
      }
      validate::EtReplaySettings s;
      if (!settings.cluster.empty()) s.cluster = settings.cluster;
      s.gpus = settings.gpus;
      const validate::EtReplay r = validate::replay_execution_traces(ets, s);
      write_timeline(r.graph.graph, r.result, r.cluster.name());
      out = validate::et_replay_json(r, ets, s);
    } else {
      const std::vector<trace::KinetoTrace> loaded = validate::load_kineto_traces(paths);
      if (loaded.size() == 1) {
        const validate::RankReplay r = validate::replay_rank(loaded.front(), settings);
        write_timeline(r.graph.graph, r.result, r.cluster.name());
        out = validate::replay_json(r, loaded.front(), settings);
      } else {
        const validate::JointReplay r = validate::replay_joint(loaded, settings);
        write_timeline(r.graph.graph, r.result, r.cluster.name());
        out = validate::replay_json(r, settings);
      }
    }
  }
  return to_python(out);
}

py::object py_topology(py::handle cluster, int gpus) {
  if (gpus < 0) throw sim::ConfigError(fmt::format("gpus: expected an integer >= 0, found {}", gpus));
  const std::string spec = optional_path(cluster, "cluster");
  nlohmann::json report;
  {
    const py::gil_scoped_release unlocked;
    // As cli/topology_command.cpp's run_topology.
    report = topo::to_json(topo::make_topology_report(topo::resolve_cluster(spec, gpus)));
  }
  return to_python(report);
}

py::object py_collective(py::handle cluster, int gpus, const std::string& op, const std::string& sizes, double factor,
                         py::handle algorithm, py::handle protocol, int root, const std::string& network,
                         const std::string& timing, py::handle calibration) {
  if (gpus < 0) throw sim::ConfigError(fmt::format("gpus: expected an integer >= 0, found {}", gpus));
  run::CollectiveSweepOptions o;
  o.cluster = optional_path(cluster, "cluster");
  o.gpus = gpus;
  o.op = op;
  o.sizes = sizes;
  o.factor = factor;
  if (!algorithm.is_none()) o.algorithm = algorithm.cast<std::string>();
  if (!protocol.is_none()) o.protocol = protocol.cast<std::string>();
  o.root = root;
  o.network = network;
  o.timing = timing;
  if (!calibration.is_none()) o.calibration = optional_path(calibration, "calibration");
  nlohmann::json rows;
  {
    const py::gil_scoped_release unlocked;
    rows = run::collective_sweep(o).rows;
  }
  return to_python(rows);
}

py::object py_validate(py::handle suite, py::handle calibration, py::handle traces, const std::string& network,
                          py::handle datasets) {
  const std::string suite_path = suite.is_none() ? validate::default_suite_path() : optional_path(suite, "suite");
  const std::string cal_path = calibration.is_none() ? run::default_calibration_path() : optional_path(calibration, "calibration");
  validate::ValidateOptions options;
  options.network = sim::parse_network_kind(network, "network");
  if (traces.is_none()) {
    options.traces_dir = validate::default_traces_dir();
  } else if (!(py::isinstance<py::bool_>(traces) && !traces.cast<bool>())) {
    options.traces_dir = optional_path(traces, "traces");
  }
  const std::vector<std::string> names = datasets.is_none() ? std::vector<std::string>{} : strings(datasets, "datasets");
  std::string text;
  {
    const py::gil_scoped_release unlocked;
    // As cli/validate_command.cpp's run_validate, with the datasets chosen by name.
    validate::Suite s = validate::select_datasets(validate::load_suite(suite_path), names, {}, "datasets");
    if (!names.empty()) options.traces_dir.clear();  // the trace-replay cases are no dataset of the manifest
    text = validate::suite_json(validate::run_suite(s, run::load_calibration(cal_path), cal_path, options));
  }
  return to_python(nlohmann::json::parse(text));
}

}  // namespace
}  // namespace foresight::python

PYBIND11_MODULE(foresight, m) {
  namespace py = pybind11;
  namespace fp = foresight::python;
  using py::arg;
  m.doc() = "Foresight: a discrete-event simulator of distributed deep-learning training on GPU clusters.\n\n"
            "simulate, sweep, plan, replay and validate do what the foresight command's subcommands do and return\n"
            "plain dicts and lists: the CLI's --json objects, and the sweep's CSV rows (pandas.DataFrame(rows)).";
  m.attr("__version__") = FORESIGHT_VERSION;

  const py::object error = fp::add_error(m, "Error", PyExc_RuntimeError, "Base of every error Foresight reports.");
  const py::tuple input = py::make_tuple(error, py::handle(PyExc_ValueError));
  fp::add_error(m, "ConfigError", input, "A scenario, plan, option or quantity is invalid.");
  fp::add_error(m, "TopologyError", input, "A cluster description is invalid.");
  fp::add_error(m, "ModelError", input, "A model description is invalid or inconsistent with the plan.");
  fp::add_error(m, "TraceError", input, "A trace file is malformed or truncated.");
  fp::add_error(m, "GraphError", error, "An execution graph is inconsistent.");
  fp::add_error(m, "InternalError", error, "An invariant of the simulator was violated: a bug.");
  py::register_exception_translator(&fp::translate);

  // Each docstring starts with the signature in Python's terms (pybind11's would show handles).
  py::options options;
  options.disable_function_signatures();
  const py::none none;
  m.def("simulate", &fp::py_simulate, arg("scenario"), py::kw_only(), arg("base_dir") = none, arg("gpus") = none,
        arg("micro_batch") = none, arg("cluster") = none, arg("overrides") = none, arg("calibration") = none,
        arg("profile") = none, arg("prices") = none, arg("trace") = none,
        "simulate(scenario, *, base_dir=None, gpus=None, micro_batch=None, cluster=None, overrides=None,\n"
        "         calibration=None, profile=None, prices=None, trace=None) -> dict\n\n"
        "Simulates a scenario and returns its report: the dict `foresight simulate --json` prints.\n\n"
        "scenario: a path (str or os.PathLike) of a scenario file, or the document as a dict; a dict's\n"
        "  relative paths (model.hf_config, cluster.topology, ...) resolve against base_dir (default: the\n"
        "  current directory), and messages call it \"<dict>\".\n"
        "gpus, micro_batch, cluster: the CLI's --gpus, --micro-batch and --cluster (a preset or a topology file).\n"
        "overrides: the CLI's --set, as {\"plan.tp\": 2} or [\"plan.tp=2\"], applied after them.\n"
        "calibration, profile, prices: the CLI's input files (default: the stored calibration and prices).\n"
        "trace: also write a Perfetto/Chrome timeline of the simulated steps to this file.\n"
        "Raises ConfigError (a ValueError), TopologyError, ModelError, ... with the CLI's messages.");
  m.def("sweep", &fp::py_sweep, arg("scenario"), arg("vary") = none, py::kw_only(), arg("gpus") = none,
        arg("micro_batch") = none, arg("base_dir") = none, arg("overrides") = none, arg("calibration") = none,
        arg("profile") = none, arg("prices") = none, arg("jobs") = 0, arg("shard") = none,
        "sweep(scenario, vary=None, *, gpus=None, micro_batch=None, base_dir=None, overrides=None,\n"
        "      calibration=None, profile=None, prices=None, jobs=0, shard=None) -> list[dict]\n\n"
        "Simulates every combination of gpus (cluster.gpus), micro_batch (plan.micro_batch) and vary\n"
        "({\"plan.precision\": [\"fp32\", \"amp_fp16\"]}) on `jobs` threads (0: all cores), as `foresight sweep`.\n"
        "Returns one dict per configuration, the first dimension varying slowest: the dimensions' columns\n"
        "(\"gpus\", \"micro_batch\", each vary path) with the values given, then the CSV's result columns:\n"
        "numbers as float (as the CSV rounds them, 9 significant digits), oom as bool, empty fields as None;\n"
        "a configuration that failed when simulated has its message in \"error\". pandas.DataFrame(rows) takes\n"
        "the list. Every configuration is checked before any runs: ConfigError \"sweep configuration ...\".\n"
        "shard=(I, N): run only configurations i with i % N == I (as `foresight sweep --shard I/N`); each row\n"
        "then starts with \"config\", i, so that the shards' rows sorted by it are the whole sweep's.");
  m.def("plan", &fp::py_plan, arg("scenario"), py::kw_only(), arg("base_dir") = none, arg("overrides") = none,
        arg("tp") = none, arg("pp") = none, arg("virtual_stages") = none, arg("micro_batches") = none,
        arg("recompute") = none, arg("zero") = none, arg("sequence_parallel") = none, arg("ep") = none,
        arg("expert_tp") = none, arg("memory_margin") = 0.1,
        arg("top") = 10, arg("jobs") = 0, arg("clusters") = none, arg("gpus") = none, arg("budget") = 0.0,
        arg("calibration") = none, arg("profile") = none, arg("prices") = none,
        "plan(scenario, *, base_dir=None, overrides=None, tp=None, pp=None, virtual_stages=None,\n"
        "     micro_batches=None, recompute=None, zero=None, sequence_parallel=None, ep=None, expert_tp=None,\n"
        "     memory_margin=0.1,\n"
        "     top=10, jobs=0, clusters=None, gpus=None, budget=0.0, calibration=None, profile=None, prices=None)\n"
        "    -> dict\n\n"
        "Searches the parallel plans of a scenario's model, cluster and global batch: the dict\n"
        "`foresight plan --json` prints, {\"plans\": [...], \"simulated\": n, \"compiled\": n}, the best first.\n"
        "tp, pp, virtual_stages, micro_batches, zero, ep: lists of integers; recompute: list of modes;\n"
        "sequence_parallel: list of bools; expert_tp: list of \"tp\" and integers (experts split over that many\n"
        "TP ranks, 1 whole);\n"
        "None takes the planner's default. With clusters (presets or\n"
        "topology files) and/or gpus (counts), compares hardware instead: {\"options\": [...]}, priced, with\n"
        "the Pareto front and budget (USD) marked.");
  m.def("replay", &fp::py_replay, arg("traces"), py::kw_only(), arg("step") = none, arg("cluster") = none,
        arg("gpus") = none, arg("trace_gpu") = none, arg("keep_stalls") = false, arg("trace") = none,
        "replay(traces, *, step=None, cluster=None, gpus=None, trace_gpu=None, keep_stalls=False, trace=None)\n"
        "    -> dict\n\n"
        "Replays one step of PyTorch-profiler (Kineto) traces (a path, or a list of paths: a joint replay),\n"
        "or one iteration of PyTorch execution traces (host or host+device ETs),\n"
        "and returns the dict `foresight replay --json` prints. step: 0-based, negative from the end\n"
        "(default: the last); cluster, gpus, trace_gpu, keep_stalls: the CLI's options; trace: write the\n"
        "replayed timeline to this file.");
  m.def("validate", &fp::py_validate, py::kw_only(), arg("suite") = none, arg("calibration") = none,
        arg("traces") = none, arg("network") = "flow", arg("datasets") = none,
        "validate(*, suite=None, calibration=None, traces=None, network=\"flow\", datasets=None) -> dict\n\n"
        "Predicts the validation suite's measured cases: the dict `foresight validate --json` prints,\n"
        "{\"datasets\": [{\"name\", \"mape_pct\", \"threshold_pct\", \"passed\", \"cases\": [...], ...}]}. It does\n"
        "not raise when a dataset fails its threshold: check \"passed\". suite, calibration: the manifest and\n"
        "calibration files (default: the stored ones); traces: the folder of measured traces (None: the\n"
        "default; False: none, as --no-traces); datasets: the names to run (default: all, and the trace cases).");
  m.def("topology", &fp::py_topology, arg("cluster"), py::kw_only(), arg("gpus") = 0,
        "topology(cluster, *, gpus=0) -> dict\n\n"
        "Builds a cluster (a preset name, or a topology file's path) and returns the dict\n"
        "`foresight topology --json` prints: its GPUs, nodes, links by class and bisection bandwidth.\n"
        "gpus: size a preset to this many GPUs (0: the preset's default).");
  m.def("collective", &fp::py_collective, arg("cluster"), py::kw_only(), arg("gpus") = 0, arg("op") = "all_reduce",
        arg("sizes") = "1K:8G", arg("factor") = 2.0, arg("algorithm") = none, arg("protocol") = none, arg("root") = 0,
        arg("network") = "flow", arg("timing") = "nccl", arg("calibration") = none,
        "collective(cluster, *, gpus=0, op=\"all_reduce\", sizes=\"1K:8G\", factor=2.0, algorithm=None,\n"
        "           protocol=None, root=0, network=\"flow\", timing=\"nccl\", calibration=None) -> list[dict]\n\n"
        "Sweeps one collective over message sizes on the cluster's first `gpus` GPUs (0: all), as\n"
        "nccl-tests does, and returns the list `foresight collective --json` prints: one dict per size with\n"
        "size_bytes, time_s, algbw_GBps, busbw_GBps, algorithm, protocol, channels, nccl_model_time_s.\n"
        "sizes: \"MIN:MAX\" stepping by factor, or \"1M,64M,1G\"; the other options as the CLI's.");
  m.def("params", []() -> py::object { return fp::to_python(foresight::strategy::params_json()); },
        "params() -> list\n\n"
        "Every key a scenario file takes, with its type, unit, default, range and meaning: what\n"
        "`foresight params --json` prints.");
}
