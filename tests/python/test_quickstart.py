"""examples/python_quickstart.py runs as a script and prints its report and its sweep's table."""
import os
import subprocess
import sys


def test_quickstart_example_runs(source_root):
    script = source_root / "examples" / "python_quickstart.py"
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120,
                       env=dict(os.environ), cwd=str(source_root))
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].startswith("foresight ") and "resnet18-cifar on 8 x A100" in lines[0]
    assert lines[1].startswith("iteration ") and "samples/s" in lines[1]
    header = next(i for i, line in enumerate(lines) if line.split()[:2] == ["gpus", "micro_batch"])
    table = lines[header + 1:header + 7]
    assert [row.split()[:2] for row in table] == [[g, b] for g in ("2", "4", "8") for b in ("64", "128")]
    assert lines[-1].startswith("most samples per GPU-second: gpus=")
