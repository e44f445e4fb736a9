# SPDX-License-Identifier: Apache-2.0
"""The make-sim kernels (golden/kernels.py) on the golden ISA simulator: every output bit for
bit against the kernel's independent golden composition and within its float64 bound, no race,
the same DRAM under random interleavings, and the shapes they refuse."""

import random

import numpy as np
import pytest

from golden.isasim import IsaSim, find_races
from golden.kernels import KERNELS, attention_head, mlp, random_inputs
from rtl.config import DEFAULT, SMALL


def _check(case, seeds=(1,)):
    sim = IsaSim(case.cfg, dram_bytes=case.kp.dram)
    assert sim.run(case.kp.programs) is None
    res = case.check(case.kp.read_outputs(sim))
    for name, (bad, ratio) in res.items():
        assert bad == 0, (case.name, name, bad)
        assert ratio <= 1.0, (case.name, name, ratio)
    assert find_races(sim) == []
    for s in seeds:
        s2 = IsaSim(case.cfg, dram_bytes=case.kp.dram)
        assert s2.run(case.kp.programs, policy=random.Random(s)) is None
        assert s2.mem.dram == sim.mem.dram
    return sim, res


@pytest.mark.parametrize("name", sorted(KERNELS))
def test_kernel_small(name):
    case = KERNELS[name](SMALL, *random_inputs(SMALL, name, seed=11))
    sim, res = _check(case)
    # the bound is not vacuous: the worst error uses a visible part of it
    assert max(r for _b, r in res.values()) > 1e-3
    st = sim.stats()
    assert st["cycles"] > 0 and all(0 < v <= 1 for v in st["busy"].values())


def test_kernel_expected_values_catch_a_wrong_program():
    """A program that differs from its expected output is caught: the expected output does not
    come from the simulator (swap the bias sign in DRAM and the check fails)."""
    case = mlp(SMALL, *random_inputs(SMALL, "mlp", seed=2, T=8))
    b = case.kp.tensors["b"]
    img = case.kp.dram
    raw = np.frombuffer(bytes(img[b.addr:b.addr + 4]), np.uint32)[0] ^ 0x80000000
    img[b.addr:b.addr + 4] = int(raw).to_bytes(4, "little")
    sim = IsaSim(SMALL, dram_bytes=img)
    assert sim.run(case.kp.programs) is None
    bad, _ = case.check(case.kp.read_outputs(sim))["YT"]
    assert bad > 0


def test_kernel_shapes_refused():
    with pytest.raises(ValueError, match="attention_head"):
        attention_head(SMALL, *random_inputs(SMALL, "attention_head", d=SMALL.pe_rows + 1))
    with pytest.raises(ValueError, match="mlp"):
        x, w, b = random_inputs(SMALL, "mlp")
        mlp(SMALL, x, w, b[:-1])
    with pytest.raises(ValueError, match="kernel name"):
        random_inputs(SMALL, "conv")


@pytest.mark.full
@pytest.mark.parametrize("name", sorted(KERNELS))
def test_kernel_default(name):
    _check(KERNELS[name](DEFAULT, *random_inputs(DEFAULT, name, seed=5)), seeds=(1, 2))


def test_run_golden_reports_and_draws(tmp_path):
    from golden.kernels import layer_norm, run_golden
    case = layer_norm(SMALL, *random_inputs(SMALL, "layer_norm", D=8))
    r = run_golden(case, png=str(tmp_path / "ln.png"))
    assert r["error"] is None and r["check"]["Y"][0] == 0
    assert r["cycles"] == r["sim"].stats()["cycles"] > 0
    assert r["instructions"]["dve"] > 0 and (tmp_path / "ln.png").stat().st_size > 0
