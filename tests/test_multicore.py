# SPDX-License-Identifier: Apache-2.0
"""The multi-core top (rtl/core/multicore.py) on Verilator (tb/multicore/tb_multicore.py):
2 cores of the small preset running collective programs against the golden multi-core
simulator bit for bit, and a link that goes down -> E_LINK on every core. 4 and 8 cores in
``make test-full``. The elaboration-level checks run without a build."""

import functools

import pytest

from rtl.config import SMALL
from rtl.core.multicore import MultiCore
from tb.multicore.build import multicore_cfg, multicore_sim


def test_multicore_rejects_a_ring_of_one():
    with pytest.raises(ValueError, match="ring_size must be in"):
        MultiCore.Signature(SMALL.replace(ring_size=1))


def test_multicore_ports():
    sig = MultiCore.Signature(SMALL)
    names = set(sig.members)
    for i in range(SMALL.ring_size):
        assert {f"c{i}_axi", f"c{i}_host", f"c{i}_irq", f"c{i}_activity"} <= names
    assert sig.members["link_down"].shape == SMALL.ring_size


@functools.cache
def _sim(n):
    return multicore_sim(multicore_cfg(SMALL, n))


@pytest.mark.full
@pytest.mark.parametrize("n", [2])
def test_multicore(seed, n):
    _sim(n).run("tb.multicore.tb_multicore", params={"seed": seed})


@pytest.mark.full
@pytest.mark.parametrize("n", [4, 8])
def test_multicore_full(seed, n):
    _sim(n).run("tb.multicore.tb_multicore", params={"seed": seed})
