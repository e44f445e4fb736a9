# SPDX-License-Identifier: Apache-2.0
"""FP arithmetic units (exact multiplier, FMA, FP32 adder) against ``golden.arith``, bit for bit.

cocotb + Verilator through ``tb.fp.build.sim`` (a ``tb.fp.harness.VectorHarness`` around the unit): one build
per unit covers every enabled format pair through the run-time format selects. The fast tier
runs the exhaustive FP8 x FP8 products, directed corners and ~50-100k random cases per unit;
``@pytest.mark.full`` runs >= 1,000,000 random cases per unit.
"""

import gc

import pytest

from tb.fp import build as fp_build

#: Constructors that raise leave a never-elaborated object behind: intended in those tests
#: (which collect it with ``gc.collect()`` while this filter is active).
NOT_ELABORATED = pytest.mark.filterwarnings("ignore::amaranth.hdl.UnusedElaboratable")


def run_unit(unit, cfg, seed, *, tier, **params):
    """Build (cached) and run one unit's cocotb module; returns the SimBuild."""
    params = {"seed": seed, **params}
    sim = fp_build.sim(unit, cfg, params)
    print(f"{unit}: verilator build {sim.build_seconds:.1f} s")
    sim.run(f"tb.fp_arith.tb_{unit}", params=params, tag=tier)
    return sim


# --- multiplier ---------------------------------------------------------------------------------

def test_multiplier(cfg, seed, tmp_path):
    """Every FP8 x FP8 product of each FP8 format, corners of every pair, random pairs, bubbles."""
    run_unit("mul", cfg, seed, tier="fast", n_random=60_000, n_bubbles=3000)


@pytest.mark.full
def test_multiplier_full(cfg, seed):
    run_unit("mul", cfg, seed, tier="full", n_random=1_000_000, n_bubbles=20_000,
             exhaustive=False)


# --- FMA ----------------------------------------------------------------------------------------

def test_fma(cfg, seed):
    """Directed FP32 cases, corners of every format pair x FP32 corners, random cases."""
    run_unit("fma", cfg, seed, tier="fast", n_random=60_000, n_bubbles=3000)


@pytest.mark.full
def test_fma_full(cfg, seed):
    run_unit("fma", cfg, seed, tier="full", n_random=1_000_000, n_bubbles=20_000)


# --- FP32 adder ---------------------------------------------------------------------------------

def test_adder(cfg, seed):
    """Every pair of FP32 corners and random pairs (cancellation, gaps, subnormals)."""
    run_unit("add", cfg, seed, tier="fast", n_random=60_000, n_bubbles=3000)


@pytest.mark.full
def test_adder_full(cfg, seed):
    run_unit("add", cfg, seed, tier="full", n_random=1_000_000, n_bubbles=20_000)


# --- pipeline depths (amaranth.sim, no Verilator build) -----------------------------------------

def simulate(design, words, gaps):
    """Feed packed ``words`` to ``design`` (``i.valid`` low on cycles where ``gaps`` is True)
    in ``amaranth.sim``; return the packed ``o.payload`` of every ``o.valid`` cycle, in order."""
    from amaranth.hdl import Value
    from amaranth.sim import Simulator
    out = []

    async def bench(ctx):
        k = 0
        for cyc in range(len(words) + len(gaps) + design.latency + 2):
            feed = k < len(words) and not (cyc < len(gaps) and gaps[cyc])
            ctx.set(design.i.valid, int(feed))
            ctx.set(Value.cast(design.i.payload), words[k] if feed else 0)
            if ctx.get(design.o.valid):
                out.append(ctx.get(Value.cast(design.o.payload)))
            k += feed
            await ctx.tick()

    from amaranth.hdl import Module, Signal
    top = Module()                       # a sync domain even for a 0-latency design
    top.submodules.dut = design
    tick = Signal()
    top.d.sync += tick.eq(~tick)
    sim = Simulator(top)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    return out


@pytest.mark.parametrize("mul_stages,add_stages", [(0, 0), (0, 1), (2, 3), (4, 4), (1, 5),
                                                     (0, 6)])
