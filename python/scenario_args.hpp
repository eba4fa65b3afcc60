#pragma once
/// What the module's functions take as the CLI's scenario arguments: the scenario (a dict or a
/// path), its overrides (--set) and the inputs every simulation reads (--calibration, --profile,
/// --prices), read from Python values with the GIL held, then used without it. What they mean is
/// run/scenario_inputs.hpp's, shared with the CLI.

#include <pybind11/pybind11.h>

#include <string>
#include <vector>

#include "run/scenario_inputs.hpp"

namespace foresight::python {

/// `scenario` as a source: a str or os.PathLike names a file (relative paths inside resolve
/// against its folder, as the CLI reads it); a dict is the document itself, its relative paths
/// resolved against `base_dir` (None: the current directory). TypeError for anything else;
/// ConfigError for base_dir given with a file.
strategy::ScenarioSource scenario_source(pybind11::handle scenario, pybind11::handle base_dir);

/// `overrides=`: a mapping {"plan.tp": 2, "plan.precision": "amp_fp16"} (values: a str as --set
/// reads its text, anything else as JSON) or a sequence of "PATH=VALUE" strings, in order.
std::vector<strategy::Override> override_list(pybind11::handle overrides);

/// A whole number >= `min` from an optional argument, or 0 when None; ConfigError naming `name`.
int optional_count(pybind11::handle value, const std::string& name, int min);
/// A path from an optional str/os.PathLike argument, or "" when None; TypeError naming `name`.
std::string optional_path(pybind11::handle value, const std::string& name);

/// The simulation inputs the CLI's --calibration, --profile and --prices read (empty: the stored
/// calibration and prices, no profile database).
strategy::InputFiles input_files(const strategy::InputPaths& paths);

}  // namespace foresight::python
