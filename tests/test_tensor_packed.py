# SPDX-License-Identifier: Apache-2.0
"""Packed modes of the tensor engine on Verilator (``tb/tensor/tb_tensor_packed.py``): double-rate
FP8 and x4 MX, every format pair and K shape, mixed with every other mode in one accumulation
group, the packed errors and the cycle count; bit for bit against ``golden.tensor``. Shares the
Verilator build of ``tests/test_tensor_engine.py``.
"""

import pytest

from rtl.config import get_preset
from tb.tensor.build import tensor_sim


def test_tensor_packed(cfg, seed):
    sim = tensor_sim(cfg)
    sim.run("tb.tensor.tb_tensor_packed", params={"seed": seed, "depths": sim.depths, "scale": 1},
            tag="packed")


@pytest.mark.full
@pytest.mark.parametrize("rep", range(2))
def test_tensor_packed_more_seeds(seed, rep):
    sim = tensor_sim(get_preset("small"))
    sim.run("tb.tensor.tb_tensor_packed", params={"seed": seed + 1000 * rep, "depths": sim.depths,
                                           "scale": 1}, tag=f"packed_full{rep}")
