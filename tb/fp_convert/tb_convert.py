# SPDX-License-Identifier: Apache-2.0
"""cocotb: ``ConvertFromFP32`` bit-exact with ``golden.formats`` (RNE and SR, every format).

Params: ``seed``, ``formats``, ``lane``, ``depth``, ``tier`` ("fast"/"full"), ``n_random``,
optional ``metrics`` (JSON-lines file). The golden PRNG mirrors the RTL's: reset with the
harness, one word per SR element in stream order.
"""

import cocotb
import numpy as np

from tb.fp_convert.driver import ConvertChecker
from tb.fp_convert.program import format_corners, midpoints


@cocotb.test()
async def rne_midpoints(dut):
    """Every midpoint between adjacent values (and the overflow threshold) ± 1 FP32 ulp."""
    c = ConvertChecker(dut)
    await c.reset()
    rng = c.rng(1)
    sample = None if c.params["tier"] == "full" else 20000

    def make(f):
        return midpoints(f, rng, sample if f.width > 16 else None)
    x, f = c.per_format(make)
    await c.run("rne_midpoints", x, f, np.zeros(len(x)))


@cocotb.test()
async def rne_corners(dut):
    """Specials, extremes, ties at the subnormal end, and the round trip of exact values."""
    c = ConvertChecker(dut)
    await c.reset()
    x, f = c.per_format(format_corners)
    await c.run("rne_corners", x, f, np.zeros(len(x)))


@cocotb.test()
async def sr_corners(dut):
    """The same corners with stochastic rounding: exact values never move, specials as RNE,
    the PRNG still advances on every element."""
    c = ConvertChecker(dut)
    await c.reset()
    x, f = c.per_format(format_corners)
    await c.run("sr_corners", x, f, np.ones(len(x)))


@cocotb.test()
async def random_mixed(dut):
    """Random values, formats and modes interleaved per element (PRNG advances on SR only)."""
    c = ConvertChecker(dut)
    await c.reset()
    x, f, s = c.random_mixed(c.rng(2), c.params["n_random"])
    await c.run("random_mixed", x, f, s)


@cocotb.test()
async def random_mixed_bubbles(dut):
    """Valid gaps do not change SR results: the PRNG advances per valid element only."""
    c = ConvertChecker(dut)
    await c.reset()
    x, f, s = c.random_mixed(c.rng(3), max(1000, c.params["n_random"] // 10))
    await c.run("random_mixed_bubbles", x, f, s, bubbles=True)
