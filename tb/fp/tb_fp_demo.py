# SPDX-License-Identifier: Apache-2.0
"""cocotb body of the number-format demo (``python -m tb.demo_formats``): runs values through the
RTL converter and MAC, checks them against the golden model and writes a JSON summary."""

import json

import cocotb
import numpy as np

from golden import arith, formats as gf
from golden.prng import XorWow
from tb.fp.build import pipeline_tb

DEMO_VALUES = [1 / 3, 0.1, 1 + 2 ** -8, 300.0, 1e-7, -2.5e-3, float("inf"), float("nan")]
SR_DRAWS = 2000


def demo_params(cfg, unit):
    """The unit variant the demo builds (``params`` of :func:`tb.fp.build.sim`)."""
    if unit == "convert":
        names = [n for n in ("bf16", "fp16", "fp8_e4m3fn", "fp8_e5m2") if n in cfg.formats]
        return {"formats": names or [cfg.formats[0]], "depth": 4096}
    return {"depth": 4096}


@cocotb.test()
async def convert_demo(dut):
    tb = pipeline_tb(dut, "convert")
    cfg, p, conv = tb.cfg, tb.params, tb.signature
    await tb.reset()
    lay = conv.in_layout
    rows, exact = [], True
    x = np.array(DEMO_VALUES, np.float32)
    bits = gf.f32_bits(x)
    for k, f in enumerate(conv.formats):
        words = [lay.const({"x": int(b), "fmt": k, "sr": 0}).as_bits() for b in bits]
        got = np.array(await tb.run_words(words), np.uint64)
        want = gf.convert_rne(x, f).astype(np.uint64)
        exact &= bool(np.array_equal(got, want))
        rows.append({"format": f.name, "rne": [float(v) for v in gf.decode(got, f)]})
    # Stochastic rounding of 1/3 to bf16, SR_DRAWS times: the mean approaches 1/3.
    f0 = conv.formats[0]
    third = np.full(SR_DRAWS, 1 / 3, np.float32)
    words = [lay.const({"x": int(b), "fmt": 0, "sr": 1}).as_bits() for b in gf.f32_bits(third)]
    tb.total_cycles = 0
    got = np.array(await tb.run_words(words), np.uint64)
    cycles = tb.total_cycles
    want = gf.convert_sr(third, f0, XorWow(cfg.sr_seed, 0).next_n(SR_DRAWS)).astype(np.uint64)
    exact &= bool(np.array_equal(got, want))
    vals = gf.decode(got, f0).astype(np.float64)
    summary = {"values": DEMO_VALUES, "rows": rows, "latency": conv.latency,
               "sr": {"format": f0.name, "draws": SR_DRAWS, "mean": float(vals.mean()),
                      "rne": float(gf.decode(gf.convert_rne(third[:1], f0), f0)[0]),
                      "distinct": sorted(set(float(v) for v in vals)), "cycles": cycles},
               "bit_exact": exact}
    with open(p["out"], "w") as fh:
        json.dump(summary, fh)
    assert exact, "RTL converter differs from the golden model"


@cocotb.test()
async def fma_demo(dut):
    tb = pipeline_tb(dut, "fma")
    cfg, p, fma = tb.cfg, tb.params, tb.signature
    await tb.reset()
    rng = np.random.default_rng(1)
    fmt_name = "bf16" if "bf16" in cfg.formats else cfg.formats[0]
    k = fma.formats_a.index(cfg.fmt(fmt_name))
    f = cfg.fmt(fmt_name)
    n = 4096
    a = gf.convert_rne(rng.standard_normal(n).astype(np.float32), f)
    b = gf.convert_rne(rng.standard_normal(n).astype(np.float32), f)
    c = gf.f32_bits(rng.standard_normal(n).astype(np.float32))
    lay = fma.in_layout
    words = [lay.const({"a": int(a[i]), "b": int(b[i]), "fmt_a": k, "fmt_b": k,
                        "c": int(c[i])}).as_bits() for i in range(n)]
    got = np.array(await tb.run_words(words), np.uint64)
    want = arith.fma_fp32(c, a, f, b, f).astype(np.uint64)
    exact = bool(np.array_equal(got, want))
    with open(p["out"], "w") as fh:
        json.dump({"format": fmt_name, "ops": n, "cycles": tb.total_cycles,
                   "latency": fma.latency, "bit_exact": exact}, fh)
    assert exact, "RTL FMA differs from the golden model"
