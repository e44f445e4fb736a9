# SPDX-License-Identifier: Apache-2.0
"""The arithmetic designs under test, built identically by pytest and inside cocotb."""

import hashlib
import warnings

from amaranth.hdl import UnusedElaboratable

from rtl.fp.adder import FP32Adder
from rtl.fp.fma import FMA
from rtl.fp.multiplier import ExactMultiplier
from tb.harness import VectorHarness

#: Vectors per harness batch.
DEPTH = 4096
UNITS = ("mul", "fma", "add")


def dut(unit, cfg):
    """The unit under test; multiplier and FMA take every dense format of ``cfg`` for both
    operands (one build covers all pairs through the run-time selects)."""
    if unit == "mul":
        return ExactMultiplier(cfg)
    if unit == "fma":
        return FMA(cfg)
    if unit == "add":
        return FP32Adder(cfg)
    raise ValueError(f"unit must be one of {UNITS}, not {unit!r}")


def rebuild(unit, cfg):
    """``dut`` for reading layouts and latency only (never elaborated: no warning)."""
    # The objects (and their submodules) are collected later: silence that warning for good.
    warnings.filterwarnings("ignore", category=UnusedElaboratable)
    return dut(unit, cfg)


def harness(unit, cfg):
    return VectorHarness(dut(unit, cfg), depth=DEPTH)


def build_name(unit, cfg):
    """Build directory / top name: one per unit, pipeline depth and format set."""
    fmts = "_".join(sorted(cfg.formats))
    h = hashlib.sha1(f"{fmts}/{cfg.cfp8_exp_bits}/{cfg.cfp8_bias}".encode()).hexdigest()[:6]
    return f"fp_{unit}_m{cfg.mul_stages}a{cfg.add_stages}_{h}"


