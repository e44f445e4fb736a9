# SPDX-License-Identifier: Apache-2.0
"""The conversion testbenches' drivers: stream fields through the unit, compare with golden
(:class:`StreamChecker`; per unit :class:`ConvertChecker` and :class:`WidenChecker`)."""

import numpy as np

from tb.fp.build import DEPTH, signature
from tb.fp.driver import PipelineTB
from tb.fp_convert.program import GoldenXorWow, expected_convert, expected_widen, random_fp32

__all__ = ["StreamChecker", "ConvertChecker", "WidenChecker"]


class StreamChecker(PipelineTB):
    """A :class:`~tb.fp.driver.PipelineTB` of ``unit`` that compares ``out_field`` with golden.

    Parameters
    ----------
    dut : cocotb handle of the harness top.
    unit : ``"convert"`` or ``"widen"`` (see :mod:`tb.fp.build`).
    out_field : name of the output field compared.
    """

    def __init__(self, dut, unit, out_field):
        from tb import env
        p = env.params()
        super().__init__(dut, signature(unit, env.config(), p), unit,
                         depth=p.get("depth", DEPTH))
        self.formats = self.signature.formats
        self.out_field = out_field

    async def check(self, what, want, describe, bubbles=False, **fields):
        """Run one stream (``fields`` = numpy arrays per input field), compare with ``want``."""
        out = await self.stream(what, bubbles=bubbles, **fields)
        self.check_equal(f"{what} (bubbles={bubbles})", out[self.out_field], want, describe)


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


class WidenChecker(StreamChecker):
    def __init__(self, dut):
        super().__init__(dut, "widen", "x")

    async def run(self, what, codes, fsel, bubbles=False):
        """``codes`` may have bits set above the selected format's width (the RTL ignores
        them); golden sees the format's bits only."""
        codes, fsel = np.asarray(codes, dtype=np.int64), np.asarray(fsel, dtype=np.int64)
        widths = np.array([f.width for f in self.formats])[fsel]
        want = expected_widen(self.formats, codes & ((1 << widths) - 1), fsel)

        def describe(j):
            return f"code={int(codes[j]):#x} fmt={self.formats[fsel[j]].name} (element {j})"
        await self.check(what, want, describe, bubbles=bubbles, code=codes, fmt=fsel)
