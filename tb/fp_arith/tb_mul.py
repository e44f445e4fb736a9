# SPDX-License-Identifier: Apache-2.0
"""cocotb: the exact multiplier equals ``golden.arith.mul_exact`` for every FP8 x FP8 pair of
each enabled FP8 format, for directed corners of every format pair and for random pairs."""

import cocotb
import numpy as np

from tb.fp_arith import program as v
from tb.fp.build import pipeline_tb


async def check(st, what, ia, a, ib, b, bubbles=False):
    d = st.signature
    out = await st.stream(what, bubbles=bubbles, a=a, b=b, fmt_a=ia, fmt_b=ib)
    got, bad_flags = v.mul_value(out)
    want = v.mul_expect(d.formats_a, ia, a, d.formats_b, ib, b)
    bad = np.flatnonzero(~v.same_f64(got, want) | bad_flags)

    def row(i):
        fa, fb = d.formats_a[ia[i]].name, d.formats_b[ib[i]].name
        fl = "".join(k[3] for k in ("is_zero", "is_inf", "is_nan") if out[k][i])
        return (f"  {fa} {int(a[i]):#x} x {fb} {int(b[i]):#x}: RTL sign={out['sign'][i]} "
                f"sig={int(out['sig'][i]):#x} exp={out['exp'][i]} flags={fl or '-'} "
                f"= {got[i]!r}, golden {want[i]!r}")
    assert len(bad) == 0, st.fail_text(
        f"{what} (bubbles={bubbles})",
        f"{len(bad)}/{len(a)} mismatches with golden, first:\n" + v.mismatch_text(bad, row))
    return len(a)


@cocotb.test()
async def multiplier(dut):
    st = pipeline_tb(dut, "mul")
    p = st.params
    d = st.signature
    await st.reset()
    fmts = d.formats_a
    assert d.formats_b == fmts
    total = 0
    # Directed corners: every format pair.
    ia, a, ib, b = [], [], [], []
    for ka, fa in enumerate(fmts):
        for kb, fb in enumerate(d.formats_b):
            A, B = np.meshgrid(v.corner_codes(fa), v.corner_codes(fb), indexing="ij")
            ia.append(np.full(A.size, ka)); ib.append(np.full(A.size, kb))
            a.append(A.ravel()); b.append(B.ravel())
    total += await check(st, "corners", np.concatenate(ia), np.concatenate(a),
                         np.concatenate(ib), np.concatenate(b))
    # Exhaustive FP8 x FP8, for each FP8 format with itself.
    if p.get("exhaustive", True):
        for k, f in enumerate(fmts):
            if f.width != 8:
                continue
            A, B = np.meshgrid(np.arange(256), np.arange(256), indexing="ij")
            n = A.size
            total += await check(st, f"exhaustive {f.name}", np.full(n, k), A.ravel(),
                                 np.full(n, k), B.ravel())
    # Random mixed pairs across all formats (half of them with exponents near the bias).
    n = p["n_random"]
    rng = st.rng(1)
    chunk = 1 << 17
    for lo in range(0, n, chunk):
        m = min(chunk, n - lo)
        ia = rng.integers(0, len(fmts), m)
        ib = rng.integers(0, len(fmts), m)
        a = np.zeros(m, dtype=np.uint32)
        b = np.zeros(m, dtype=np.uint32)
        near = rng.random(m) < 0.5
        for k, f in enumerate(fmts):
            for sel, arr in ((ia == k, a), (ib == k, b)):
                cnt = int(sel.sum())
                arr[sel] = np.where(near[sel], v.random_codes(rng, f, cnt, spread=20),
                                    v.random_codes(rng, f, cnt))
        total += await check(st, f"random[{lo}:{lo + m}]", ia, a, ib, b)
    # Valid bubbles must neither drop nor duplicate results.
    nb = p.get("n_bubbles", 0)
    if nb:
        rng = st.rng(2)
        ia = rng.integers(0, len(fmts), nb)
        ib = rng.integers(0, len(fmts), nb)
        a = np.array([v.random_codes(rng, fmts[k], 1)[0] for k in ia], dtype=np.uint32)
        b = np.array([v.random_codes(rng, fmts[k], 1)[0] for k in ib], dtype=np.uint32)
        total += await check(st, "bubbles", ia, a, ib, b, bubbles=True)
    st.log.info("multiplier: %d cases bit-exact, latency %d", total, d.latency)
