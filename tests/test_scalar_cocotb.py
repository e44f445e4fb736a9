# SPDX-License-Identifier: Apache-2.0
"""The Scalar engine alone in Verilator (cocotb family ``tb.scalar.tb_scalar``), small preset:
random programs bit for bit against golden.activation under contention and back-pressure.
Only under ``full`` (its Verilator build took 4 of ``make test``'s 25 minutes): a sample of
functions covering every table mode, one program of 10 each; all 17, four programs of 12; the
stream timing. ``make test`` covers the engine with ``tests/test_act_engine.py``
(amaranth.sim: programs, PSUM sources, table loads, contention) and on the whole core
(``tests/test_core.py``: activations with table loads on the real SBUF and PSUM)."""

import pytest

from golden.activation import FUNCTIONS
from rtl.config import get_preset
from tb.scalar.build import scalar_sim

CFG = get_preset("small")
#: every reduction mode and flag: DIRECT odd (tanh), exp segments (exp), LOG (log),
#: EVEN (rsqrt), mulx + scaled segments (silu), big DIRECT tables loaded through tw (gelu)
SAMPLE = ["tanh", "exp", "log", "rsqrt", "silu", "relu"]


@pytest.fixture(scope="module")
def sim():
    return scalar_sim(CFG)


@pytest.mark.full
def test_scalar_engine_random_programs(sim, seed):
    sim.run("tb.scalar.tb_scalar", params={"seed": seed, "functions": SAMPLE, "batches": 1,
                                          "per_batch": 10},
            testcase="random_programs")


@pytest.mark.full
def test_scalar_engine_every_function(sim, seed):
    sim.run("tb.scalar.tb_scalar", params={"seed": seed, "functions": list(FUNCTIONS),
                                          "batches": 4, "per_batch": 12},
            testcase="random_programs", tag="full")


@pytest.mark.full
def test_scalar_engine_stream_cycles(sim, seed):
    sim.run("tb.scalar.tb_scalar", params={"seed": seed, "free": 512, "stream": 4},
            testcase="stream_cycles", tag="stream")
