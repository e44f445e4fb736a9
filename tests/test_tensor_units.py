# SPDX-License-Identifier: Apache-2.0
"""Unit tests of the tensor-engine blocks in Amaranth's own simulator (no Verilator build): the
PE (``rtl/tensor/pe.py``), the PE row (``row.py``), the array (``array.py``) and the PSUM unit
(``psum.py``). ``tests/test_tensor_engine.py`` covers them only end to end.

Every expected number comes from the golden model (``golden.arith``, ``golden.tensor``,
``golden.formats``); the cycle-level expectations (which beat uses which weight, when a beat
leaves, when PSUM must stall) come from the documented behaviour (``docs/tensor-engine.md`` and
the docstrings), never from the RTL. Small configs only (the ``small`` preset, or a 4 x 4 /
2 x 2 array with a few formats), each block's simulator is built once per module and reset
between tests (:class:`Bench`).
"""

from __future__ import annotations

import numpy as np
import pytest

from golden.arith import add_fp32, fma_fp32, fma_fp32_f64
from golden.formats import decode, decode_e8m0
from golden.tensor import matmul as golden_matmul, mx_product, transpose as golden_transpose
from rtl.config import get_preset
from rtl.tensor.layouts import TensorLayouts
from tb.amsim import SimBench
from tb.tensor.program import rand_codes

FP32_EXP_MASK = 0x7F800000      # docs/tensor-engine.md, "Transpose (bit-exact)"
NEG_ZERO = 0x80000000


# --- port adapter ---------------------------------------------------------------------------------
# The one place that names the PSUM unit's ports: its input is an ``amaranth.lib.stream``
# (``rtl.pipeline.PipelineSignature`` with back-pressure), its read-out a memory read port.

class PsumPorts:
    """The PSUM unit's input stream and read port under stable names."""

    def __init__(self, psu):
        self.valid, self.payload, self.ready = psu.i.valid, psu.i.payload, psu.i.ready
        self.rd_en, self.rd_addr, self.rd_data = psu.rd.en, psu.rd.addr, psu.rd.data
        self.busy, self.we = psu.busy, psu.we


# --- simulation harness ---------------------------------------------------------------------------

#: One simulator per design, reset between tests (see :class:`tb.amsim.SimBench`).
Bench = SimBench


def const_int(layout, value):
    """Bits of ``value`` (a dict / list of dicts) in ``layout``, as an int."""
    return layout.const(value).as_value().value


def mv_beat(layout, d):
    """A moving-bus dict for ``layout``: with the FP32 four-pass fields (``part``, ``last``)
    in the layout, a beat that names neither is a one-part column (``last = 1``)."""
    names = {n for n, _ in layout}
    if "last" in names and d and "last" not in d:
        d = {**d, "part": 0, "last": 1}
    return d


def n_parts(tl, *fmts):
    """Beats per moving column of a pair: 4 for a pair with FP32 when ``fp32_passes = 4``
    (docs/tensor-engine.md, "FP32 in four passes"), else 1."""
    return 4 if tl.fp32_split and "fp32" in fmts else 1


# --- configs --------------------------------------------------------------------------------------

SMALL = get_preset("small")
#: The array / row configs: a few formats keep the simulator small (fp32/tf32/bf16 for the
#: transpose NaN shapes, fp8 for a mixed pair).
FEW = ("fp32", "tf32", "bf16", "fp8_e4m3")
ROW_CFG = SMALL.replace(formats=FEW, mx_formats=())
#: 4 rows (skew over 3 rows), 2 columns (a de-skew stage): half the PEs of 4 x 4, half the time.
ARRAY_CFG = ROW_CFG.replace(pe_cols=2)
ARRAY2_CFG = SMALL.replace(partitions=2, pe_rows=2, pe_cols=2, formats=FEW, mx_formats=(),
                           mul_stages=0, add_stages=1)

#: FP32 patterns the chain can meet, specials first.
FP32_CORNERS = [0x00000000, 0x80000000, 0x7F800000, 0xFF800000, 0x7FC00000, 0x00000001,
                0x80000001, 0x007FFFFF, 0x00800000, 0x7F7FFFFF, 0xFF7FFFFF, 0x3F800000,
                0xBF800000, 0x33800000]
#: FP32 codes whose exponent field is all ones (Inf/NaN shapes) and their neighbours (among
#: them exponent fields one bit short of all ones at either end: 0x7F, 0xFE).
FP32_NAN_SHAPES = [0x7F800000, 0xFF800000, 0x7FC00000, 0x7F800001, 0xFFFFFFFF, 0x7FFFFFFF,
                   0xFFC00000, 0xFF800001, 0x7FBFFFFF, 0x7F7FFFFF, 0x00800000, 0xFF7FFFFF,
                   0x80000000, 0x00000000, 0x807FFFFF, 0x80800000, 0x3F800000, 0xBFFFFFFF,
                   0x7F000000]


def special_codes(fmt):
    """Zeros, smallest subnormal, max finite, Inf, NaN (both signs) of ``fmt``."""
    s = 1 << (fmt.width - 1)
    out = [0, s, 1, s | 1, fmt.max_finite_code, s | fmt.max_finite_code]
    for c in (fmt.inf_code, fmt.nan_code):
        if c is not None:
            out += [c, s | c]
    return out


def rand_fp32(rng, n):
    """FP32 addends: values near 1, uniformly random patterns and the corners."""
    near = rng.integers(0x3E000000, 0x41000000, n) | (rng.integers(0, 2, n) << 31)
    wild = rng.integers(0, 1 << 32, n)
    corner = rng.choice(FP32_CORNERS, n)
    pick = rng.random(n)
    return np.where(pick < 0.6, near, np.where(pick < 0.85, wild, corner)).astype(np.uint32)


def mixed_codes(rng, fmt, n):
    """Codes of ``fmt``: tame values, wild codes and every special."""
    c = rand_codes(rng, fmt, (n,), p_wild=0.3)
    sp = special_codes(fmt)
    idx = rng.permutation(n)[:len(sp)]
    c[idx[:len(sp)]] = np.array(sp[:len(idx)], dtype=np.uint32)
    return c