def test_fma_pipeline_depths(cfg, seed, mul_stages, add_stages):
    """Every pipeline depth gives the golden results with ``latency`` = mul + add stages and
    keeps order through valid gaps (the Verilator tests cover the preset's depth)."""
    import numpy as np
    from tb.fp_arith import program as v
    from tb.pack import pack, unpack
    c2 = cfg.replace(mul_stages=mul_stages, add_stages=add_stages)
    d = fp_build.dut("fma", c2)
    assert d.latency == mul_stages + add_stages
    rng = np.random.default_rng([seed, mul_stages, add_stages])
    fm = d.formats_a
    ia, a, ib, b, c = v.fma_random(rng, fm, 300)
    words = pack(d.in_layout, a=a, b=b, fmt_a=ia, fmt_b=ib, c=c)
    got = unpack(d.out_layout, simulate(d, words, list(rng.random(400) < 0.3)))["result"]
    want = v.fma_expect(fm, ia, a, fm, ib, b, c)
    assert len(got) == len(want), f"seed={seed}: {len(got)} results for {len(want)} inputs"
    bad = np.flatnonzero(got.astype(np.uint32) != want)
    assert len(bad) == 0, (f"seed={seed} stages=({mul_stages},{add_stages}): {len(bad)} "
                           f"mismatches, first at {bad[0]}: c={c[bad[0]]:#x} "
                           f"a={a[bad[0]]:#x} b={b[bad[0]]:#x} got {got[bad[0]]:#x} "
                           f"want {want[bad[0]]:#x}")


@pytest.mark.parametrize("names", [
    None,                                               # the PE's nine formats (preset + MX)
    ("bf16", "fp16", "fp8_e5m2"),                       # select value 3 decodes fp8_e5m2
    ("fp8_e4m3fn", "fp4_e2m1", "fp32"),
])
def test_unpack_equals_per_format_decode(cfg, tmp_path, names):
    """``Unpack`` of several formats (raw fields selected, one subtractor) equals, bit for bit,
    the obvious decoder of the selected format alone (its single-format path) for every code
    and every select value: proven with yosys' SAT solver on a miter."""
    from amaranth.back import rtlil
    from amaranth.hdl import Cat, Module, Signal
    from amaranth.lib import wiring
    from amaranth.lib.wiring import In, Out
    from rtl.fp.unpack import Unpack
    from rtl.tensor.layouts import TensorLayouts
    from synth.yosys import run_yosys
    fs = TensorLayouts(cfg).pe_formats if names is None else tuple(cfg.fmt(n) for n in names)
    dut_sig = Unpack.Signature(fs)

    class Miter(wiring.Component):
        def __init__(self):
            super().__init__({"code": In(dut_sig.code_width),
                              "fmt": In(dut_sig.members["fmt"].shape), "ok": Out(1)})

        def elaborate(self, platform):
            m = Module()
            m.submodules.dut = dut = Unpack(fs)
            m.d.comb += [dut.code.eq(self.code), dut.fmt.eq(self.fmt)]
            oks = []
            for k, f in enumerate(fs):
                m.submodules[f"ref{k}"] = ref = Unpack((f,))
                m.d.comb += ref.code.eq(self.code)
                sel = self.fmt == k if k < len(fs) - 1 else self.fmt >= k
                same = Signal(name=f"same{k}")
                m.d.comb += same.eq(Cat(*[dut.o[n] == ref.o[n] for n in
                                          ("sign", "sig", "exp", "is_zero", "is_inf",
                                           "is_nan")]).all())
                oks.append(~sel | same)
            m.d.comb += self.ok.eq(Cat(*oks).all())
            return m

    miter = Miter()
    (tmp_path / "miter.il").write_text(rtlil.convert(miter, ports=[miter.code, miter.fmt,
                                                                   miter.ok]))
    log = run_yosys("read_rtlil miter.il\nhierarchy -top top\nproc -norom\nflatten\nopt\n"
                    "sat -prove ok 1 -verify -show-inputs\n", tmp_path, "miter")
    assert "SUCCESS!" in log.read_text(), log.read_text()[-3000:]


