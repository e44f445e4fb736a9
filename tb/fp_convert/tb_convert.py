# SPDX-License-Identifier: Apache-2.0
"""cocotb: ``ConvertFromFP32`` bit-exact with ``golden.formats`` (RNE and SR, every format).

Params: ``seed``, ``formats``, ``lane``, ``depth``, ``tier`` ("fast"/"full"), ``n_random``,
optional ``metrics`` (JSON-lines file). The golden PRNG mirrors the RTL's: reset with the
harness, one word per SR element in stream order.
"""

import cocotb
import numpy as np

from tb.fp_convert.driver import StreamChecker
from tb.fp_convert.program import (GoldenXorWow, midpoints, format_corners, random_fp32,
                                   expected_convert)


class ConvertChecker(StreamChecker):
    def __init__(self, dut):
        super().__init__(dut, "convert", "code")
        self.prng = GoldenXorWow(self.cfg.sr_seed, self.params.get("lane", 0))

    async def reset(self):
        await super().reset()
        self.prng.reset()

    async def run(self, what, xbits, fsel, sr, bubbles=False):
        xbits = np.asarray(xbits, dtype=np.uint32)
        fsel, sr = np.asarray(fsel, dtype=np.int64), np.asarray(sr, dtype=np.int64)
        want = expected_convert(self.formats, xbits, fsel, sr, self.prng)

        def describe(j):
            return (f"x={int(xbits[j]):#010x} fmt={self.formats[fsel[j]].name} "
                    f"{'sr' if sr[j] else 'rne'} (element {j})")
        await self.check(what, want, describe, bubbles=bubbles, x=xbits, fmt=fsel, sr=sr)

    def per_format(self, make):
        """Concatenate ``make(fmt)`` bit arrays over the formats, with format indices."""
        xs, fs = [], []
        for k, f in enumerate(self.formats):
            b = make(f)
            xs.append(b)
            fs.append(np.full(len(b), k))
        return np.concatenate(xs), np.concatenate(fs)

    def random_mixed(self, rng, n):
        """``n`` random elements: random format, random mode, values near the format."""
        fsel = rng.integers(0, len(self.formats), n)
        xbits = np.zeros(n, dtype=np.uint32)
        for k, f in enumerate(self.formats):
            sel = fsel == k
            xbits[sel] = random_fp32(rng, int(sel.sum()), f)
        return xbits, fsel, rng.integers(0, 2, n)


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