def garbage(rng, bits):
    """A random ``bits``-bit int (wider than numpy's integers allow)."""
    return int.from_bytes(rng.bytes((bits + 7) // 8), "little") & ((1 << bits) - 1)


def hexs(a):
    return [hex(int(x)) for x in np.atleast_1d(a)]


# ==================================================================================================
# PE
# ==================================================================================================

class PEDriver:
    """Cycle-by-cycle stimulus of one PE: ``steps`` is a list of dicts with optional ``mv``,
    ``ld``, ``ps`` (dicts of the PE's layouts; absent = idle). Returns the trace: per cycle
    ``(ps_o valid, value, flag, mv_o bits, ld_o bits)``, sampled before the clock edge."""

    def __init__(self, pe, col=0):
        self.pe, self.col = pe, col

    def job(self, steps, out):
        pe = self.pe
        idle_mv = const_int(pe.mv_layout, {})
        idle_ld = const_int(pe.ld_layout, {})
        idle_ps = const_int(pe.ps_layout, {})

        async def run(ctx):
            from amaranth.hdl import Value
            ctx.set(pe.col, self.col)
            for st in steps:
                ctx.set(Value.cast(pe.mv_i), const_int(pe.mv_layout,
                                                       mv_beat(pe.mv_layout, st["mv"]))
                        if "mv" in st
                        else st.get("mv_bits", idle_mv))
                ctx.set(Value.cast(pe.ld_i), const_int(pe.ld_layout, st["ld"]) if "ld" in st
                        else st.get("ld_bits", idle_ld))
                ctx.set(Value.cast(pe.ps_i), const_int(pe.ps_layout, st["ps"]) if "ps" in st
                        else st.get("ps_bits", idle_ps))
                out.append((ctx.get(pe.ps_o.valid), ctx.get(pe.ps_o.value),
                            ctx.get(pe.ps_o.flag), ctx.get(Value.cast(pe.mv_o)),
                            ctx.get(Value.cast(pe.ld_o))))
                await ctx.tick()
        return run


@pytest.fixture(scope="module")
def pe_bench():
    from rtl.tensor.pe import PE
    return Bench(PE(SMALL))


def run_pe(bench, steps, col=0):
    out = []
    bench.run(PEDriver(bench.dut, col).job(steps, out))
    return out


def schedule(pe, beats, tail=None):
    """Steps for ``beats`` (dicts: ``mv``, optional ``ld`` sent in the same cycle, ``c`` the
    FP32 addend, ``parts`` the beats of the column, default 1): beat i enters in the cycles
    after beat i - 1's; its addend is presented ``mul_latency`` cycles after its last part
    (the documented pairing of ``ps_i`` with ``mv_i``). A column of 4 parts repeats ``mv`` with
    ``part`` 0..3 (``first`` on part 0 only, ``last`` on part 3) and sends ``ld`` with part 3."""
    Lm = pe.mul_latency
    total = sum(b.get("parts", 1) for b in beats)
    n = total + pe.latency + 2 if tail is None else total + tail
    steps = [dict() for _ in range(n)]
    t = 0
    for b in beats:
        P = b.get("parts", 1)
        for j in range(P):
            mv = b["mv"]
            if P > 1:
                mv = {**mv, "part": j, "last": int(j == P - 1),
                      "first": int(bool(mv.get("first", 0)) and j == 0)}
            steps[t]["mv"] = mv
            t += 1
            for g in range(b.get("gaps", {}).get(j, 0) if j < P - 1 else 0):
                # an idle cycle between two parts: valid low, other fields garbage
                steps[t]["mv"] = {**mv, "valid": 0, "first": 1, "part": (j + g + 2) % 4,
                                  "last": 1, "code": (mv.get("code", 0) * 7 + 1) & 0xFFFFFFFF}
                steps.append({})
                t += 1
        if "ld" in b:
            steps[t - 1]["ld"] = b["ld"]
        if "c" in b:
            steps[t - 1 + Lm]["ps"] = {"valid": 1, "value": int(b["c"]),
                                       "flag": int(b.get("f", 0))}
    return steps


def results(trace):
    """``(value, flag)`` of every valid ``ps_o`` in an enabled cycle, in order."""
    return [(v, f) for ok, v, f, _, _ in trace if ok]


# (weight format, moving format): the engine's pair rule is the engine's; the PE multiplies any
# pair of its formats exactly, so mixed wide/narrow pairs are legal here.
PE_PAIRS = [("fp32", "fp32"), ("tf32", "fp32"), ("bf16", "fp8_e4m3"), ("fp16", "cfp8"),
            ("fp8_e4m3fn", "fp8_e5m2"), ("bf16", "fp16")]


def test_pe_dense_fma_random(pe_bench, seed):
    """Dense beats with random weight / moving / addend codes (specials included) for several
    format pairs: each ``ps_o`` equals ``golden.arith.fma_fp32`` bit for bit. A new weight is
    loaded every cycle and used by a ``first`` beat, or the active weight is reused."""
    pe = pe_bench.dut
    tl = TensorLayouts(SMALL)
    rng = np.random.default_rng([seed, 1])
    beats, want = [], []
    for fw, fx in PE_PAIRS:
        Fw, Fx = SMALL.fmt(fw), SMALL.fmt(fx)
        n = 60
        w = mixed_codes(rng, Fw, n)
        x = mixed_codes(rng, Fx, n)
        c = rand_fp32(rng, n)
        first = rng.random(n) < 0.7
        first[0] = True          # a new pair starts with its own weights
        active_w = None
        used = np.zeros(n, dtype=np.uint32)
        for i in range(n):
            b = {"mv": {"valid": 1, "active": 1, "first": int(first[i]),
                        "fmt": tl.fmt_index(fx), "code": int(x[i])}, "c": c[i],
                 "parts": n_parts(tl, fw, fx)}
            # the weight for a ``first`` beat is loaded into the shadow one cycle earlier
            if first[i]:
                if beats:
                    beats[-1]["ld"] = {"valid": 1, "col": 0, "fmt": tl.fmt_index(fw),
                                       "code": int(w[i])}
                else:
                    beats.append({"mv": {}, "ld": {"valid": 1, "col": 0,
                                                   "fmt": tl.fmt_index(fw), "code": int(w[i])}})
                active_w = w[i]
            used[i] = active_w
            beats.append(b)
        want.append(fma_fp32(c, used, Fw, x, Fx))
    want = np.concatenate(want)
    got = results(run_pe(pe_bench, schedule(pe, beats)))
    assert len(got) == len(want)
    val = np.array([v for v, _ in got], dtype=np.uint32)
    bad = np.flatnonzero(val != want)
    assert not len(bad), (f"seed={seed}: {len(bad)} mismatches, first beat {bad[0]}: "
                          f"got {hex(val[bad[0]])} want {hex(want[bad[0]])}")
    assert all(f == 0 for _, f in got), "a dense beat raised the transpose flag"


def test_pe_mx_scaled_fma(pe_bench, seed):
    """MX beats: the product is scaled by ``2**(ws + xs - 254)`` exactly (also far outside
    FP32's range) and a 0xFF scale makes it NaN; result = golden fused add of the exact scaled
    product (``golden.tensor.mx_product``)."""
    pe = pe_bench.dut
    tl = TensorLayouts(SMALL)
    rng = np.random.default_rng([seed, 2])
    beats, want = [], []
    els = [SMALL.mx_element_formats[m] for m in SMALL.mx_formats]
    for ew in els:
        for ex in els:
            n = 24
            w, x = mixed_codes(rng, ew, n), mixed_codes(rng, ex, n)
            ws = rng.choice([0, 1, 127, 100, 160, 254, 255, 120, 134], n)
            xs = rng.choice([0, 1, 127, 100, 160, 254, 255, 120, 134], n)
            c = rand_fp32(rng, n)
            for i in range(n):
                ld = {"valid": 1, "col": 0, "fmt": tl.fmt_index(ew), "code": int(w[i]),
                      "scale": int(ws[i])}
                if beats:
                    beats[-1]["ld"] = ld
                else:
                    beats.append({"mv": {}, "ld": ld})
                beats.append({"mv": {"valid": 1, "active": 1, "first": 1, "mx": 1,
                                     "fmt": tl.fmt_index(ex), "code": int(x[i]),
                                     "scale": int(xs[i])}, "c": c[i]})
            sv = decode(w, ew).astype(np.float64) * decode_e8m0(ws.astype(np.uint32))
            xv = decode(x, ex).astype(np.float64) * decode_e8m0(xs.astype(np.uint32))
            want.append(fma_fp32_f64(c, mx_product(sv, xv)))
    want = np.concatenate(want)
    got = np.array([v for v, _ in results(run_pe(pe_bench, schedule(pe, beats)))],
                   dtype=np.uint32)
    assert len(got) == len(want)
    bad = np.flatnonzero(got != want)
    assert not len(bad), (f"seed={seed}: {len(bad)} MX mismatches, first {bad[0]}: "
                          f"got {hex(got[bad[0]])} want {hex(want[bad[0]])}")


def test_pe_inactive_row_passes_sum(pe_bench, seed):
    """``active = 0``: ``ps_o`` is the addend (``golden: RNE(p + (-0)) = p``), bit for bit for
    every value the chain carries (canonical NaN, Infs, signed zeros, subnormals), whatever
    NaN/Inf codes, MX flag or NaN scales the weight and the moving lane hold."""
    pe = pe_bench.dut
    tl = TensorLayouts(SMALL)
    rng = np.random.default_rng([seed, 3])
    n = 80
    c = np.concatenate([np.array(FP32_CORNERS, dtype=np.uint32), rand_fp32(rng, n)])
    c = np.where(((c & 0x7F800000) == 0x7F800000) & ((c & 0x7FFFFF) != 0),
                 np.uint32(0x7FC00000), c).astype(np.uint32)   # the chain's NaN is canonical
    nan_inf = [0x7F800000, 0xFF800000, 0x7FC00000, 0xFFFFFFFF, 0x7F800001]
    beats = [{"mv": {}, "ld": {"valid": 1, "col": 0, "fmt": tl.fmt_index("fp32"),
                               "code": 0x7F800000, "scale": 0xFF}}]
    for i, ci in enumerate(c):
        beats.append({"mv": {"valid": 1, "active": 0, "first": int(i == 0),
                             "fmt": tl.fmt_index("fp32"), "code": nan_inf[i % 5],
                             "mx": i % 2, "scale": 0xFF}, "c": ci,
                      "parts": n_parts(tl, "fp32") if i % 3 else 1})
    want = fma_fp32_f64(c, np.full(len(c), -0.0))
    assert (want == c).all(), "golden: the chain's values pass + (-0) unchanged"
    got = np.array([v for v, _ in results(run_pe(pe_bench, schedule(pe, beats)))],
                   dtype=np.uint32)
    bad = np.flatnonzero(got != c)
    assert not len(bad), f"inactive row changed {hexs(c[bad][:4])} into {hexs(got[bad][:4])}"


def test_pe_shadow_active_swap_on_first(pe_bench):
    """Weight loads go to the shadow; a ``first`` beat uses the shadow and makes it active;
    later beats keep the active weight while a new shadow is loaded; an invalid ``first`` beat
    does not swap."""
    pe = pe_bench.dut
    tl = TensorLayouts(SMALL)
    bf = tl.fmt_index("bf16")
    B = SMALL.fmt("bf16")
    A_, B_, C_ = 0x4000, 0x4040, 0xC0A0           # 2, 3, -5 (bf16)
    one = 0x3F80

    def mv(first, valid=1):
        return {"valid": valid, "active": 1, "first": first, "fmt": bf, "code": one}

    def ld(code):
        return {"valid": 1, "col": 0, "fmt": bf, "code": code}

    beats = [{"mv": {}, "ld": ld(A_)},
             {"mv": mv(1), "c": NEG_ZERO},                 # A (swap)
             {"mv": mv(0), "c": NEG_ZERO, "ld": ld(B_)},   # A, B into the shadow
             {"mv": mv(0), "c": NEG_ZERO},                 # still A
             {"mv": mv(1, valid=0)},                       # invalid first: no swap
             {"mv": mv(0), "c": NEG_ZERO},                 # still A
             {"mv": mv(1), "c": NEG_ZERO, "ld": ld(C_)},   # B (swap); C into the shadow
             {"mv": mv(0), "c": NEG_ZERO},                 # B
             {"mv": mv(1), "c": NEG_ZERO}]                 # C
    used = [A_, A_, A_, A_, B_, B_, C_]
    want = fma_fp32(np.full(7, NEG_ZERO, np.uint32), np.array(used), B, np.full(7, one), B)
    got = [v for v, _ in results(run_pe(pe_bench, schedule(pe, beats)))]
    assert got == [int(x) for x in want], f"got {hexs(got)} want {hexs(want)}"


def test_pe_load_latched_only_by_matching_col(pe_bench):
    """A weight-load beat is latched only by the PE whose ``col`` equals the beat's ``col``
    (and only when ``valid``); both buses leave the PE one cycle later, unchanged."""
    pe = pe_bench.dut
    tl = TensorLayouts(SMALL)
    bf = tl.fmt_index("bf16")
    B = SMALL.fmt("bf16")
    one = 0x3F80
    lds = [{"valid": 1, "col": 2, "fmt": bf, "code": 0x4000},     # 2: ours
           {"valid": 1, "col": 0, "fmt": bf, "code": 0x4100},     # other columns
           {"valid": 1, "col": 1, "fmt": bf, "code": 0x4110},
           {"valid": 1, "col": 3, "fmt": bf, "code": 0x4120},
           {"valid": 0, "col": 2, "fmt": bf, "code": 0x4130}]     # ours but not valid
    mv = {"valid": 1, "active": 1, "first": 1, "fmt": bf, "code": one}
    steps = schedule(pe, [{"mv": {}, "ld": x} for x in lds] + [{"mv": mv, "c": NEG_ZERO}])
    trace = run_pe(pe_bench, steps, col=2)
    got = [v for v, _ in results(trace)]
    want = fma_fp32(np.array([NEG_ZERO], np.uint32), np.array([0x4000]), B,
                    np.array([one]), B)
    assert got == [int(want[0])], f"got {hexs(got)}, want {hexs(want)} (weight 0x4000)"
    # the buses are registered: ld_o / mv_o of cycle t + 1 are ld_i / mv_i of cycle t
    for t in range(len(lds)):
        assert trace[t + 1][4] == const_int(pe.ld_layout, lds[t]), f"ld_o at cycle {t + 1}"
    mv_t = len(lds)
    assert trace[mv_t + 1][3] == const_int(pe.mv_layout, mv_beat(pe.mv_layout, mv)), \
        "mv_o is mv_i one cycle later"


def test_pe_transpose_hit_and_pass_through(pe_bench, seed):
    """Transpose beats: the hit PE replaces the sum by its weight code, FP32 NaN/Inf shapes
    travel with the exponent field cleared and ``flag = 1`` (restoring the field gives the
    golden ``transpose`` bits), other codes unchanged with ``flag = 0``; a non-hit (or inactive)
    PE passes the sum and the flag from above unchanged, NaN/Inf weights and lanes not leaking."""
    pe = pe_bench.dut
    tl = TensorLayouts(SMALL)
    rng = np.random.default_rng([seed, 4])
    cases = []     # (fmt, weight code, hit, active, ps value, ps flag)
    for fmt in ("fp32", "tf32", "bf16", "fp8_e5m2", "fp8_e4m3fn"):
        F = SMALL.fmt(fmt)
        codes = list(FP32_NAN_SHAPES) if fmt == "fp32" else special_codes(F)
        codes += [int(x) for x in rand_codes(rng, F, (8,), p_wild=1.0)]
        for code in codes:
            cases.append((fmt, code, 1, 1, int(rng.choice(FP32_CORNERS)), 0))
    for fmt, code in (("fp32", 0x7FC00001), ("fp32", 0xFF800000), ("bf16", 0x7FC1)):
        # non-hit rows (and an inactive hit row) keep the encoded sum from above and its flag
        for val, flag in ((0x00400001, 1), (0x80000000, 0), (0x807FFFFF, 1), (0x3F800000, 0)):
            cases.append((fmt, code, 0, 1, val, flag))
            cases.append((fmt, code, 1, 0, val, flag))
    beats = []
    for fmt, code, hit, act, val, flag in cases:
        ld = {"valid": 1, "col": 0, "fmt": tl.fmt_index(fmt), "code": code}
        if beats:
            beats[-1]["ld"] = ld
        else:
            beats.append({"mv": {}, "ld": ld})
        beats.append({"mv": {"valid": 1, "first": 1, "tp": 1, "hit": hit, "active": act,
                             "fmt": tl.fmt_index("fp32"), "code": 0x7FC00000},
                      "c": val, "f": flag})
    got = results(run_pe(pe_bench, schedule(pe, beats)))
    assert len(got) == len(cases)
    for (fmt, code, hit, act, val, flag), (v, f) in zip(cases, got):
        if hit and act:
            want = int(golden_transpose(np.array([[code]], np.uint32), fmt, SMALL)[0, 0])
            nan_shape = fmt == "fp32" and (code & FP32_EXP_MASK) == FP32_EXP_MASK
            assert f == int(nan_shape), f"{fmt} {code:#x}: flag {f}"
            if nan_shape:
                assert v & FP32_EXP_MASK == 0, f"{fmt} {code:#x}: exponent not cleared {v:#x}"
            restored = v | (FP32_EXP_MASK if f else 0)
            assert restored == want, f"{fmt} {code:#x}: restored {restored:#x} want {want:#x}"
        else:
            assert (v, f) == (val, flag), (f"{fmt} {code:#x} hit={hit} active={act}: sum "
                                           f"{val:#x}/{flag} became {v:#x}/{f}")


@pytest.mark.parametrize("mul_stages,add_stages", [(1, 2), (0, 0), (2, 1), (0, 3), (2, 5),
                                                        (2, 6)])
def test_pe_latency(seed, mul_stages, add_stages):
    """``latency = 1 + mul_stages + add_stages`` cycles from ``mv_i`` to ``ps_o`` (the PE
    computes from its registered buses), ``mul_latency = 1 + mul_stages`` from ``mv_i`` to the
    cycle ``ps_i`` is used, ``row_skew = add_stages`` from ``ps_i`` to ``ps_o``: measured with
    one beat whose addend is correct only in its documented cycle."""
    from rtl.tensor.pe import PE
    cfg = SMALL.replace(formats=("bf16", "fp32"), mx_formats=(), mul_stages=mul_stages,
                        add_stages=add_stages)
    pe = PE(cfg)
    assert (pe.latency, pe.mul_latency, pe.row_skew) == (1 + mul_stages + add_stages,
                                                         1 + mul_stages, add_stages)
    bench = Bench(pe)
    tl = TensorLayouts(cfg)
    bf = tl.fmt_index("bf16")
    w, x, c = 0x4040, 0x3FC0, 0x3F800000                # 3 * 1.5 + 1
    want = int(fma_fp32(np.array([c], np.uint32), np.array([w]), cfg.fmt("bf16"),
                        np.array([x]), cfg.fmt("bf16"))[0])
    t0 = 3
    n = t0 + pe.latency + 4
    steps = [{"ps": {"valid": 1, "value": 0x7FC00000}} for _ in range(n)]   # NaN elsewhere
    steps[0]["ld"] = {"valid": 1, "col": 0, "fmt": bf, "code": w}
    steps[t0]["mv"] = mv_beat(pe.mv_layout, {"valid": 1, "active": 1, "first": 1, "fmt": bf,
                                             "code": x})
    steps[t0 + pe.mul_latency]["ps"] = {"valid": 1, "value": c}
    out = []
    bench.run(PEDriver(pe).job(steps, out))
    hits = [t for t, o in enumerate(out) if o[0]]
    assert hits == [t0 + pe.latency], f"ps_o valid at {hits}, want {[t0 + pe.latency]}"
    assert out[t0 + pe.latency][1] == want, (f"value {out[t0 + pe.latency][1]:#x} != {want:#x}: "
                                             f"ps_i not used {pe.mul_latency} cycles after mv_i")


@pytest.mark.parametrize("mul_stages,passes,add_stages", [(0, 4, 1), (1, 4, 1), (2, 4, 5),
                                                          (2, 4, 6), (1, 1, 1)])
def test_pe_fp32_four_parts(seed, mul_stages, passes, add_stages):
    """``fp32_passes = 4``: an FP32 column is four beats (parts 0..3 on consecutive cycles);
    ``ps_o`` is valid once, ``latency`` cycles after the last part, and equals the golden
    fused MAC of the whole FP32 product (one rounding), its addend used ``mul_latency`` cycles
    after the last part. Operands with every significand bit set make each of the four partial
    products matter; a TF32 x FP32 pair and a BF16 beat between FP32 columns (one beat) too.
    Idle cycles (valid low, garbage fields) between the parts of some columns change nothing.
    ``fp32_passes = 1`` (native): the same columns, one beat each."""
    from rtl.tensor.pe import PE
    cfg = SMALL.replace(formats=("bf16", "tf32", "fp32"), mx_formats=(), mul_stages=mul_stages,
                        add_stages=add_stages, fp32_passes=passes)
    pe = PE(cfg)
    tl = TensorLayouts(cfg)
    assert tl.fp32_split == (passes == 4) and pe.mul_latency == 1 + mul_stages
    bench = Bench(pe)
    rng = np.random.default_rng([seed, 6])
    F = cfg.fmt("fp32")
    cols = [("fp32", 0x3FFFFFFF, "fp32", 0x3FFFFFFF), ("fp32", 0x3F800FFF, "fp32", 0x3FFFF000),
            ("tf32", 0x3FFFE000 >> 13, "fp32", 0x3F801001), ("bf16", 0x4040, "bf16", 0x3FC0)]
    for _ in range(12):
        a, b = rand_codes(rng, F, (2,), p_wild=0.3)
        cols.append(("fp32", int(a), "fp32", int(b)))
    beats, want = [], []
    for fw, w, fx, x in cols:
        ld = {"valid": 1, "col": 0, "fmt": tl.fmt_index(fw), "code": w}
        if beats:
            beats[-1]["ld"] = ld
        else:
            beats.append({"mv": {}, "ld": ld})
        c = int(rand_fp32(rng, 1)[0])
        gaps = {int(j): int(rng.integers(1, 3)) for j in rng.choice(3, 2)} if len(beats) % 3 \
            else {}
        beats.append({"mv": {"valid": 1, "active": 1, "first": 1, "fmt": tl.fmt_index(fx),
                             "code": x}, "c": c, "parts": n_parts(tl, fw, fx), "gaps": gaps})
        want.append(int(fma_fp32(np.array([c], np.uint32), np.array([w]), cfg.fmt(fw),
                                 np.array([x]), cfg.fmt(fx))[0]))
    steps = schedule(pe, beats)
    last = [t for t, st in enumerate(steps)
            if st.get("mv", {}).get("valid") and st["mv"].get("last", 1)]
    trace = run_pe(bench, steps)
    hits = [t for t, o in enumerate(trace) if o[0]]
    assert hits == [t + pe.latency for t in last], f"ps_o valid at {hits}"
    got = [trace[t][1] for t in hits]
    assert got == want, f"seed={seed}: got {hexs(got)} want {hexs(want)}"


# ==================================================================================================
# PE row
# ==================================================================================================

@pytest.fixture(scope="module")
def row_bench():
    from rtl.tensor.row import PERow
    return Bench(PERow(ROW_CFG, use_instances=False))


def test_row_buses_and_columns(row_bench, seed):
    """Loads for every column, then moving beats right behind them: the weight-load and moving
    buses advance one PE per cycle (column c sees a beat c cycles after column 0, so a beat that
    directly follows the loads still finds the last column's weight), each column's ``ps_o`` is
    valid exactly ``c + latency`` cycles after the beat entered and equals the golden FMA of
    that column's weight and addend."""
    from amaranth.hdl import Value
    row = row_bench.dut
    pe = row.signature.pe
    cfg = ROW_CFG
    C, Lm, L = cfg.pe_cols, pe.mul_latency, pe.latency
    tl = TensorLayouts(cfg)
    rng = np.random.default_rng([seed, 10])
    fw, fx = cfg.fmt("bf16"), cfg.fmt("fp8_e4m3")
    N = 6
    w = mixed_codes(rng, fw, C)
    x = mixed_codes(rng, fx, N)
    cin = rand_fp32(rng, N * C).reshape(N, C)
    T = C + N + C + L + 3
    ld = [const_int(pe.ld_layout, {}) for _ in range(T)]
    mv = [const_int(pe.mv_layout, {}) for _ in range(T)]
    ps = [[{} for _ in range(C)] for _ in range(T)]
    for j in range(C):
        ld[j] = const_int(pe.ld_layout, {"valid": 1, "col": j, "fmt": tl.fmt_index("bf16"),
                                         "code": int(w[j])})
    t0 = C
    for n in range(N):
        mv[t0 + n] = const_int(pe.mv_layout, mv_beat(pe.mv_layout, {
            "valid": 1, "active": 1, "first": int(n == 0), "fmt": tl.fmt_index("fp8_e4m3"),
            "code": int(x[n])}))
        for c in range(C):
            ps[t0 + n + c + Lm][c] = {"valid": 1, "value": int(cin[n, c])}
    psl = row.ps_i.shape()
    seen = {c: [] for c in range(C)}

    async def job(ctx):
        for t in range(T):
            ctx.set(Value.cast(row.ld_i), ld[t])
            ctx.set(Value.cast(row.mv_i), mv[t])
            ctx.set(Value.cast(row.ps_i), const_int(psl, ps[t]))
            for c in range(C):
                if ctx.get(row.ps_o[c].valid):
                    seen[c].append((t, ctx.get(row.ps_o[c].value)))
            await ctx.tick()

    row_bench.run(job)
    for c in range(C):
        want = fma_fp32(cin[:, c], np.full(N, w[c]), fw, x, fx)
        times = [t for t, _ in seen[c]]
        assert times == [t0 + n + c + L for n in range(N)], f"column {c}: valid at {times}"
        got = np.array([v for _, v in seen[c]], dtype=np.uint32)
        assert (got == want).all(), (f"seed={seed} column {c}: got {hexs(got)} "
                                     f"want {hexs(want)}")


# ==================================================================================================
# Array
# ==================================================================================================

class ArrayProgram:
    """Per-cycle stimulus of a :class:`SystolicArray` built like the engine drives it: weight
    loads (one column per cycle, all rows at once), moving beats (``first`` on a matmul's first
    beat, ``active`` for rows ``k < K``), transposes (identity beats ``hit = (n == k)``); the
    expected result beats (golden) in order."""

    def __init__(self, arr, cfg, rng):
        self.arr, self.cfg, self.rng = arr, cfg, rng
        self.tl = TensorLayouts(cfg)
        self.steps = []          # dicts: "mv" -> list of R dicts, "ld" -> list of R dicts
        self.expect = []         # (M, list of M words) per result beat
        self.s = None

    def _at(self, t):
        while len(self.steps) <= t:
            self.steps.append({})
        return self.steps[t]

    def load(self, t, codes, fmt):
        """Load ``codes [K, M]`` starting at cycle ``t``; rows ``k >= K`` get random codes."""
        R = self.cfg.pe_rows
        K, M = codes.shape
        full = rand_codes(self.rng, self.cfg.fmt(fmt), (R, M), p_wild=1.0)
        full[:K] = codes
        for j in range(M):
            self._at(t + j)["ld"] = [{"valid": 1, "col": j, "fmt": self.tl.fmt_index(fmt),
                                      "code": int(full[k, j])} for k in range(R)]
        self.s = (codes, fmt)
        return t + M

    def matmul(self, t, x, fmt):
        """Moving beats ``x [K, N]`` from cycle ``t`` with the last loaded weights."""
        R = self.cfg.pe_rows
        s, fs = self.s
        K, N = x.shape
        full = rand_codes(self.rng, self.cfg.fmt(fmt), (R, N), p_wild=1.0)
        full[:K] = x
        P = n_parts(self.tl, fs, fmt)
        for n in range(N):
            for j in range(P):
                st = self._at(t + n * P + j)
                st["mv"] = [mv_beat(self.arr.mv_layout, {
                    "valid": 1, "first": int(n == 0 and j == 0), "active": int(k < K),
                    "fmt": self.tl.fmt_index(fmt), "code": int(full[k, n]),
                    **({"part": j, "last": int(j == P - 1)} if P > 1 else {})})
                    for k in range(R)]
                st["col"] = j == P - 1
        want = golden_matmul(s[:K], fs, x, fmt, self.cfg)
        M = s.shape[1]
        self.expect += [(M, [int(v) for v in want[:, n]]) for n in range(N)]
        return t + N * P

    def transpose(self, t, K):
        R = self.cfg.pe_rows
        s, fs = self.s
        for n in range(K):
            self._at(t + n)["mv"] = [mv_beat(self.arr.mv_layout, {
                "valid": 1, "first": int(n == 0), "tp": 1, "active": int(k < K),
                "hit": int(n == k)}) for k in range(R)]
            self._at(t + n)["col"] = True
        want = golden_transpose(s[:K], fs, self.cfg)
        M = s.shape[1]
        self.expect += [(M, [int(v) for v in want[:, n]]) for n in range(K)]
        return t + K

    def run(self, bench, tail=None):
        """Run; return ``(out beats, mv beat cycle indices, out beat cycle indices)``."""
        from amaranth.hdl import Value
        arr = self.arr
        R = self.cfg.pe_rows
        mvl, ldl = arr.mv_in.shape(), arr.ld_in.shape()
        idle_mv, idle_ld = const_int(mvl, [{}] * R), const_int(ldl, [{}] * R)
        tail = arr.latency + 4 if tail is None else tail
        plan = []
        for st in self.steps + [{}] * tail:
            plan.append((const_int(mvl, st["mv"]) if "mv" in st else idle_mv,
                         const_int(ldl, st["ld"]) if "ld" in st else idle_ld,
                         st.get("col", False)))
        outs, t_in, t_out = [], [], []

        async def job(ctx):
            k = 0
            for mv, ld, col in plan:
                ctx.set(Value.cast(arr.mv_in), mv)
                ctx.set(Value.cast(arr.ld_in), ld)
                if ctx.get(arr.out.valid):
                    t_out.append(k)
                    outs.append([ctx.get(arr.out.value[c]) for c in range(self.cfg.pe_cols)])
                if col:          # the last (or only) beat of a moving column
                    t_in.append(k)
                k += 1
                await ctx.tick()

        bench.run(job)
        return outs, t_in, t_out

    def check(self, outs, what):
        assert len(outs) == len(self.expect), f"{what}: {len(outs)} beats, want {len(self.expect)}"
        for i, ((M, want), got) in enumerate(zip(self.expect, outs)):
            assert got[:M] == want, f"{what}: beat {i}: got {hexs(got[:M])} want {hexs(want)}"


@pytest.fixture(scope="module")
def array_bench():
    from rtl.tensor.array import SystolicArray
    return Bench(SystolicArray(ARRAY_CFG, use_instances=False))


def _two_matmuls(bench, cfg, rng):
    """A full-size bf16 x fp8 matmul whose successor's weights (fp32, K < R, M < C) are loaded
    while it streams (shadow weights), then that fp32 matmul directly behind it."""
    arr = bench.dut
    R, C, D = cfg.pe_rows, cfg.pe_cols, arr.row_skew
    p = ArrayProgram(arr, cfg, rng)
    s1 = mixed_codes(rng, cfg.fmt("bf16"), R * C).reshape(R, C)
    x1 = rand_codes(rng, cfg.fmt("fp8_e4m3"), (R, (R - 1) * D + C + 4), p_wild=0.2)
    t = p.load(0, s1, "bf16")
    t_mm = t
    K2, M2 = max(1, R - 1), max(1, C // 2)
    s2 = rand_codes(rng, cfg.fmt("fp32"), (K2, M2), p_wild=0.2)
    x2 = rand_codes(rng, cfg.fmt("fp32"), (K2, 5), p_wild=0.2)
    t = p.matmul(t, x1, "fp8_e4m3")
    # the next load may enter once the first beat's swap has passed the last row
    p.load(t_mm + (R - 1) * D + 1, s2, "fp32")
    p.matmul(t, x2, "fp32")
    return p


def test_array_matmul_back_to_back(array_bench, seed):
    """Skewed in, de-skewed out: two back-to-back matmuls (the second one's weights loaded into
    the shadow while the first streams; K < R and M < C with NaN/Inf codes in the unused rows)
    give ``golden.tensor.matmul`` bit for bit, one result beat per moving beat, each
    ``latency`` cycles after its moving beat."""
    cfg = ARRAY_CFG
    arr = array_bench.dut
    p = _two_matmuls(array_bench, cfg, np.random.default_rng([seed, 20]))
    outs, t_in, t_out = p.run(array_bench)
    p.check(outs, f"seed={seed}")
    R, C = cfg.pe_rows, cfg.pe_cols
    assert arr.latency == (R - 1) * cfg.add_stages + 1 + cfg.mul_stages + cfg.add_stages \
        + C
    assert t_out == [t + arr.latency for t in t_in], "result beats not latency after inputs"


def test_array_transpose(array_bench, seed):
    """Transposes of fp32 codes with an all-ones exponent field (and tf32/bf16 codes with
    theirs) come out as ``golden.tensor.transpose`` bits (the array's bottom restores the
    exponent field), for K = R and K < R."""
    cfg = ARRAY_CFG
    arr = array_bench.dut
    rng = np.random.default_rng([seed, 21])
    R, C = cfg.pe_rows, cfg.pe_cols
    p = ArrayProgram(arr, cfg, rng)
    tiles = [("fp32", np.array(FP32_NAN_SHAPES, np.uint32)[:R * C].reshape(R, C)),
             ("fp32", np.array(FP32_NAN_SHAPES[::-1], np.uint32)[:(R - 1) * C]
              .reshape(R - 1, C)[:, :max(1, C - 1)]),
             ("tf32", (rng.integers(0, 1 << 10, (R, C)) | (0xFF << 10)
                       | (rng.integers(0, 2, (R, C)) << 18)).astype(np.uint32)),
             ("bf16", (rng.integers(0, 1 << 7, (R, C)) | (0xFF << 7)
                       | (rng.integers(0, 2, (R, C)) << 15)).astype(np.uint32))]
    t = 0
    for fmt, codes in tiles:
        t = p.load(t, codes, fmt)
        t = p.transpose(t, codes.shape[0])
        t += R * arr.row_skew      # the next load waits for the swap to pass the last row
    outs, _, _ = p.run(array_bench)
    p.check(outs, f"seed={seed} transpose")


def test_array_latency_other_depths(seed):
    """A 2 x 2 array with ``mul_stages = 0``, ``add_stages = 1``: ``latency`` equals the
    measured cycles and the results are golden."""
    from rtl.tensor.array import SystolicArray
    cfg = ARRAY2_CFG
    arr = SystolicArray(cfg, use_instances=False)
    assert arr.latency == (cfg.pe_rows - 1) * 1 + 1 + 0 + 1 + cfg.pe_cols
    bench = Bench(arr)
    rng = np.random.default_rng([seed, 22])
    p = ArrayProgram(arr, cfg, rng)
    t = p.load(0, rand_codes(rng, cfg.fmt("bf16"), (2, 2), 0.2), "bf16")
    t = p.matmul(t, rand_codes(rng, cfg.fmt("bf16"), (2, 5), 0.2), "bf16")
    t = p.load(t + 2, np.array([[0x7FC00001, 0xFF800000], [0x7F800000, 0x00800000]],
                               np.uint32), "fp32")
    p.transpose(t, 2)
    outs, t_in, t_out = p.run(bench)
    p.check(outs, f"seed={seed} 2x2")
    assert t_out == [t + arr.latency for t in t_in]


# ==================================================================================================
# PSUM unit
# ==================================================================================================

PSUM_CFGS = {"small": SMALL,
             "a0": SMALL.replace(formats=("bf16",), mx_formats=(), add_stages=0, psum_banks=2,
                                 psum_bank_fp32=4)}


@pytest.fixture(scope="module", params=sorted(PSUM_CFGS))
def psum_bench(request):
    from rtl.tensor.psum import PsumUnit
    return Bench(PsumUnit(PSUM_CFGS[request.param], use_instances=False))


class PsumDriver:
    """Offers beats back to back (with optional gaps), records the acceptance cycle of each, the
    ``i_ready`` seen every cycle (with the beat on the payload even when ``valid`` is low), the
    ``we`` cycles; then reads ``addrs`` back through the read port."""

    def __init__(self, psu, beats, gaps=(), reads=()):
        self.psu, self.p = psu, PsumPorts(psu)
        self.beats, self.gaps, self.reads = beats, set(gaps), list(reads)
        self.accepted, self.ready, self.we, self.read_data = [], [], [], {}

    async def __call__(self, ctx):
        p, lay = self.p, self.psu.in_layout
        from amaranth.hdl import Value
        k, t = 0, 0
        while k < len(self.beats) or ctx.get(p.busy):
            if k < len(self.beats):
                b = self.beats[k]
                ctx.set(Value.cast(p.payload), const_int(lay, b))
                v = t not in self.gaps
                ctx.set(p.valid, int(v))
                r = ctx.get(p.ready)
                self.ready.append((t, k, r))
                if v and r:
                    self.accepted.append(t)
                    k += 1
            else:
                ctx.set(p.valid, 0)
            if ctx.get(p.we):
                self.we.append(t)
            await ctx.tick()
            t += 1
            assert t < 20 * (len(self.beats) + 10), "PSUM never drained"
        # read port: data of the address given in a cycle with rd_en, one cycle later
        C = self.psu.cfg.pe_cols
        for a in self.reads:
            ctx.set(p.rd_en, 1)
            ctx.set(p.rd_addr, a)
            await ctx.tick()
            ctx.set(p.rd_en, 0)
            ctx.set(p.rd_addr, (a + 1) % self.psu.depth)     # must not matter while rd_en low
            self.read_data[a] = [ctx.get(p.rd_data[c]) for c in range(C)]
            await ctx.tick()
            assert [ctx.get(p.rd_data[c]) for c in range(C)] == self.read_data[a], \
                "rd_data did not hold while rd_en was low"


def psum_model(cfg, beats, init=None):
    """Golden PSUM contents after ``beats`` in order: masked lanes overwritten or accumulated
    with ``golden.tensor.psum_update`` / ``golden.arith.add_fp32``; the rest untouched."""
    from golden.tensor import psum_update
    depth = cfg.psum_banks * cfg.psum_bank_fp32
    st = np.zeros((depth, cfg.pe_cols), np.uint32) if init is None else init.copy()
    for b in beats:
        lanes = [c for c in range(cfg.pe_cols) if b["mask"] >> c & 1]
        new = psum_update(st[b["addr"], lanes], np.array(b["value"], np.uint32)[lanes],
                          bool(b["acc"]))
        st[b["addr"], lanes] = new
    return st


def test_psum_random_beats(psum_bench, seed):
    """Random overwrite / accumulate beats (lane masks, NaN payloads, Infs, a few addresses so
    that accumulates hit beats still in flight), with gaps: the memory equals the golden
    sequence applied in arrival order; ``i_ready`` is low exactly while an accumulating beat's
    address is still in the ``latency``-cycle pipeline (and never otherwise, whatever
    ``i_valid``); every write lands ``latency`` cycles after its beat."""
    psu = psum_bench.dut
    cfg = psu.cfg
    C, depth = cfg.pe_cols, psu.depth
    rng = np.random.default_rng([seed, 30])
    addrs = rng.choice(depth, min(depth, 5), replace=False)
    beats = []
    for i in range(120):
        beats.append({"addr": int(rng.choice(addrs)), "acc": int(rng.random() < 0.6),
                      "mask": int(rng.integers(0, 1 << C)) if i % 4 else (1 << C) - 1,
                      "value": [int(v) for v in rand_fp32(rng, C)]})
    first = {}
    for b in beats:         # the first write of an address overwrites every lane (defined)
        if b["addr"] not in first:
            first[b["addr"]] = b
            b.update(acc=0, mask=(1 << C) - 1)
    gaps = set(np.flatnonzero(rng.random(400) < 0.2).tolist())
    drv = PsumDriver(psu, beats, gaps, reads=sorted(int(a) for a in addrs))
    psum_bench.run(drv)
    L = psu.latency
    assert L == 1 + cfg.add_stages
    assert drv.we == [t + L for t in drv.accepted], "writes not latency cycles after beats"
    acc_t = dict(enumerate(drv.accepted))
    for t, k, r in drv.ready:
        b = beats[k]
        inflight = [beats[j]["addr"] for j, tj in acc_t.items() if j < k and t - L <= tj < t]
        want = not (b["acc"] and b["addr"] in inflight)
        assert bool(r) == want, (f"seed={seed} cycle {t} beat {k} (acc={b['acc']}, addr "
                                 f"{b['addr']}, in flight {inflight}): i_ready={r}")
    st = psum_model(cfg, beats)
    for a, got in drv.read_data.items():
        assert got == [int(v) for v in st[a]], (f"seed={seed} addr {a}: got {hexs(got)} "
                                                f"want {hexs(st[a])}")


def test_psum_hazard_back_to_back_accumulate(psum_bench):
    """Back-to-back accumulates into one address: each waits until the previous write has
    landed (accepted the cycle after it), the sum is the golden chain of FP32 adds; an
    overwrite of the same address and an accumulate into another address are not held;
    writes land in order (the later overwrite wins). Lane mask: only masked lanes change."""
    psu = psum_bench.dut
    cfg = psu.cfg
    C, L = cfg.pe_cols, psu.latency
    a, b = 1, 2
    ones = (1 << C) - 1
    vals = [[0x3F800000 + 0x100000 * c + i for c in range(C)] for i in range(4)]
    beats = [{"addr": a, "acc": 0, "mask": ones, "value": vals[0]},
             {"addr": a, "acc": 1, "mask": ones, "value": vals[1]},    # held: a in flight
             {"addr": a, "acc": 1, "mask": ones, "value": vals[2]},    # held again
             {"addr": b, "acc": 0, "mask": ones, "value": vals[3]},    # other address
             {"addr": b, "acc": 1, "mask": 0b0101 & ones, "value": vals[1]},   # held, masked
             {"addr": a, "acc": 0, "mask": ones, "value": vals[3]},    # overwrite: not held
             {"addr": a, "acc": 0, "mask": ones, "value": vals[2]}]    # later one wins
    drv = PsumDriver(psu, beats, reads=[a, b])
    psum_bench.run(drv)
    t = drv.accepted
    assert t[1] == t[0] + L + 1 and t[2] == t[1] + L + 1, f"accepted at {t}, latency {L}"
    assert t[3] == t[2] + 1 and t[4] == t[3] + L + 1 and t[5] == t[4] + 1 and t[6] == t[5] + 1
    st = psum_model(cfg, beats)
    chain = add_fp32(add_fp32(np.array(vals[0], np.uint32), np.array(vals[1], np.uint32)),
                     np.array(vals[2], np.uint32))
    assert (psum_model(cfg, beats[:3])[a] == chain).all()
    assert drv.read_data[a] == [int(v) for v in st[a]] == vals[2]
    assert drv.read_data[b] == [int(v) for v in st[b]]
    assert st[b][1] == vals[3][1] != st[b][0]


def test_psum_read_latency(psum_bench):
    """``rd_data`` shows the entry of ``rd_addr`` one cycle after ``rd_en`` (and holds after);
    a write's value is readable from the cycle after it lands."""
    from amaranth.hdl import Value
    psu = psum_bench.dut
    p = PsumPorts(psu)
    C = psu.cfg.pe_cols
    vals = [0x40000000 + c for c in range(C)]
    seen = []

    async def job(ctx):
        ctx.set(Value.cast(p.payload), const_int(psu.in_layout, {"addr": 3, "acc": 0,
                                                                   "mask": (1 << C) - 1,
                                                                   "value": vals}))
        ctx.set(p.valid, 1)
        ctx.set(p.rd_en, 1)
        ctx.set(p.rd_addr, 3)
        await ctx.tick()
        ctx.set(p.valid, 0)
        for _ in range(psu.latency + 2):
            seen.append((ctx.get(p.we), [ctx.get(p.rd_data[c]) for c in range(C)]))
            await ctx.tick()

    psum_bench.run(job)
    # beat accepted at cycle 0; the write lands at the end of cycle L (we high in that cycle);
    # a read issued in cycle L + 1 shows it in cycle L + 2
    L = psu.latency
    assert [w for w, _ in seen] == [int(i + 1 == L) for i in range(L + 2)]
    assert seen[L][1] == [0] * C, "read data changed before the write landed"
    assert seen[L + 1][1] == vals, f"read after the write: {hexs(seen[L + 1][1])}"


# ==================================================================================================
# Engine command checks the small preset cannot encode
# ==================================================================================================

#: psum_banks = 3 leaves bank 3 encodable; psum_bank_fp32 = 2 < pe_rows = 4 makes a transpose
#: with K > psum_bank_fp32 encodable (neither is possible on the presets).
ODD_CFG = SMALL.replace(pe_cols=1, psum_banks=3, psum_bank_fp32=2, formats=("bf16",),
                        mx_formats=())


def run_engine_cmds(cmds, cycles=60):
    """Load one bf16 column (1, 2, 3, 4), then each command of ``cmds`` in turn on a fresh
    TensorEngine(ODD_CFG); returns ``(err, err_code, result beats)``."""
    from amaranth.hdl import Value
    from rtl.tensor.engine import TensorEngine
    from rtl.tensor.layouts import OP_LOAD
    tl = TensorLayouts(ODD_CFG)
    e = TensorEngine(ODD_CFG, use_instances=False)
    out = {"beats": []}

    async def job(ctx):
        ctx.set(e.st.valid, 1)
        ctx.set(Value.cast(e.st.payload), tl.pack_lanes([0x3F80, 0x4000, 0x4040, 0x4080]))
        ctx.set(e.res.ready, 1)
        for w in [tl.pack_cmd(OP_LOAD, fmt=0, m=1)] + list(cmds):
            ctx.set(Value.cast(e.cmd.payload), w)
            ctx.set(e.cmd.valid, 1)
            for _ in range(cycles):
                if ctx.get(e.cmd.ready):
                    break
                await ctx.tick()
            else:
                raise AssertionError("command not taken")
            await ctx.tick()
            ctx.set(e.cmd.valid, 0)
            for _ in range(cycles):
                if ctx.get(e.res.valid):
                    out["beats"].append(ctx.get(Value.cast(e.res.payload)))
                await ctx.tick()
            assert not ctx.get(e.busy), "engine still busy"
        out["err"], out["code"] = ctx.get(e.err), ctx.get(e.err_code)

    Bench(e).run(job)
    return out["err"], out["code"], out["beats"]


@pytest.mark.parametrize("what", ["read", "transpose"])
def test_engine_rejects_bank_out_of_range(what):
    """READ / TRANSPOSE naming bank = psum_banks: ERR_SHAPE, nothing read or written (bank 0's
    entries, first written by a valid transpose, read back unchanged), the engine keeps
    running."""
    from rtl.tensor.layouts import OP_READ, OP_TRANSPOSE, ERR_SHAPE
    tl = TensorLayouts(ODD_CFG)
    bad = (tl.pack_cmd(OP_READ, n=1, bank=3) if what == "read"
           else tl.pack_cmd(OP_TRANSPOSE, k=2, bank=3))
    err, code, beats = run_engine_cmds([tl.pack_cmd(OP_TRANSPOSE, k=2, bank=0), bad,
                                        tl.pack_cmd(OP_READ, n=2, bank=0)])
    assert (err, code) == (1, ERR_SHAPE)
    assert beats == [0x3F80, 0x4000], f"bank 0 read {hexs(beats)}"


def test_engine_rejects_transpose_k_above_bank_size():
    """TRANSPOSE with psum_bank_fp32 < K <= pe_rows must be rejected (ERR_SHAPE) and write
    nothing (docs/tensor-engine.md limit; golden.tensor.transpose rejects it too). Before the
    fix the write of row K-1 wrapped onto entry 0 of the bank."""
    from rtl.tensor.layouts import OP_READ, OP_TRANSPOSE, ERR_SHAPE
    tl = TensorLayouts(ODD_CFG)
    err, code, beats = run_engine_cmds([tl.pack_cmd(OP_TRANSPOSE, k=2, bank=0),
                                        tl.pack_cmd(OP_TRANSPOSE, k=3, bank=0),
                                        tl.pack_cmd(OP_READ, n=2, bank=0)])
    assert beats == [0x3F80, 0x4000], f"bank 0 read {hexs(beats)}"
    assert (err, code) == (1, ERR_SHAPE)


@pytest.mark.parametrize("what", ["load_fmt", "matmul_fmt", "matmul_mx"])
def test_engine_rejects_unknown_formats(what):
    """A LOAD or MATMUL naming a format the config does not have, or an MX matmul on a config
    without MX: ERR_FORMAT, nothing written (bank 0, written by a valid transpose first, reads
    back unchanged), the engine keeps running."""
    from rtl.tensor.layouts import OP_LOAD, OP_MATMUL, OP_READ, OP_TRANSPOSE, ERR_FORMAT
    tl = TensorLayouts(ODD_CFG)        # one format (bf16), no MX: format index 1 is unknown
    bad = {"load_fmt": tl.pack_cmd(OP_LOAD, fmt=1, m=1),
           "matmul_fmt": tl.pack_cmd(OP_MATMUL, fmt=1, k=1, n=1, bank=0),
           "matmul_mx": tl.pack_cmd(OP_MATMUL, fmt=0, k=1, n=1, bank=0, mx=1)}[what]
    err, code, beats = run_engine_cmds([tl.pack_cmd(OP_TRANSPOSE, k=2, bank=0), bad,
                                        tl.pack_cmd(OP_READ, n=2, bank=0)])
    assert (err, code) == (1, ERR_FORMAT), f"{what}: err={err} code={code}"
    assert beats == [0x3F80, 0x4000], f"{what}: bank 0 read {hexs(beats)}"
