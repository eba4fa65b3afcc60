"""foresight.topology, collective and params: the objects their CLI commands print with --json."""
import pytest

import foresight


def test_topology_equals_cli_json(cli, source_root):
    assert foresight.topology("dgx-a100", gpus=16) == cli.json("topology", "dgx-a100", "--gpus", "16", "--json")
    ring = source_root / "examples" / "topologies" / "ring4.json"
    report = foresight.topology(ring)
    assert report == cli.json("topology", ring, "--json")
    assert report["gpus"] == 4


def test_topology_errors_as_the_cli(cli):
    with pytest.raises(foresight.ConfigError) as e:
        foresight.topology("no-such-preset")
    assert str(e.value) == cli.error("topology", "no-such-preset")
    with pytest.raises(foresight.ConfigError, match="gpus: expected an integer >= 0, found -1"):
        foresight.topology("dgx-a100", gpus=-1)


def test_collective_equals_cli_json(cli):
    rows = foresight.collective("dgx-a100", gpus=8, sizes="1M:64M", factor=4)
    assert rows == cli.json("collective", "--cluster", "dgx-a100", "--gpus", "8", "--sizes", "1M:64M", "--factor", "4",
                            "--json")
    # 1 MiB, 4 MiB, 16 MiB, 64 MiB: nccl-tests' stepping, bus bandwidth 2(n-1)/n of the algorithm's.
    assert [r["size_bytes"] for r in rows] == [float(1 << 20), float(1 << 22), float(1 << 24), float(1 << 26)]
    for r in rows:
        assert r["busbw_GBps"] == pytest.approx(r["algbw_GBps"] * 2 * 7 / 8, rel=1e-12)
        assert r["algbw_GBps"] == pytest.approx(r["size_bytes"] / r["time_s"] / 1e9, rel=1e-9)
    forced = foresight.collective("dgx-a100", gpus=8, sizes="64M", algorithm="tree", protocol="Simple",
                                  network="analytical")
    assert (forced[0]["algorithm"], forced[0]["protocol"]) == ("tree", "Simple")
    assert forced == cli.json("collective", "--cluster", "dgx-a100", "--gpus", "8", "--sizes", "64M", "--algorithm",
                              "tree", "--protocol", "Simple", "--network", "analytical", "--json")


def test_collective_errors_as_the_cli(cli):
    for kwargs, flags in [(dict(sizes="0:1G"), ["--sizes", "0:1G"]), (dict(op="all_sum"), ["--op", "all_sum"]),
                          (dict(sizes="1K:1M", factor=1.0), ["--sizes", "1K:1M", "--factor", "1"]), (dict(timing="exact"), ["--timing", "exact"])]:
        with pytest.raises(foresight.ConfigError) as e:
            foresight.collective("dgx-a100", **kwargs)
        assert str(e.value) == cli.error("collective", "--cluster", "dgx-a100", *flags)


def test_params_equals_cli_json(cli):
    table = foresight.params()
    assert table == cli.json("params", "--json")
    paths = [p["path"] for p in table]
    assert "plan.tp" in paths and "model.name" in paths and "workload.steps" in paths
