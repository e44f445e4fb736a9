# SPDX-License-Identifier: Apache-2.0
"""cocotb: ``WidenToFP32`` bit-exact with ``golden.formats.decode_bits`` for every code of
every format up to 16 bits (and e8m0), all tf32 codes in the full tier (a sample otherwise),
and random codes.

Params: ``seed``, ``formats``, ``depth``, ``tier``, ``n_random``, optional ``metrics``.
"""

import cocotb
import numpy as np

from tb.fp_convert.driver import WidenChecker


@cocotb.test()
async def every_code(dut):
    """All codes of every format up to 16 bits; all 2**19 tf32 codes in the full tier, else
    a random sample plus its extreme binades."""
    c = WidenChecker(dut)
    await c.reset()
    rng = c.rng(1)
    codes, fsel = [], []
    for k, f in enumerate(c.formats):
        n = 1 << f.width
        if f.width <= 16 or c.params["tier"] == "full":
            cc = np.arange(n)
        else:
            edge = 1 << (f.width - 1 - f.exp_bits + 2)      # codes of the two lowest binades
            top = (n >> 1) - edge                           # ... and of the highest ones
            cc = np.concatenate([np.arange(edge), np.arange(top, n >> 1),
                                 rng.integers(0, n, 30000)])
            cc = np.concatenate([cc, cc | (n >> 1)])
        codes.append(cc)
        fsel.append(np.full(len(cc), k))
    await c.run("every_code", np.concatenate(codes), np.concatenate(fsel))


@cocotb.test()
async def random_codes(dut):
    """Random codes of random formats (bits above the format's width set at random too:
    they must be ignored), once with valid bubbles."""
    c = WidenChecker(dut)
    await c.reset()
    rng = c.rng(2)
    n = c.params["n_random"]
    fsel = rng.integers(0, len(c.formats), n)
    raw = rng.integers(0, 1 << c.signature.code_width, n)
    await c.run("random_codes", raw, fsel)
    m = max(1000, n // 10)
    await c.run("random_codes_bubbles", raw[:m], fsel[:m], bubbles=True)