@pytest.mark.parametrize("formats_a,formats_b", [
    (("bf16", "fp16"), ("fp8_e4m3", "bf16")),     # two formats: the run-time select decides
    (("fp8_e5m2",), ("tf32", "fp32")),            # one format on a side: no select there
    (("bf16", "fp16", "fp8_e5m2"), ("fp8_e4m3", "bf16", "tf32")),   # select value 3 unused
])
def test_multiplier_few_formats(cfg, seed, formats_a, formats_b):
    """Multipliers built with one, two or three formats per operand (the PE and the MAC
    variants use such narrow selects) give the golden exact products for every select value,
    specials included; a select beyond the tuple decodes the last format (the documented rule
    of ``rtl.fp.unpack.Unpack``). ``amaranth.sim``; the Verilator tests use every format of the
    preset, whose 8 formats fill their select field."""
    import numpy as np
    from rtl.fp.multiplier import ExactMultiplier
    from tb.fp_arith import program as v
    from tb.pack import pack, unpack
    d = ExactMultiplier(cfg, formats_a=formats_a, formats_b=formats_b)
    rng = np.random.default_rng([seed, len(formats_a), len(formats_b)])
    n = 400
    # every value the select fields can hold; beyond the tuple means the last format
    sa = rng.integers(0, 1 << d.in_layout["fmt_a"].width, n)
    sb = rng.integers(0, 1 << d.in_layout["fmt_b"].width, n)
    ia = np.minimum(sa, len(d.formats_a) - 1)
    ib = np.minimum(sb, len(d.formats_b) - 1)
    a = np.array([v.random_codes(rng, d.formats_a[k], 1, spread=None if j % 3 else 4)[0]
                  for j, k in enumerate(ia)], dtype=np.uint32)
    b = np.array([v.random_codes(rng, d.formats_b[k], 1, spread=None if j % 3 else 4)[0]
                  for j, k in enumerate(ib)], dtype=np.uint32)
    words = pack(d.in_layout, a=a, b=b, fmt_a=sa, fmt_b=sb)
    out = unpack(d.out_layout, simulate(d, words, []))
    got, bad_flags = v.mul_value(out)
    want = v.mul_expect(d.formats_a, ia, a, d.formats_b, ib, b)
    bad = np.flatnonzero(~v.same_f64(got, want) | bad_flags)
    assert len(bad) == 0, (f"seed={seed} {formats_a} x {formats_b}: {len(bad)}/{n} mismatches, "
                           f"first: a={a[bad[0]]:#x} ({d.formats_a[ia[bad[0]]].name}) "
                           f"b={b[bad[0]]:#x} ({d.formats_b[ib[bad[0]]].name}): "
                           f"{got[bad[0]]!r} != {want[bad[0]]!r}")


# --- construction ------------------------------------------------------------------------------

def test_interfaces_and_latency(cfg):
    """Pipeline members, layouts and latencies the PE and the testbenches rely on, read from
    the signatures (no unit is built)."""
    from rtl.config import FP4_E2M1
    from rtl.fp.adder import FP32Adder
    from rtl.fp.fma import FMA
    from rtl.fp.multiplier import ExactMultiplier
    from rtl.pipeline import PipelineSignature
    c2 = cfg.replace(mul_stages=2, add_stages=3)
    fma = FMA.Signature(c2, formats_a=("bf16",), formats_b=("bf16",))
    assert isinstance(fma, PipelineSignature)
    assert fma.latency == 5
    assert [n for n, _ in fma.in_layout] == ["a", "b", "fmt_a", "fmt_b", "c"]
    assert (fma.in_layout["a"].width, fma.in_layout["fmt_a"].width) == (16, 0)
    assert [n for n, _ in fma.out_layout] == ["result"]
    assert set(fma.members) == {"i", "o"}
    assert set(fma.members["i"].signature.members) == {"payload", "valid", "ready"}
    mul = ExactMultiplier.Signature(c2, formats_a=(FP4_E2M1,),
                                    formats_b=("fp8_e4m3fn", "fp8_e5m2"))
    assert mul.latency == 2 and mul.sig_width == 2 + 4
    assert mul.in_layout["fmt_b"].width == 1
    full = ExactMultiplier.Signature(cfg, formats_a=("fp32",), formats_b=("fp32",))
    assert full.out_layout["sig"].width == 48
    assert FP32Adder.Signature(c2).latency == 3
    assert FMA.Signature(cfg).formats_a == cfg.dense_formats


@NOT_ELABORATED
@pytest.mark.parametrize("kwargs,exc,match", [
    ({"formats_a": "bf16"}, TypeError, "formats_a must be a non-empty tuple"),
    ({"formats_a": ()}, TypeError, "formats_a must be a non-empty tuple"),
    ({"formats_b": ("bf17",)}, ValueError, "format must be one of"),
    ({"formats_b": ("bf16", "bf16")}, ValueError, "formats_b must not repeat"),
    ({"formats_a": (3,)}, TypeError, "formats_a entries must be FPFormat"),
])
def test_bad_arguments(cfg, kwargs, exc, match):
    from rtl.fp.fma import FMA
    with pytest.raises(exc, match=match):
        FMA(cfg, **kwargs)
    gc.collect()


