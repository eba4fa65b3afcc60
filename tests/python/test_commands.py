"""foresight.plan, replay and validate: the dicts their CLI commands print with --json."""
import json

import pytest

import foresight

# A small plan space (the CLI tests' own): 18 candidates of GPT-2 on 8 A100s.
SPACE = dict(tp=[1, 2], pp=[1, 2], micro_batches=[1, 2, 8], recompute=["none"], zero=[0], sequence_parallel=[False])
SPACE_FLAGS = ["--tp", "1,2", "--pp", "1,2", "--micro-batches", "1,2,8", "--recompute", "none", "--zero", "0",
               "--sequence-parallel", "off"]


def test_plan_equals_cli_json(cli, test_data):
    scenario = test_data / "scenarios" / "plan_gpt2.json"
    search = foresight.plan(scenario, jobs=2, **SPACE)
    assert search == cli.json("plan", scenario, *SPACE_FLAGS, "--jobs", "2", "--json")
    assert len(search["plans"]) == 18
    best = search["plans"][0]
    assert best["status"] == "best"
    # The best plan's --set flags make simulate run it at the planner's time.
    report = foresight.simulate(scenario, overrides=best["set"])
    assert report["iteration_time_s"] == best["iteration_s"]


def test_plan_of_a_dict_with_overrides(test_data):
    path = test_data / "scenarios" / "plan_gpt2.json"
    doc = json.loads(path.read_text())
    by_dict = foresight.plan(doc, overrides={"plan.global_batch": 64}, **SPACE)
    by_file = foresight.plan(path, overrides=["plan.global_batch=64"], **SPACE)
    assert by_dict == by_file
    assert by_dict != foresight.plan(path, **SPACE)  # the batch changed what fits


def test_plan_compares_hardware_as_the_cli(cli, test_data):
    scenario = test_data / "scenarios" / "plan_gpt2.json"
    space = dict(SPACE, pp=[1], micro_batches=[2])
    flags = ["--tp", "1,2", "--pp", "1", "--micro-batches", "2", "--recompute", "none", "--zero", "0",
             "--sequence-parallel", "off"]
    compared = foresight.plan(scenario, clusters=["dgx-a100", "dgx-h100"], gpus=[8], **space)
    assert compared == cli.json("plan", scenario, *flags, "--clusters", "dgx-a100,dgx-h100", "--gpus", "8", "--json")
    assert [o["cluster"] for o in compared["options"]] == ["dgx-a100", "dgx-h100"]
    a100, h100 = (o["best"]["iteration_s"] for o in compared["options"])
    assert h100 < a100


def test_plan_searches_expert_parallelism_as_the_cli(cli, test_data):
    scenario = test_data / "scenarios" / "plan_tiny_moe.json"
    space = dict(tp=[1], pp=[1], virtual_stages=[1], micro_batches=[1], recompute=["none"], zero=[0, 1],
                 sequence_parallel=[False], ep=[2, 8])
    flags = ["--tp", "1", "--pp", "1", "--virtual-stages", "1", "--micro-batches", "1", "--recompute", "none",
             "--zero", "0,1", "--sequence-parallel", "off", "--ep", "2,8"]
    search = foresight.plan(scenario, jobs=1, **space)
    assert search == cli.json("plan", scenario, *flags, "--jobs", "1", "--json")
    assert sorted(p["plan"]["ep"] for p in search["plans"]) == [2, 2, 8, 8]
    with pytest.raises(foresight.ConfigError, match=r"ep: expected an integer >= 1, found 0"):
        foresight.plan(scenario, ep=[0])
    # Expert TP: split as TP (2) and whole (1) at tp 2 with sequence parallelism, as the CLI's.
    space = dict(tp=[2], pp=[1], virtual_stages=[1], micro_batches=[1], recompute=["none"], zero=[1],
                 sequence_parallel=[True], ep=[4], expert_tp=["tp", 1])
    flags = ["--tp", "2", "--pp", "1", "--virtual-stages", "1", "--micro-batches", "1", "--recompute", "none",
             "--zero", "1", "--sequence-parallel", "on", "--ep", "4", "--expert-tp", "tp,1"]
    search = foresight.plan(scenario, jobs=1, **space)
    assert search == cli.json("plan", scenario, *flags, "--jobs", "1", "--json")
    assert sorted(p["plan"].get("expert_tp", 2) for p in search["plans"]) == [1, 2]
    with pytest.raises(foresight.ConfigError, match=r"expert_tp: expected \"tp\" or an integer >= 1, found 0"):
        foresight.plan(scenario, expert_tp=[0])


