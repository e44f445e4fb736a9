# SPDX-License-Identifier: Apache-2.0
import os
import random
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def pytest_addoption(parser):
    parser.addoption("--seed", type=int, default=None,
                     help="seed for random tests (default: random, printed on failure)")


@pytest.fixture
def seed(request):
    """A random seed, printed in the report header of a failing test (rerun with --seed)."""
    s = request.config.getoption("--seed")
    if s is None:
        s = int(os.environ.get("NC_SEED", random.randrange(1 << 31)))
    print(f"seed={s}")
    return s


@pytest.fixture(scope="session")
def cfg():
    """The preset chosen with CONFIG=<name> (default: small, for fast tests)."""
    from rtl.config import preset_from_env
    return preset_from_env(default="small")


def pytest_runtest_logreport(report):
    """Each test's wall seconds (setup + call + teardown) appended to
    ``build/test-durations/<worker>.tsv`` as it ends, so a run that is stopped or whose worker
    dies still tells where the time went (``make test`` prints the slowest at the end)."""
    if getattr(report, "node", None) is not None:     # xdist's controller: the worker wrote it
        return
    d = ROOT / "build" / "test-durations"
    d.mkdir(parents=True, exist_ok=True)
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    with open(d / f"{worker}.tsv", "a") as f:
        f.write(f"{report.nodeid}\t{report.when}\t{report.duration:.2f}\t{report.outcome}\n")
