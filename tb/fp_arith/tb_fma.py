# SPDX-License-Identifier: Apache-2.0
"""cocotb: the FMA equals ``golden.arith.fma_fp32`` (one rounding) bit for bit: directed corners
of every format pair, special rules, ties, and random cases of every format pair."""

import cocotb
import numpy as np

from tb.fp_arith import program as v
from tb.fp.build import pipeline_tb


async def check(st, what, ia, a, ib, b, c, bubbles=False):
    d = st.signature
    out = await st.stream(what, bubbles=bubbles, a=a, b=b, fmt_a=ia, fmt_b=ib, c=c)
    want = v.fma_expect(d.formats_a, ia, a, d.formats_b, ib, b, c)

    def row(i):
        fa, fb = d.formats_a[ia[i]].name, d.formats_b[ib[i]].name
        return f"c={int(c[i]):#010x} + {fa} {int(a[i]):#x} x {fb} {int(b[i]):#x}"
    return st.check_equal(f"{what} (bubbles={bubbles})", out["result"], want, row)


def directed(fmts):
    """Hand-made FP32 x FP32 cases (format index of fp32 if enabled): ``(a, b, c)`` bits."""
    A = [  # a, b, c
        (0x3F800000, 0x3F800000, 0xBF800000),   # 1*1 - 1 = +0 (exact cancellation)
        (0xBF800000, 0x3F800000, 0x3F800000),   # -1*1 + 1 = +0
        (0x80000000, 0x3F800000, 0x80000000),   # -0 + -0 = -0
        (0x00000000, 0x3F800000, 0x80000000),   # +0 + -0 = +0
        (0x7F800000, 0x00000000, 0x3F800000),   # Inf * 0 = NaN
        (0x7F800000, 0x3F800000, 0xFF800000),   # Inf - Inf = NaN
        (0x7F800000, 0x3F800000, 0x7F800000),   # Inf + Inf = Inf
        (0x7F7FFFFF, 0x40000000, 0x00000000),   # overflow to Inf
        (0x7F7FFFFF, 0x3F800000, 0x73800000),   # max + ulp/2: tie, rounds to even = Inf
        (0x7F7FFFFF, 0x3F800000, 0x73000000),   # max + ulp/4: stays max
        (0x00800000, 0x3F000000, 0x00000000),   # min normal / 2 = subnormal, exact
        (0x00000001, 0x3F000000, 0x00000000),   # 2**-150: tie to even = +0
        (0x00000001, 0x3F400000, 0x00000000),   # 0.75 * 2**-149 -> 2**-149
        (0x00000003, 0x3F000000, 0x00000000),   # 1.5 * 2**-149: tie -> 2 * 2**-149
        (0x00000001, 0x00000001, 0x00000001),   # 2**-298 + 2**-149 = 2**-149
        (0x00000001, 0x00000001, 0x80000000),   # 2**-298 + -0 = +0 (rounds to zero)
        (0x80000001, 0x00000001, 0x00000000),   # -2**-298 + 0 = -0
        (0x3F800000, 0x33800000, 0x3F800000),   # 1 + 2**-24: tie to even = 1
        (0x3F800000, 0x33800001, 0x3F800000),   # just above the tie: 1 + ulp
        (0x3F800000, 0xB3800000, 0x3F800001),   # (1+u) - u/2 = 1 + u/2: tie to even -> 1
        (0x3F800000, 0xB3000000, 0x3F800000),   # 1 - 2**-25: tie below 1 -> 1
        (0x3F800000, 0xB3000001, 0x3F800000),   # 1 - (2**-25 + tiny) -> 1 - 2**-24
        (0x4B800000, 0x4B800000, 0xD7800000),   # 2**48 - 2**48 = +0
        (0x3FFFFFFF, 0x3FFFFFFF, 0xC0800000),   # (2-u)^2 - 4: cancellation, exact
        (0x3F800001, 0x3F800001, 0xBF800002),   # (1+u)^2 - (1+2u) = u^2 exactly
        (0x7E800000, 0x7E800000, 0x3F800000),   # huge product overflow
        (0x0DA24260, 0x3F800000, 0x7149F2CA),   # huge exponent gap, c dominates
        (0x7149F2CA, 0x3F800000, 0x0DA24260),   # product dominates
    ]
    return [np.array(x, dtype=np.uint32) for x in zip(*A)]


@cocotb.test()
async def fma(dut):
    st = pipeline_tb(dut, "fma")
    p = st.params
    d = st.signature
    fmts = d.formats_a
    assert d.formats_b == fmts
    await st.reset()
    total = 0
    names = [f.name for f in fmts]
    if "fp32" in names:
        k = names.index("fp32")
        a, b, c = directed(fmts)
        n = len(a)
        total += await check(st, "directed fp32", np.full(n, k), a, np.full(n, k), b, c)
    ia, a, ib, b, c = v.fma_corners(fmts)
    total += await check(st, "corners", ia, a, ib, b, c)
    n = p["n_random"]
    rng = st.rng(1)
    chunk = 1 << 17
    for lo in range(0, n, chunk):
        m = min(chunk, n - lo)
        total += await check(st, f"random[{lo}:{lo + m}]", *v.fma_random(rng, fmts, m))
    nb = p.get("n_bubbles", 0)
    if nb:
        total += await check(st, "bubbles", *v.fma_random(st.rng(2), fmts, nb), bubbles=True)
    st.log.info("fma: %d cases bit-exact, latency %d", total, d.latency)
