# SPDX-License-Identifier: Apache-2.0
"""The Vector engine alone on Verilator (cocotb, ``tb/vector/tb_vector.py``), small preset:
random programs of every opcode and enabled format with the bad instructions of every status,
random APs, bank contention on SBUF and PSUM and ``done`` back-pressure, bit for bit against
golden. One build per session (cached in ``build/sim``)."""

from __future__ import annotations

import pytest

from rtl.config import get_preset

CFG = get_preset("small")


@pytest.fixture(scope="module")
def sim():
    from tb.vector.build import vector_sim
    return vector_sim(CFG)


def test_vector_cocotb_random_program(sim, seed):
    sim.run("tb.vector.tb_vector", params={"seed": seed, "per_opcode": 2, "mixed": 6})


@pytest.mark.full
@pytest.mark.parametrize("k", range(3))
def test_vector_cocotb_long_programs(sim, seed, k):
    sim.run("tb.vector.tb_vector", params={"seed": seed + k, "per_opcode": 6, "mixed": 30,
                                           "p_hog": 0.4, "p_ready": 0.4},
            tag=f"long{k}")
