"""foresight.sweep: one row per configuration, the columns and values of `foresight sweep`'s CSV."""
import csv

import pytest

import foresight

RESULT_COLUMNS = ["iteration_time_s", "run_time_s", "samples_per_s", "tokens_per_s", "tflops_per_gpu", "mfu",
                  "compute_s", "exposed_comm_s", "bubble_s", "host_s", "peak_bytes", "oom", "usd_run", "kwh_run",
                  "error"]


def _as_csv_field(column, value):
    """A row value as the CSV writes it back: None is empty, oom is 1 or 0, floats as %.9g."""
    if value is None:
        return ""
    if column == "oom":
        return "1" if value else "0"
    if isinstance(value, float):
        return format(value, ".9g")
    return str(value)


def test_rows_equal_cli_csv(cli, test_data, tmp_path):
    scenario = test_data / "scenarios" / "small_ddp.json"
    rows = foresight.sweep(scenario, gpus=[2, 4], micro_batch=[16, 32], jobs=2)
    out = tmp_path / "sweep.csv"
    r = cli.run("sweep", scenario, "--gpus", "2,4", "--micro-batch", "16,32", "--csv", out, "--jobs", "2")
    assert r.returncode == 0, r.stderr
    with open(out, newline="") as f:
        expected = list(csv.DictReader(f))
    assert [list(row) for row in rows] == [list(e) for e in expected]
    assert list(rows[0]) == ["gpus", "micro_batch"] + RESULT_COLUMNS
    for row, e in zip(rows, expected):
        assert {k: _as_csv_field(k, v) for k, v in row.items()} == e
    # Configuration order: the first dimension varies slowest; values keep their Python types.
    assert [(row["gpus"], row["micro_batch"]) for row in rows] == [(2, 16), (2, 32), (4, 16), (4, 32)]
    assert all(row["error"] is None and row["iteration_time_s"] > 0 for row in rows)


def test_vary_rows_equal_cli_csv(cli, test_data, tmp_path):
    scenario = test_data / "scenarios" / "small_ddp.json"
    rows = foresight.sweep(scenario, {"plan.precision": ["fp32", "amp_fp16"]}, overrides={"plan.micro_batch": 16})
    out = tmp_path / "vary.csv"
    r = cli.run("sweep", scenario, "--vary", "plan.precision=fp32,amp_fp16", "--set", "plan.micro_batch=16",
                "--csv", out)
    assert r.returncode == 0, r.stderr
    with open(out, newline="") as f:
        expected = list(csv.DictReader(f))
    assert [{k: _as_csv_field(k, v) for k, v in row.items()} for row in rows] == expected
    assert [row["plan.precision"] for row in rows] == ["fp32", "amp_fp16"]


def test_rows_make_a_dataframe(test_data):
    pandas = pytest.importorskip("pandas")
    rows = foresight.sweep(test_data / "scenarios" / "small_ddp.json", gpus=[1, 2, 4], micro_batch=[16, 32])
    df = pandas.DataFrame(rows)
    assert df.shape == (6, 2 + len(RESULT_COLUMNS))
    assert list(df.columns) == ["gpus", "micro_batch"] + RESULT_COLUMNS
    assert df["iteration_time_s"].dtype == "float64"
    assert df["oom"].dtype == "bool"
    assert df["error"].isna().all()
    # More GPUs at one micro-batch: more samples per second (data parallelism scales throughput).
    at16 = df[df.micro_batch == 16].sort_values("gpus")["samples_per_s"].tolist()
    assert at16 == sorted(at16) and at16[0] < at16[-1]


def test_sweep_is_deterministic_across_job_counts(test_data):
    scenario = test_data / "scenarios" / "small_ddp.json"
    one = foresight.sweep(scenario, gpus=[1, 2, 4], jobs=1)
    three = foresight.sweep(scenario, gpus=[1, 2, 4], jobs=3)
    assert one == three


def test_a_bad_configuration_fails_before_any_run_as_the_cli(cli, test_data, tmp_path):
    scenario = test_data / "scenarios" / "small_ddp.json"
    with pytest.raises(foresight.ConfigError) as e:
        foresight.sweep(scenario, vary={"plan.precision": ["fp32", "fp3"]})
    message = str(e.value)
    assert message.startswith("sweep configuration plan.precision=fp3: ")
    assert "/plan/precision" in message
    assert message == cli.error("sweep", scenario, "--vary", "plan.precision=fp32,fp3", "--csv", tmp_path / "x.csv")


def test_nothing_to_vary_and_bad_arguments(test_data):
    scenario = test_data / "scenarios" / "small_ddp.json"
    with pytest.raises(foresight.ConfigError, match="nothing to vary"):
        foresight.sweep(scenario)
    with pytest.raises(TypeError, match="gpus: expected a list of values"):
        foresight.sweep(scenario, gpus=8)
    with pytest.raises(foresight.ConfigError, match="jobs: expected an integer >= 0"):
        foresight.sweep(scenario, gpus=[2], jobs=-1)


def test_numpy_values_sweep_as_python_ones(test_data):
    numpy = pytest.importorskip("numpy")
    scenario = test_data / "scenarios" / "small_ddp.json"
    by_numpy = foresight.sweep(scenario, gpus=numpy.array([2, 4]), micro_batch=numpy.arange(16, 48, 16))
    by_list = foresight.sweep(scenario, gpus=[2, 4], micro_batch=[16, 32])
    assert by_numpy == by_list  # numpy.int64(2) == 2: the same rows, the given values kept
    assert isinstance(by_numpy[0]["gpus"], numpy.integer)


def test_shards_join_into_the_whole_sweep_and_match_the_cli_shard(cli, test_data, tmp_path):
    scenario = test_data / "scenarios" / "small_ddp.json"
    whole = foresight.sweep(scenario, gpus=[1, 2, 4], micro_batch=[16, 32], jobs=1)
    shards = [foresight.sweep(scenario, gpus=[1, 2, 4], micro_batch=[16, 32], jobs=1, shard=(i, 4)) for i in range(4)]
    # Round robin: shard i holds configurations i, i + 4, ...; each row says which.
    assert [[row["config"] for row in s] for s in shards] == [[0, 4], [1, 5], [2], [3]]
    joined = sorted((row for s in shards for row in s), key=lambda row: row["config"])
    assert [{k: v for k, v in row.items() if k != "config"} for row in joined] == whole
    # The CLI's shard 1/4 CSV: its "config" column and rows are this shard's.
    out = tmp_path / "shard.csv"
    r = cli.run("sweep", scenario, "--gpus", "1,2,4", "--micro-batch", "16,32", "--shard", "1/4", "--csv", out)
    assert r.returncode == 0, r.stderr
    with open(out, newline="") as f:
        lines = f.read().splitlines()
    expected = list(csv.DictReader(lines[1:]))  # after the shard's stamp line
    assert [{k: _as_csv_field(k, v) for k, v in row.items()} for row in shards[1]] == expected


@pytest.mark.parametrize("shard", [(4, 4), (-1, 4), (0, 0), (1,), "1/4", (True, 2), (0.5, 2)])
def test_a_bad_shard_is_a_config_error(test_data, shard):
    with pytest.raises(foresight.ConfigError, match="shard: expected \\(index, count\\) with 0 <= index < count"):
        foresight.sweep(test_data / "scenarios" / "small_ddp.json", gpus=[1, 2], shard=shard)
