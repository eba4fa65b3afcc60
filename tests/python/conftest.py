"""Fixtures for the foresight Python module's tests: the paths Meson passes in (tests/meson.build's
environment) and a runner of the `foresight` binary the module mirrors."""
import json
import os
import pathlib
import subprocess

import pytest


def _env_path(name):
    value = os.environ.get(name)
    if not value:
        pytest.fail(f"{name} is not set: run these tests through `meson test` (tests/meson.build sets it)")
    return pathlib.Path(value)


@pytest.fixture(scope="session")
def source_root():
    return _env_path("FORESIGHT_SOURCE_ROOT")


@pytest.fixture(scope="session")
def test_data():
    return _env_path("FORESIGHT_TEST_DATA")


class Cli:
    """The foresight binary: run(args) -> CompletedProcess; json(args) -> its --json output parsed;
    error(args) -> the message after "foresight: error: " of a run that failed."""

    def __init__(self, exe):
        self.exe = str(exe)

    def run(self, *args, cwd=None):
        return subprocess.run([self.exe, *map(str, args)], capture_output=True, text=True, cwd=cwd, timeout=300)

    def json(self, *args, cwd=None):
        r = self.run(*args, cwd=cwd)
        assert r.returncode == 0, r.stderr
        return json.loads(r.stdout)

    def error(self, *args, cwd=None):
        r = self.run(*args, cwd=cwd)
        assert r.returncode == 1, (r.returncode, r.stdout, r.stderr)
        prefix = "foresight: error: "
        assert r.stderr.startswith(prefix), r.stderr
        return r.stderr[len(prefix):].rstrip("\n")


@pytest.fixture(scope="session")
def cli():
    return Cli(_env_path("FORESIGHT_EXE"))
