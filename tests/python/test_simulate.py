"""foresight.simulate: the report `foresight simulate --json` prints, from a file or a dict."""
import concurrent.futures
import json
import os
import pathlib
import re

import pytest

import foresight


def test_version_is_the_projects(source_root):
    # meson.build's project(..., version: 'X.Y.Z') is the one version.
    declared = re.search(r"version:\s*'([^']+)'", (source_root / "meson.build").read_text()).group(1)
    assert foresight.__version__ == declared


def test_simulate_file_equals_cli_json(cli, source_root):
    scenario = source_root / "examples" / "thetagpu-resnet18-ddp.json"
    report = foresight.simulate(scenario)
    assert report == cli.json("simulate", scenario, "--json")
    # A real report: the scenario's measured run is compared, the time is positive.
    assert report["iteration_time_s"] > 0
    assert report["measured"]["compared"] is True
    # Edited, the scenario is no longer the measured run: the CLI says so, and so does the module.
    edited = foresight.simulate(scenario, gpus=4)
    assert edited == cli.json("simulate", scenario, "--gpus", "4", "--json")
    assert edited["measured"]["compared"] is False and edited["measured"]["error_pct"] is None


def test_simulate_dict_equals_file(source_root):
    path = source_root / "examples" / "thetagpu-resnet18-ddp.json"
    from_file = foresight.simulate(str(path))
    from_dict = foresight.simulate(json.loads(path.read_text()))
    # Only the name the scenario goes by differs: a dict is "<dict>".
    assert from_dict.pop("scenario") == "<dict>"
    assert from_file.pop("scenario") == str(path)
    assert from_dict == from_file


def test_overrides_equal_cli_flags(cli, test_data):
    scenario = test_data / "scenarios" / "small_ddp.json"
    report = foresight.simulate(scenario, gpus=2, micro_batch=16, overrides={"plan.precision": "fp32"})
    assert report == cli.json("simulate", scenario, "--gpus", "2", "--micro-batch", "16", "--set",
                              "plan.precision=fp32", "--json")
    assert report["cluster"]["gpus"] == 2
    assert report["plan"]["dp"] == 2  # cluster.gpus sets dp, as --gpus does
    assert report["plan"]["micro_batch"] == 16
    # The same edits as "PATH=VALUE" strings, and as JSON values.
    assert foresight.simulate(scenario, overrides=["cluster.gpus=2", "plan.micro_batch=16", "plan.precision=fp32"]) == report
    assert foresight.simulate(scenario, overrides={"cluster.gpus": 2, "plan.micro_batch": 16,
                                                   "plan.precision": "fp32"}) == report


def test_cluster_override_equals_cli(cli, test_data):
    scenario = test_data / "scenarios" / "small_ddp.json"
    report = foresight.simulate(scenario, cluster="dgx-h100")
    assert report == cli.json("simulate", scenario, "--cluster", "dgx-h100", "--json")
    assert "H100" in report["cluster"]["gpu"]


def test_dict_relative_paths_resolve_against_base_dir(test_data, tmp_path, monkeypatch):
    doc = {"model": {"hf_config": "hf/gpt2/config.json", "seq_len": 256},
           "cluster": {"preset": "dgx-a100", "gpus": 2},
           "plan": {"dp": 2, "micro_batch": 2, "precision": "amp_bf16", "optimizer": "adam"},
           "workload": {"steps": 10}}
    monkeypatch.chdir(tmp_path)  # nothing named hf/ here
    with pytest.raises(foresight.Error) as missing:
        foresight.simulate(doc)
    assert "hf/gpt2/config.json" in str(missing.value)
    report = foresight.simulate(doc, base_dir=test_data)
    assert report["scenario"] == str(test_data / "<dict>")
    assert report["model"]["params"] > 100e6  # GPT-2 small: 124 M parameters
    # The same document as a file, its path made absolute, reads the same.
    file_report = foresight.simulate(_written(tmp_path, doc, test_data))
    file_report.pop("scenario")
    report.pop("scenario")
    assert file_report == report


def _written(tmp_path, doc, base):
    """`doc` written to tmp_path with its relative paths made absolute against `base`."""
    doc = json.loads(json.dumps(doc))
    doc["model"]["hf_config"] = str(pathlib.Path(base) / doc["model"]["hf_config"])
    path = tmp_path / "scenario.json"
    path.write_text(json.dumps(doc))
    return path


def test_trace_writes_a_timeline(test_data, tmp_path):
    timeline = tmp_path / "run.trace.json"
    report = foresight.simulate(test_data / "scenarios" / "small_ddp.json", trace=timeline)
    events = json.loads(timeline.read_text())["traceEvents"]
    assert any(e.get("ph") == "X" for e in events)
    assert report["iteration_time_s"] > 0


def test_concurrent_simulations_equal_serial_ones(test_data):
    # No shared mutable state, and the GIL is released: threads give the serial answers.
    scenario = test_data / "scenarios" / "small_ddp.json"
    batches = [8, 16, 32, 64]
    serial = [foresight.simulate(scenario, micro_batch=b) for b in batches]
    with concurrent.futures.ThreadPoolExecutor(max_workers=4) as pool:
        threaded = list(pool.map(lambda b: foresight.simulate(scenario, micro_batch=b), batches))
    assert threaded == serial
    assert len({r["iteration_time_s"] for r in serial}) == len(batches)


def test_numpy_like_integers_are_accepted(test_data):
    class Index:  # as numpy.int64: an integer through __index__
        def __index__(self):
            return 2

    scenario = test_data / "scenarios" / "small_ddp.json"
    assert foresight.simulate(scenario, gpus=Index()) == foresight.simulate(scenario, gpus=2)
    assert os.fspath(scenario)  # a PathLike was accepted above