@NOT_ELABORATED
def test_bad_cfg_and_layout(cfg):
    from amaranth.lib import data
    from rtl.fp.adder import FP32Adder
    from rtl.fp.fused_add import FusedAdd
    from rtl.fp.unpack import exact_layout
    with pytest.raises(TypeError, match="cfg must be a CoreConfig"):
        FP32Adder("small")
    with pytest.raises(TypeError, match="term_layout must be"):
        FusedAdd(cfg, term_layout=data.StructLayout({"x": 4}))
    with pytest.raises(ValueError, match="'sig' width must be in"):
        FusedAdd(cfg, term_layout=exact_layout(81, range(-300, 300)))
    gc.collect()


# --- helpers of the fused adder -----------------------------------------------------------------

@pytest.mark.parametrize("n,keep,cases", [(9, 3, None), (10, 1, None), (119, 25, 3000),
                                          (101, 25, 1000)])
def test_shl_top(seed, n, keep, cases):
    """``shl_top`` (the fused adder's normalizing shift) against Python integers: the top
    ``keep`` bits of ``(v << s) mod 2**n`` and the OR of the others. Exhaustive over every value
    and shift at small widths, random (spread bit lengths, shifts up to the amount's range) at
    the fused adder's window widths."""
    import numpy as np
    from amaranth.hdl import Module, Signal
    from amaranth.sim import Simulator
    from rtl.fp.fused_add import shl_top
    m = Module()
    v, s = Signal(n), Signal(range(n + 1))
    top, st = shl_top(m, v, s, keep)
    if cases is None:
        pairs = [(x, k) for x in range(1 << n) for k in range(1 << len(s))]
    else:
        rng = np.random.default_rng([seed, n, keep])
        pairs = []
        for _ in range(cases):
            bits = int(rng.integers(1, n + 1))
            x = int.from_bytes(rng.bytes((n + 7) // 8), "little") & ((1 << bits) - 1)
            pairs.append((x, int(rng.integers(0, 1 << len(s)))))
    bad = []

    async def bench(ctx):
        for x, k in pairs:
            ctx.set(v, x)
            ctx.set(s, k)
            y = (x << k) & ((1 << n) - 1)
            want = (y >> (n - keep), int(y & ((1 << (n - keep)) - 1) != 0))
            got = (ctx.get(top), ctx.get(st))
            if got != want:
                bad.append((x, k, got, want))

    sim = Simulator(m)
    sim.add_testbench(bench)
    sim.run()
    assert not bad, f"seed={seed} n={n} keep={keep}: {len(bad)}/{len(pairs)} wrong, " \
                    f"first (value, shift, got, want): {bad[0]}"


@pytest.mark.parametrize("n,cases", [(1, None), (5, None), (8, None), (9, None), (119, 3000)])
def test_lzc(seed, n, cases):
    """``lzc`` against Python integers: the leading-zero count of every value at small widths
    (random values of spread bit lengths at 119 bits), ``n`` for zero; the ``nonzero=True`` tree
    (the fused adder's) gives the same count for every nonzero value."""
    import numpy as np
    from amaranth.hdl import Module, Signal
    from amaranth.sim import Simulator
    from rtl.fp.fused_add import lzc
    m = Module()
    v = Signal(n)
    full, fast = lzc(m, v), lzc(m, v, name="lzc_nz", nonzero=True)
    if cases is None:
        values = list(range(1 << n))
    else:
        rng = np.random.default_rng([seed, n])
        values = [int.from_bytes(rng.bytes((n + 7) // 8), "little")
                  & ((1 << int(rng.integers(0, n + 1))) - 1) for _ in range(cases)]
    bad = []

    async def bench(ctx):
        for x in values:
            ctx.set(v, x)
            want = n - x.bit_length()
            got = (ctx.get(full), ctx.get(fast) if x else want)
            if got != (want, want):
                bad.append((x, got, want))

    sim = Simulator(m)
    sim.add_testbench(bench)
    sim.run()
    assert not bad, f"seed={seed} n={n}: {len(bad)}/{len(values)} wrong, first (value, " \
                    f"(lzc, lzc nonzero), want): {bad[0]}"


@NOT_ELABORATED
def test_shl_top_keep_checked():
    """``shl_top`` keeps 1..len(value) bits (all of them: a plain shift) and names ``keep``
    otherwise."""
    from amaranth.hdl import Module, Signal
    from rtl.fp.fused_add import shl_top
    m = Module()
    v, s = Signal(6), Signal(3)
    top, _ = shl_top(m, v, s, 6)
    assert len(top) == 6
    for keep in (0, 7):
        with pytest.raises(ValueError, match=r"keep must be in \[1, 6\], not " + str(keep)):
            shl_top(m, v, s, keep)
    del m, top
    gc.collect()
