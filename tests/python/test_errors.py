"""Foresight's errors as Python exceptions: the classes, and the messages the CLI prints."""
import pytest

import foresight


def test_error_classes():
    assert issubclass(foresight.Error, RuntimeError)
    for name in ("ConfigError", "TopologyError", "ModelError", "TraceError"):
        cls = getattr(foresight, name)
        assert issubclass(cls, foresight.Error) and issubclass(cls, ValueError), name
    for name in ("GraphError", "InternalError"):
        cls = getattr(foresight, name)
        assert issubclass(cls, foresight.Error) and not issubclass(cls, ValueError), name


@pytest.mark.parametrize("fixture, says", [
    ("negative_batch.json", "/plan/micro_batch"),
    ("unknown_key.json", "micro_bacth"),
    ("wrong_type.json", "/plan/grad_accum"),
    ("unknown_preset.json", "/cluster/preset"),
])
def test_bad_scenario_files_raise_the_cli_message(cli, test_data, fixture, says):
    path = test_data / "bad" / "scenarios" / fixture
    with pytest.raises(foresight.Error) as e:
        foresight.simulate(path)
    assert str(e.value) == cli.error("simulate", path)
    assert str(path) in str(e.value)  # the message names the file
    assert says in str(e.value)


def test_bad_scenario_raises_config_error_naming_the_field(test_data):
    path = test_data / "bad" / "scenarios" / "negative_batch.json"
    with pytest.raises(foresight.ConfigError) as e:
        foresight.simulate(path)
    assert isinstance(e.value, ValueError)


def test_unknown_key_in_a_dict_is_rejected():
    doc = {"model": {"name": "resnet18-cifar"}, "cluster": {"preset": "dgx-a100", "gpus": 2},
           "plan": {"dp": 2, "micro_batch": 16, "micro_bacth": 32}, "workload": {"steps": 10}}
    with pytest.raises(foresight.ConfigError) as e:
        foresight.simulate(doc)
    assert str(e.value).startswith("<dict>: /plan")
    assert "micro_bacth" in str(e.value)


def test_an_override_of_an_unknown_field_is_rejected_as_the_cli(cli, test_data):
    scenario = test_data / "scenarios" / "small_ddp.json"
    with pytest.raises(foresight.ConfigError) as e:
        foresight.simulate(scenario, overrides={"plan.bogus": 1})
    assert str(e.value) == cli.error("simulate", scenario, "--set", "plan.bogus=1")


def test_a_value_json_cannot_hold_names_its_pointer():
    doc = {"model": {"name": "resnet18-cifar"}, "cluster": {"preset": "dgx-a100", "gpus": 2},
           "plan": {"dp": {2}, "micro_batch": 16}, "workload": {"steps": 10}}
    with pytest.raises(foresight.ConfigError, match=r"^<dict>: /plan/dp: expected a JSON value .* found set$"):
        foresight.simulate(doc)
    loop = {"model": {}}
    loop["model"]["self"] = loop
    with pytest.raises(foresight.ConfigError, match="levels of nesting"):
        foresight.simulate(loop)


def test_a_missing_file_names_it(cli, tmp_path):
    missing = tmp_path / "nowhere.json"
    with pytest.raises(foresight.ConfigError) as e:
        foresight.simulate(missing)
    assert str(missing) in str(e.value)
    assert str(e.value) == cli.error("simulate", missing)


def test_arguments_of_the_wrong_type(test_data):
    with pytest.raises(TypeError, match="scenario: expected a dict .* or a path"):
        foresight.simulate(42)
    with pytest.raises(foresight.ConfigError, match="gpus: expected an integer >= 1, found 0"):
        foresight.simulate(test_data / "scenarios" / "small_ddp.json", gpus=0)
    with pytest.raises(foresight.ConfigError, match="base_dir: only for a scenario given as a dict"):
        foresight.simulate(test_data / "scenarios" / "small_ddp.json", base_dir=test_data)
    with pytest.raises(foresight.ConfigError, match=r"--set: expected PATH=VALUE"):
        foresight.simulate(test_data / "scenarios" / "small_ddp.json", overrides=["plan.tp"])


def test_cluster_and_input_file_errors_as_the_cli(cli, test_data, tmp_path):
    scenario = test_data / "scenarios" / "small_ddp.json"
    topology = tmp_path / "no_such_topology.json"
    with pytest.raises(foresight.Error) as e:
        foresight.simulate(scenario, cluster=topology)
    assert str(topology) in str(e.value)
    assert str(e.value) == cli.error("simulate", scenario, "--cluster", topology)
    calibration = tmp_path / "no_such_calibration.json"
    with pytest.raises(foresight.Error) as e:
        foresight.simulate(scenario, calibration=calibration)
    assert str(e.value) == cli.error("simulate", scenario, "--calibration", calibration)
    prices = tmp_path / "prices.json"
    prices.write_text("{\"gpus\": 3}")
    with pytest.raises(foresight.Error) as e:
        foresight.simulate(scenario, prices=prices)
    assert str(prices) in str(e.value)
    assert str(e.value) == cli.error("simulate", scenario, "--prices", prices)
