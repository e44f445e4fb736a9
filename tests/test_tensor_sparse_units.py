# SPDX-License-Identifier: Apache-2.0
"""Unit tests of the structured-sparsity decoder (``rtl/tensor/sparse.py``) and the sparse PE
path (``rtl/tensor/pe.py``) in Amaranth's simulator, and the decoder's formal check.

Expected values come from ``golden.sparse`` (the documented lane format) and ``golden.arith``
(the fused MAC), never from the RTL.
"""

from __future__ import annotations

import numpy as np
import pytest
from amaranth.hdl import Shape

from golden.arith import fma_fp32
from golden.sparse import moving_lanes, sparse_formats
from rtl.config import get_preset, parse_sparse_pattern
from rtl.tensor.layouts import TensorLayouts
from tb.amsim import SimBench
from tb.tensor.program import rand_codes
from tests.test_tensor_units import PEDriver, mixed_codes, rand_fp32, results, schedule

SMALL = get_preset("small")


# --- the decoder alone: group bus + tag mux ------------------------------------------------

def test_decoder_selects_the_documented_element(seed):
    """Every row, every enabled (pattern, element width), every tag: the element the decoder
    gives a PE of row k is logical element ``(k // n) * m + tag`` of the moving column, with
    the lanes packed by ``golden.sparse.moving_lanes``."""
    from amaranth.hdl import Module
    from amaranth.sim import Simulator
    from tb.tensor.sparse_decoder import DecoderUnderTest
    tl = TensorLayouts(SMALL)
    rng = np.random.default_rng([seed, 1])
    top = Module()
    duts = [DecoderUnderTest(SMALL, r) for r in range(SMALL.pe_rows)]
    for r, d in enumerate(duts):
        top.submodules[f"row{r}"] = d
    stim = []
    for pi, w in tl.sparse_combos:
        n, m = tl.patterns[pi]
        name = tl.pattern_names[pi]
        fmt = next(f for f in sparse_formats(SMALL, name) if SMALL.fmt(f).width == w)
        for _rep in range(2):
            x = rng.integers(0, 1 << w, (SMALL.pe_rows // n * m, 1)).astype(np.uint32)
            lanes = moving_lanes(x, fmt, name, SMALL)[:, 0]
            word = sum(int(v) << (32 * r) for r, v in enumerate(lanes))
            for t in range(m):
                want = [int(x[(k // n) * m + t, 0]) for k in range(SMALL.pe_rows)]
                stim.append((name, w, pi, word, t, want))
    got = []

    async def bench(ctx):
        for _name, w, pi, word, t, _want in stim:
            for d in duts:
                ctx.set(d.lanes, word)
                ctx.set(d.pat, pi)
                ctx.set(d.wsel, tl.sparse_widths.index(w))
                ctx.set(d.tag, t)
            got.append([ctx.get(d.out) for d in duts])
    sim = Simulator(top)
    sim.add_testbench(bench)
    sim.run()
    assert len(got) == len(stim) > 100
    for (name, w, _pi, _word, t, want), g in zip(stim, got):
        assert g == want, f"seed={seed} {name} w={w} tag {t}: rows give {g}, want {want}"


@pytest.mark.parametrize("pattern", SMALL.sparsity)
def test_decoder_formal(pattern, tmp_path):
    """yosys SAT proves, for every row of the last group, every lane content, every element
    width of the pattern and every tag < m, that the decoder returns the specified element."""
    from tb.tensor.sparse_decoder import run_sat
    n, _ = parse_sparse_pattern(pattern)
    ok, seconds, log = run_sat(SMALL, pattern, tmp_path, group=SMALL.pe_rows // n - 1)
    assert ok, log[-3000:]


def test_decoder_formal_can_fail(tmp_path):
    """The same proof with the decoder fed ``tag ^ 1`` finds a counterexample."""
    from tb.tensor.sparse_decoder import run_sat
    ok, _, _ = run_sat(SMALL, "4:16", tmp_path, broken=True)
    assert not ok


# --- the PE's sparse path ------------------------------------------------------------------

@pytest.fixture(scope="module")
def pe_bench():
    from rtl.tensor.pe import PE
    return SimBench(PE(SMALL))


def run_pe(bench, steps, col=0):
    out = []
    bench.run(PEDriver(bench.dut, col).job(steps, out))
    return out


def test_pe_sparse_tag_mux_fma(pe_bench, seed):
    """Sparse beats (a group bus of m elements, ``sp = 1``) interleaved with dense beats: each
    ``ps_o`` is ``fma_fp32(c, w, x[tag])`` for the tag loaded with the weight, at every element
    width and pattern size; a dense beat still multiplies its own code."""
    pe = pe_bench.dut
    tl = TensorLayouts(SMALL)
    rng = np.random.default_rng([seed, 2])
    beats, want = [], []
    for pi, w in tl.sparse_combos:
        n, m = tl.patterns[pi]
        fx = next(f for f in SMALL.dense_formats if f.width == w)
        fw = SMALL.fmt(str(rng.choice([f for f in sparse_formats(SMALL, tl.pattern_names[pi])])))
        for i in range(6):
            dense = i == 5
            wc = int(mixed_codes(rng, fw, 1)[0])
            tag = int(rng.integers(0, m))
            xs = mixed_codes(rng, fx, m)
            bus = sum(int(v) << (e * w) for e, v in enumerate(xs))
            c = rand_fp32(rng, 1)
            ld = {"valid": 1, "col": 0, "fmt": tl.fmt_index(fw), "code": wc, "tag": tag}
            if beats:
                beats[-1]["ld"] = ld
            else:
                beats.append({"mv": {}, "ld": ld})
            code = int(xs[0]) if dense else bus
            beats.append({"mv": {"valid": 1, "active": 1, "first": 1, "fmt": tl.fmt_index(fx),
                                 "code": code, "sp": int(not dense),
                                 "wsel": tl.sparse_widths.index(w)}, "c": c[0]})
            xsel = xs[0] if dense else xs[tag]
            want.append(fma_fp32(c, np.array([wc], np.uint32), fw,
                                 np.array([xsel], np.uint32), fx)[0])
    got = results(run_pe(pe_bench, schedule(pe, beats)))
    vals = [v for v, _ in got]
    assert len(vals) == len(want)
    bad = [i for i in range(len(want)) if vals[i] != int(want[i])]
    assert not bad, (f"seed={seed}: {len(bad)} mismatches, first beat {bad[0]}: got "
                     f"{hex(vals[bad[0]])} want {hex(int(want[bad[0]]))}")


def test_no_sparsity_means_no_sparse_members():
    """``sparse_patterns=()``: the command, beat and PE layouts are the dense ones (no ``sp``,
    no tags, lanes of the widest format's width), so the hardware is the dense hardware."""
    from rtl.tensor.pe import pe_layouts
    for base in (SMALL, get_preset("bf16_only")):
        cfg = base.replace(sparse_patterns=())
        tl = TensorLayouts(cfg)
        assert not tl.sparse and tl.lanes_st is tl.lanes_in
        assert "sp" not in tl.cmd.members and "tags" not in tl.lanes_in.members
        assert tl.lane_width == tl.code_width == max(f.width for f in tl.pe_formats)
        mv, ld, _ = pe_layouts(cfg)
        assert "sp" not in mv.members and "tag" not in ld.members
        assert Shape.cast(mv["code"].shape).width == tl.code_width
    sparse = TensorLayouts(get_preset("bf16_only"))
    assert sparse.lane_width == 32 and sparse.code_width == 16


def test_sparse_rand_codes_helper_is_format_bounded():
    # the testbench's packer rejects a lane wider than the lane width
    tl = TensorLayouts(SMALL)
    with pytest.raises(ValueError, match="lane code must be in"):
        tl.pack_lanes([1 << tl.lane_width])
    with pytest.raises(ValueError, match="tag must be in"):
        tl.pack_lanes([0], tags=[1 << tl.tag_bits])
    assert rand_codes(np.random.default_rng(0), SMALL.fmt("bf16"), (3,)).max() < 1 << 16
