# SPDX-License-Identifier: Apache-2.0
"""The real DMA engine on the real SBUF, next to the SBUF-fed tensor engine, on Verilator
(``tb/mem/tb_dma_fed.py``): DRAM (cocotbext-axi ``AxiRam``, random pauses) -> SBUF -> DRAM and
SBUF -> SBUF copies byte for byte against ``golden/dma.py`` while the tensor engine reads its
operands from the same SBUF, its results bit for bit against ``golden/tensor.py``.

Fast tier: the ``small`` preset (or ``CONFIG=``), 3 rounds. ``full``: more rounds and seeds."""

import pytest

from tb.mem.dma_fed import dma_fed_sim


def test_dma_sbuf_with_tensor(cfg, seed):
    sim = dma_fed_sim(cfg)
    sim.run("tb.mem.tb_dma_fed", testcase="test_dma_sbuf_with_tensor",
            params={"seed": seed, "rounds": 3, "per_round": 8, "tiles": 3,
                    "depths": sim.depths})


@pytest.mark.full
@pytest.mark.parametrize("rep", range(2))
def test_dma_sbuf_with_tensor_more(cfg, seed, rep):
    sim = dma_fed_sim(cfg)
    sim.run("tb.mem.tb_dma_fed", testcase="test_dma_sbuf_with_tensor",
            params={"seed": seed + 1000 * rep, "rounds": 10, "per_round": 16, "tiles": 4,
                    "depths": sim.depths}, tag=f"full{rep}")
