# SPDX-License-Identifier: Apache-2.0
"""Fault and regression cases of the multi-core top on Verilator
(``tb/multicore/tb_multicore_faults.py``, small preset, docs/collectives.md §15): a core
soft-reset halfway through an all-reduce (the others report E_LINK within WATCHDOG, nothing
written outside the destination, a soft reset of every core and the same all-reduce runs clean,
bit for bit), ACCL's known failure sequences bit for bit against the golden multi-core
simulator, ranks that disagree on a collective's size (every rank an error, no hang, nothing
written outside the destination), and one all-reduce on 8 cores.

All of them need the Verilator build of the multi-core top (about 5 minutes for 2 cores, the
build shared with tests/test_multicore.py), so they run in ``make test-full``; each simulation
takes seconds once the build is cached."""

import functools

import pytest

from rtl.config import SMALL
from rtl.isa import E_SHAPE
from tb.multicore.build import multicore_cfg, multicore_sim


@functools.cache
def _sim(n):
    return multicore_sim(multicore_cfg(SMALL, n))


@pytest.mark.full
@pytest.mark.parametrize("n", [2])
def test_core_reset_mid_collective(seed, n):
    _sim(n).run("tb.multicore.tb_multicore_faults", testcase="reset_mid_collective",
                params={"seed": seed}, tag="faults_reset")


@pytest.mark.full
@pytest.mark.parametrize("n", [2])
def test_accl_failure_sequences(seed, n):
    _sim(n).run("tb.multicore.tb_multicore_faults", testcase="accl_sequences",
                params={"seed": seed}, tag="faults_accl")


@pytest.mark.full
@pytest.mark.parametrize("n", [2])
def test_ranks_disagree_on_size(seed, n):
    # today's documented behaviour (docs/collectives.md §14.3): every rank E_SHAPE, ERR_INFO
    # the sending rank whose flit did not end where this rank expected
    _sim(n).run("tb.multicore.tb_multicore_faults", testcase="size_disagreement",
                params={"seed": seed, "size_codes": SIZE_CODES[n]}, tag="faults_size")


#: Per core ``[ERR_CODE, ERR_INFO]`` of :func:`test_ranks_disagree_on_size` (rank 0 has 64
#: elements, the others 48).
SIZE_CODES = {2: [[E_SHAPE, 1], [E_SHAPE, 0]]}


@pytest.mark.full
def test_one_allreduce_on_8_cores(seed):
    _sim(8).run("tb.multicore.tb_multicore_faults", testcase="one_allreduce",
                params={"seed": seed}, tag="faults_one")
