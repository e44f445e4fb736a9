# SPDX-License-Identifier: Apache-2.0
"""cocotb: the FP32 adder equals ``golden.arith.add_fp32`` (numpy float32, canonical NaN) bit
for bit on every pair of FP32 corners and on random pairs (cancellation, exponent gaps,
subnormals)."""

import cocotb

from golden import arith as ga
from tb.fp_arith import program as v
from tb.fp.build import pipeline_tb


async def check(st, what, a, b, bubbles=False):
    out = await st.stream(what, bubbles=bubbles, a=a, b=b)
    return st.check_equal(f"{what} (bubbles={bubbles})", out["result"], ga.add_fp32(a, b),
                          lambda i: f"{int(a[i]):#010x} + {int(b[i]):#010x}")


@cocotb.test()
async def adder(dut):
    st = pipeline_tb(dut, "add")
    p = st.params
    await st.reset()
    total = await check(st, "corners", *v.add_corners())
    n = p["n_random"]
    rng = st.rng(1)
    chunk = 1 << 17
    for lo in range(0, n, chunk):
        m = min(chunk, n - lo)
        total += await check(st, f"random[{lo}:{lo + m}]", *v.add_random(rng, m))
    nb = p.get("n_bubbles", 0)
    if nb:
        total += await check(st, "bubbles", *v.add_random(st.rng(2), nb), bubbles=True)
    st.log.info("adder: %d cases bit-exact, latency %d", total, st.signature.latency)
