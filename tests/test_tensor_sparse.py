# SPDX-License-Identifier: Apache-2.0
"""Tensor engine N:M structured-sparse matmul on Verilator (``tb/tensor/tb_tensor_sparse.py``): every
enabled pattern and moving format, adversarial masks, sparse/dense accumulate chains with
back-pressure, every sparse error; bit for bit against ``golden.sparse``. Shares the Verilator
build of ``tests/test_tensor_engine.py``.
"""

import pytest

from rtl.config import get_preset
from tb.tensor.build import tensor_sim


def test_tensor_sparse(cfg, seed):
    sim = tensor_sim(cfg)
    sim.run("tb.tensor.tb_tensor_sparse", params={"seed": seed, "depths": sim.depths, "scale": 1},
            tag="sparse")


@pytest.mark.full
@pytest.mark.parametrize("rep", range(2))
def test_tensor_sparse_more_seeds(seed, rep):
    sim = tensor_sim(get_preset("small"))
    sim.run("tb.tensor.tb_tensor_sparse", params={"seed": seed + 1000 * rep, "depths": sim.depths,
                                           "scale": 3}, tag=f"sparse_full{rep}")