def test_plan_argument_errors(test_data):
    scenario = test_data / "scenarios" / "plan_gpt2.json"
    with pytest.raises(foresight.ConfigError, match=r"tp: expected an integer >= 1, found 0"):
        foresight.plan(scenario, tp=[0])
    with pytest.raises(foresight.ConfigError, match=r"memory_margin: expected a fraction in \[0, 1\)"):
        foresight.plan(scenario, memory_margin=1.5)
    with pytest.raises(foresight.ConfigError, match="sequence_parallel: expected True, False"):
        foresight.plan(scenario, sequence_parallel=["maybe"])
    with pytest.raises(foresight.ConfigError, match="budget compares hardware"):
        foresight.plan(scenario, budget=1000)


def test_replay_equals_cli_json(cli, test_data, tmp_path):
    trace = test_data / "traces" / "mini_kineto.json"
    replayed = foresight.replay(trace)
    assert replayed == cli.json("replay", trace, "--json")
    assert replayed["measured_s"] > 0 and replayed["replayed_s"] > 0
    assert replayed["error_pct"] == pytest.approx((replayed["replayed_s"] / replayed["measured_s"] - 1) * 100)
    on_h100 = foresight.replay(trace, cluster="dgx-h100", step=0, trace=tmp_path / "replay.trace.json")
    assert on_h100 == cli.json("replay", trace, "--cluster", "dgx-h100", "--step", "0", "--json")
    assert on_h100["cluster"] == "dgx-h100"
    assert json.loads((tmp_path / "replay.trace.json").read_text())["traceEvents"]


def test_replay_errors_as_the_cli(cli, test_data):
    bad = test_data / "traces" / "bad_malformed.json"
    with pytest.raises(foresight.Error) as e:
        foresight.replay(bad)
    assert str(e.value) == cli.error("replay", bad)
    with pytest.raises(foresight.ConfigError, match="gpus: expected an integer >= 2"):
        foresight.replay(test_data / "traces" / "mini_kineto.json", gpus=1)


def _one_dataset_suite(source_root, tmp_path, name):
    manifest = json.loads((source_root / "validate" / "data" / "suite.json").read_text())
    entry = next(d for d in manifest["datasets"] if d["name"] == name)
    entry = dict(entry, file=str(source_root / "validate" / "data" / entry["file"]))
    path = tmp_path / "suite.json"
    path.write_text(json.dumps({"datasets": [entry]}))
    return path


def test_validate_equals_cli_json(cli, source_root, tmp_path):
    suite = _one_dataset_suite(source_root, tmp_path, "nccl_busbw")
    results = foresight.validate(suite=suite, traces=False)
    assert results == cli.json("validate", "--suite", suite, "--no-traces", "--json")
    (dataset,) = results["datasets"]
    assert dataset["name"] == "nccl_busbw"
    assert dataset["predictions"] > 0 and dataset["passed"] is True
    assert dataset["mape_pct"] <= dataset["threshold_pct"]
    # Chosen by name from the stored suite: the same dataset, the same results.
    chosen = foresight.validate(datasets=["nccl_busbw"])
    assert chosen["datasets"][0]["cases"] == dataset["cases"]


def test_validate_unknown_dataset_names_the_known_ones():
    with pytest.raises(foresight.ConfigError, match=r"datasets: expected a dataset of .*nccl_busbw.*found \"nccl\""):
        foresight.validate(datasets=["nccl"])


def test_replay_of_an_execution_trace_equals_cli_json(cli, test_data):
    et = test_data / "traces" / "tiny_host_et.json"
    replayed = foresight.replay(et)
    assert replayed == cli.json("replay", et, "--json")
    assert replayed["format"] == "pytorch_et" and replayed["kernels"] == 3
    with pytest.raises(foresight.ConfigError, match="apply to Kineto traces"):
        foresight.replay(et, step=0)
