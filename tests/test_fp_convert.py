# SPDX-License-Identifier: Apache-2.0
"""FP32 conversion units against the golden model, bit for bit.

cocotb + Verilator through ``tb.runner.SimBuild`` and ``tb.fp.harness.VectorHarness``: one build
per unit covers every format through the runtime format select. The XORWOW generator is also
checked step by step in ``amaranth.sim`` (no build) against ``golden.prng``.
"""

import pytest
from amaranth.sim import Simulator

from golden.prng import XorWow as GoldenXorWow
from rtl.config import E8M0
from rtl.fp.convert import ConvertFromFP32, default_convert_formats
from rtl.fp.prng import XorWow
from rtl.fp.widen import WidenToFP32, default_widen_formats
from tb.fp import build as fp_build
from tb.fp_convert import designs

#: A constructor that raises still leaves a half-built Elaboratable for the garbage collector,
#: which Amaranth reports as unused: expected in the rejection tests (and only there).
NOT_ELABORATED = pytest.mark.filterwarnings("ignore::amaranth.hdl.UnusedElaboratable")

FAST_RANDOM = 100_000
FULL_RANDOM = 1_000_000


def run_unit(unit, cfg, seed, *, tier, n_random, formats=None, lane=0):
    """Build (cached) and run one unit's cocotb module; returns the SimBuild."""
    formats = formats or (designs.CONVERT_FORMATS if unit == "convert"
                          else designs.WIDEN_FORMATS)
    params = {"seed": seed, "formats": list(formats), "lane": lane, "depth": fp_build.DEPTH,
              "tier": tier, "n_random": n_random}
    sim = fp_build.sim(unit, cfg, params)
    print(f"{unit}: verilator build {sim.build_seconds:.1f} s")
    sim.run(f"tb.fp_convert.tb_{unit}", params=params, tag=tier)
    return sim


# --- PRNG ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("lane", [0, 1, 7])
def test_xorwow_matches_golden(cfg, seed, lane):
    """``value`` is golden output n+1 after n cycles with ``next`` high; idle cycles hold it."""
    import random
    rng = random.Random(seed)
    dut = XorWow(cfg.sr_seed, lane)
    gold = GoldenXorWow(cfg.sr_seed, lane)
    pattern = [rng.random() < 0.7 for _ in range(400)]
    seen = []

    async def bench(ctx):
        expect = gold.next()
        for n, adv in enumerate(pattern):
            got = ctx.get(dut.value)
            seen.append(got)
            assert got == expect, (f"seed={seed} lane={lane} cycle {n}: RTL {got:#010x}, "
                                   f"golden {expect:#010x}")
            ctx.set(dut.next, int(adv))
            await ctx.tick()
            if adv:
                expect = gold.next()

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    assert len(set(seen)) > 200, f"seed={seed}: the generator barely moved"


def test_xorwow_rejects_bad_args():
    with pytest.raises(ValueError, match="seed"):
        XorWow(0)
    with pytest.raises(ValueError, match="seed"):
        XorWow(1 << 32)
    with pytest.raises(TypeError, match="lane"):
        XorWow(1, 1.5)
    with pytest.raises(ValueError, match="lane"):
        XorWow(1, -1)


# --- construction -------------------------------------------------------------------------------

@NOT_ELABORATED
def test_convert_rejects_bad_args(cfg):
    with pytest.raises(ValueError, match="format must be one of"):
        ConvertFromFP32(cfg, formats=["bf17"])
    with pytest.raises(ValueError, match="formats must not be empty"):
        ConvertFromFP32(cfg, formats=[])
    with pytest.raises(ValueError, match="must not repeat"):
        ConvertFromFP32(cfg, formats=["bf16", "bf16"])
    with pytest.raises(TypeError, match="formats entries"):
        ConvertFromFP32(cfg, formats=[E8M0])
    with pytest.raises(TypeError, match="formats must be a sequence"):
        ConvertFromFP32(cfg, formats="bf16")
    with pytest.raises(ValueError, match="lane"):
        ConvertFromFP32(cfg, formats=["bf16"], lane=-1)
    with pytest.raises(TypeError, match="cfg"):
        WidenToFP32(None, formats=["bf16"])
    with pytest.raises(TypeError, match="positional"):
        ConvertFromFP32(cfg, ["bf16"])      # formats is keyword-only
    import gc
    gc.collect()


def test_defaults_follow_config(cfg):
    """Defaults from the config, read from the signatures (no unit is built)."""
    conv = ConvertFromFP32.Signature(cfg)
    assert conv.formats == default_convert_formats(cfg)
    assert "fp32" not in [f.name for f in conv.formats]
    assert conv.code_width == max(f.width for f in conv.formats)
    assert conv.latency == 3
    widen = WidenToFP32.Signature(cfg)
    assert widen.formats == default_widen_formats(cfg)
    assert (E8M0 in widen.formats) == bool(cfg.mx_formats)
    assert widen.latency == 2
    bf16 = ConvertFromFP32.Signature(cfg.replace(name="x", formats=("bf16",), mx_formats=()))
    assert [f.name for f in bf16.formats] == ["bf16"] and bf16.code_width == 16


# --- cocotb + Verilator, fast tier -------------------------------------------------------------

def test_convert_all_formats(cfg, seed):
    """RNE midpoints (every one for bf16/fp16/fp8/fp4, sampled for tf32), corners in RNE and
    SR, 100k random mixed RNE/SR elements, once with bubbles."""
    run_unit("convert", cfg, seed, tier="fast", n_random=FAST_RANDOM)


def test_convert_exotic_formats(cfg, seed):
    """Formats with normals below 2**-126 (the leading-zero path for FP32 subnormal inputs)
    and with a negative bias, next to bf16/fp16/fp4."""
    run_unit("convert", cfg, seed, tier="fast", n_random=FAST_RANDOM // 4,
             formats=("bf16", "fp16", "fp4_e2m1") + designs.EXOTIC_FORMATS)


def test_widen_all_formats(cfg, seed):
    """Every code of every format up to 16 bits, e8m0 and the exotic formats, a tf32 sample,
    100k random codes."""
    run_unit("widen", cfg, seed, tier="fast", n_random=FAST_RANDOM,
             formats=designs.WIDEN_FORMATS + designs.EXOTIC_FORMATS)


# --- full tier ---------------------------------------------------------------------------------

@pytest.mark.full
def test_convert_full(cfg, seed):
    """All tf32 midpoints too, and 1M random mixed RNE/SR elements."""
    run_unit("convert", cfg, seed, tier="full", n_random=FULL_RANDOM)


@pytest.mark.full
def test_convert_exotic_full(cfg, seed):
    """The exotic formats with 1M random mixed RNE/SR elements, on PRNG lane 5."""
    run_unit("convert", cfg, seed, tier="full", n_random=FULL_RANDOM, lane=5,
             formats=("bf16", "fp16", "fp4_e2m1") + designs.EXOTIC_FORMATS)


@pytest.mark.full
def test_widen_full(cfg, seed):
    """All 2**19 tf32 codes too, and 1M random codes."""
    run_unit("widen", cfg, seed, tier="full", n_random=FULL_RANDOM,
             formats=designs.WIDEN_FORMATS + designs.EXOTIC_FORMATS)
