# SPDX-License-Identifier: Apache-2.0
"""The DMA element path's arithmetic (``rtl.dma.element.ElementALU``) in Amaranth's simulator,
bit for bit against ``golden.dma.run`` (the spec: docs/dma.md §2): every op x every pair of
element dtypes, corner codes (±0, ±Inf, NaN, subnormals, max finite, all-ones, overflow into
narrow formats) plus random codes, RNE and stochastic rounding with the engine's XORWOW stream
(``golden.dma.sr_stream``), one element per cycle. Every loop is bounded."""

from __future__ import annotations

import random

import numpy as np
import pytest

from golden import dma as G
from rtl.config import get_preset
from rtl.dma.element import SR_LANE_BASE, ElementALU, element_dtypes, sr_lane
from tb.amsim import SimBench

SMALL = get_preset("small")


def _corners(fmt):
    """Corner codes of ``fmt``: zeros, subnormals, min normal, max finite, the all-ones
    exponent (Inf or NaN or a finite max), all-ones, each with both signs."""
    mb, eb, w = fmt.man_bits, fmt.exp_bits, fmt.width
    mags = {0, 1, (1 << mb) - 1, 1 << mb, fmt.max_finite_code, ((1 << eb) - 1) << mb,
            (((1 << eb) - 1) << mb) | 1, (1 << (w - 1)) - 1, (1 << (w - 1)) - 2,
            ((1 << eb) - 2) << mb, fmt.bias << mb}
    sgn = 1 << (w - 1)
    return sorted(mags | {c | sgn for c in mags})


def _codes(fmt, esize, rng, n):
    """Corner codes plus ``n`` random ones, as ``esize``-byte little-endian integers (a TF32
    element gets random bits above its 19-bit code, which decode must ignore)."""
    out = _corners(fmt) + [rng.getrandbits(fmt.width) for _ in range(n)]
    if 8 * esize > fmt.width:
        out = [c | (rng.getrandbits(8 * esize - fmt.width) << fmt.width) for c in out]
    return out


def _cases(cfg, rng, nrand):
    """Groups ``(op, sdt, ddt, rounding, src codes, dst codes)``: every op x dtype pair with
    RNE (corner and ``nrand`` random codes); SR on every pair for add and copy (``nrand``
    random codes and 4 sampled corners: SR is the rounding of the same result)."""
    dts = element_dtypes(cfg)
    groups = []
    for op in (G.OP_COPY, G.OP_ADD, G.OP_MAX, G.OP_MIN):
        for sdt in dts:
            for ddt in dts:
                for rnd in (G.RND_RNE, G.RND_SR):
                    if op == G.OP_COPY and sdt == ddt:
                        continue                            # a byte copy, not this path
                    if rnd == G.RND_SR and op in (G.OP_MAX, G.OP_MIN):
                        continue
                    sf, df = cfg.fmt(G.DTYPES[sdt]), cfg.fmt(G.DTYPES[ddt])
                    es, ed = G.ELEM_BYTES[G.DTYPES[sdt]], G.ELEM_BYTES[G.DTYPES[ddt]]
                    src = _codes(sf, es, rng, nrand + 2 * rnd)
                    dst = _codes(df, ed, rng, nrand + 2 * rnd)
                    if rnd == G.RND_SR:
                        src = rng.sample(src[:-nrand - 2], 4) + src[-nrand - 2:]
                        dst = rng.sample(dst[:-nrand - 2], 4) + dst[-nrand - 2:]
                    k = max(len(src), len(dst))
                    src = (src * 2)[:k] if len(src) < k else src
                    dst = [dst[j % len(dst)] for j in range(k)]
                    rng.shuffle(dst)
                    groups.append((op, sdt, ddt, rnd, src, dst))
    return groups


def _golden(cfg, groups):
    """Expected codes per group through ``golden.dma.run`` on an SBUF-to-SBUF descriptor, SR
    words drawn from one engine stream in the order the groups are fed."""
    rng = G.sr_stream(cfg, 0)
    out = []
    for op, sdt, ddt, rnd, src, dst in groups:
        es, ed = G.ELEM_BYTES[G.DTYPES[sdt]], G.ELEM_BYTES[G.DTYPES[ddt]]
        n = len(src)
        mem = G.Memory(cfg, dram_bytes=16)
        doff = 8192
        for j in range(n):
            mem.sbuf[j * es:(j + 1) * es] = src[j].to_bytes(es, "little")
            mem.sbuf[doff + j * ed:doff + (j + 1) * ed] = dst[j].to_bytes(ed, "little")
        d = G.Descriptor(src=0, dst=doff, src_space=G.SBUF, dst_space=G.SBUF, op=op,
                         src_dtype=sdt, dst_dtype=ddt, rounding=rnd, dims=((n, es, ed),))
        assert G.run(cfg, d, mem, element_ops=True, rand=rng) == (G.E_OK, 0)
        out.append([int.from_bytes(mem.sbuf[doff + j * ed:doff + (j + 1) * ed], "little")
                    for j in range(n)])
    return out


def _simulate(cfg, groups, bench=None):
    dut = ElementALU(cfg, lane=sr_lane(0))
    bench = bench or SimBench(dut)
    dut = bench.dut
    lat = ElementALU.Signature(cfg).latency
    feed = [(op, sdt, ddt, rnd, s, d) for op, sdt, ddt, rnd, src, dst in groups
            for s, d in zip(src, dst)]
    got = []

    async def job(ctx):
        p = dut.i.payload
        for j in range(len(feed) + lat + 2):
            if j < len(feed):
                op, sdt, ddt, rnd, s, d = feed[j]
                ctx.set(dut.i.valid, 1)
                ctx.set(p.op, op)
                ctx.set(p.src_dtype, sdt)
                ctx.set(p.dst_dtype, ddt)
                ctx.set(p.sr, rnd)
                ctx.set(p.src, s)
                ctx.set(p.dst, d)
            else:
                ctx.set(dut.i.valid, 0)
            await ctx.delay(1e-9)
            if ctx.get(dut.o.valid):
                got.append((j, ctx.get(dut.o.payload.code)))
            await ctx.tick()

    bench.run(job)
    return feed, got, lat


def test_element_alu_every_op_and_dtype_pair(seed):
    cfg = SMALL
    rng = random.Random(seed)
    groups = _cases(cfg, rng, 2)
    want = _golden(cfg, groups)
    feed, got, lat = _simulate(cfg, groups)
    assert len(got) == len(feed), f"seed={seed}: {len(got)} results for {len(feed)} elements"
    assert [j for j, _ in got] == [k + lat for k in range(len(feed))]   # fixed latency
    flat = [c for g in want for c in g]
    bad = [(feed[k], hex(flat[k]), hex(c)) for k, (_, c) in enumerate(got) if c != flat[k]]
    assert not bad, f"seed={seed}: {len(bad)} mismatches, first {bad[:5]}"
    # the cases must reach every op and dtype pair and both roundings
    assert {(f[0], f[1], f[2]) for f in feed} >= {(1, s, d) for s in element_dtypes(cfg)
                                                   for d in element_dtypes(cfg)}
    assert {f[3] for f in feed} == {0, 1}


def test_sr_stream_is_the_engines_lane():
    """The stream definition is one: the RTL lane equals the golden lane, lanes are apart
    from the partition lanes, and the SR results depend on the seed (a fixed seed gives a
    fixed, golden-checked result above)."""
    assert SR_LANE_BASE == G.SR_LANE_BASE and sr_lane(3) == G.sr_lane(3) == (1 << 16) + 3
    a, b = G.sr_stream(SMALL, 0).next_n(8), G.sr_stream(SMALL.replace(sr_seed=7), 0).next_n(8)
    assert not np.array_equal(a, b)
    assert not np.array_equal(a, G.sr_stream(SMALL, 1).next_n(8))


def test_element_alu_other_seed_and_formats(seed):
    """A different ``sr_seed``, ``add_stages`` and a format subset (FP8 only: no FP32 path;
    BF16+FP32)."""
    rng = random.Random(seed)
    for cfg in (SMALL.replace(sr_seed=0x1234567, add_stages=0,
                              formats=("fp8_e5m2", "fp8_e4m3", "fp8_e4m3fn", "cfp8")),
                SMALL.replace(formats=("fp32", "bf16"), add_stages=4)):
        groups = _cases(cfg, rng, 1)
        want = _golden(cfg, groups)
        feed, got, lat = _simulate(cfg, groups)
        flat = [c for g in want for c in g]
        assert [c for _, c in got] == flat, f"seed={seed} cfg={cfg.formats}"


@pytest.mark.full
def test_element_alu_many(seed):
    rng = random.Random(seed)
    groups = _cases(SMALL, rng, 60)
    want = _golden(SMALL, groups)
    feed, got, lat = _simulate(SMALL, groups)
    assert [c for _, c in got] == [c for g in want for c in g], f"seed={seed}"


@pytest.mark.filterwarnings("ignore::amaranth.hdl.UnusedElaboratable")
def test_engine_announces_and_validates():
    """``DMAEngine.Signature(cfg).element_ops`` follows ``cfg.dma_element_ops``; the engine
    index (its SR lane) is validated."""
    from rtl.dma.engine import DMAEngine
    assert DMAEngine.Signature(SMALL).element_ops is True
    assert DMAEngine.Signature(SMALL.replace(dma_element_ops=False)).element_ops is False
    eng = DMAEngine(SMALL, engine=3)
    eng._MustUse__silence = True            # built to read an attribute, not elaborated
    assert eng.engine == 3
    with pytest.raises(ValueError, match=r"DMAEngine engine must be in \[0, 65535\], not -1"):
        DMAEngine(SMALL, engine=-1)
    with pytest.raises(TypeError, match="DMAEngine engine must be an int"):
        DMAEngine(SMALL, engine=True)
    import gc
    gc.collect()            # the half-built engines go now, under this test's warning filter


def _mover_run(cfg, descs, rng, bench, *, lat=2, p_ready=0.7, max_cycles=20000):
    """Run SBUF-to-SBUF element descriptors through ``ElementMover`` with a Python model of
    the partition port (random ``ready``, reads answered ``lat`` cycles after they are taken,
    byte-enabled writes); returns the final SBUF bytes and the cycles per descriptor."""
    dut = bench.dut
    W = cfg.sbuf_word_bytes
    n = cfg.partitions * cfg.sbuf_bytes_per_partition
    sbuf = bytearray(rng.randbytes(n))
    start_mem = bytes(sbuf)
    cycles = []

    async def job(ctx):
        pipe = [None] * lat
        for d in descs:
            ctx.set(dut.desc.as_value(), d.to_int())
            ctx.set(dut.start, 1)
            await ctx.tick()
            ctx.set(dut.start, 0)
            for c in range(max_cycles):
                ctx.set(dut.req_ready, int(rng.random() < p_ready))
                out = pipe.pop(0)
                ctx.set(dut.rsp_valid, int(out is not None))
                ctx.set(dut.rsp_data, out or 0)
                await ctx.delay(1e-9)
                nxt = None
                if ctx.get(dut.req_valid) and ctx.get(dut.req_ready):
                    a = ctx.get(dut.req_word) * W
                    if ctx.get(dut.req_we):
                        be, wd = ctx.get(dut.req_be), ctx.get(dut.req_wdata)
                        for b in range(W):
                            if be >> b & 1:
                                sbuf[a + b] = (wd >> (8 * b)) & 0xFF
                    else:
                        nxt = int.from_bytes(sbuf[a:a + W], "little")
                pipe.append(nxt)
                busy = ctx.get(dut.busy)
                await ctx.tick()
                if not busy and c > 0:
                    break
            else:
                raise AssertionError(f"mover still busy after {max_cycles} cycles: {d}")
            cycles.append(c)
            assert all(p is None for p in pipe)

    bench.run(job)
    return start_mem, bytes(sbuf), cycles


def test_mover_sbuf_to_sbuf(seed):
    """``ElementMover`` on random SBUF-to-SBUF element descriptors (every op, casts, RNE/SR,
    1-4 dims, negative strides, any byte offsets) under random port stalls: SBUF byte for byte
    against ``golden.dma.run`` replaying the SR stream; with no stalls the port is the bound
    (2 accesses per cast element, 3 per op element) plus a bounded fill."""
    from rtl.dma.element import ElementMover
    from tb.dma.program import random_element
    cfg = SMALL
    rng = random.Random(seed)
    n = cfg.partitions * cfg.sbuf_bytes_per_partition
    descs = [random_element(cfg, rng, dram_base=0, dram_limit=1 << 16, src_space=G.SBUF,
                            dst_space=G.SBUF, max_elems=24) for _ in range(24)]
    bench = SimBench(ElementMover(cfg, lane=sr_lane(0)))
    for lat, part in ((2, descs[:16]), (5, descs[16:])):   # each run starts from reset
        start, got, _ = _mover_run(cfg, part, rng, bench, lat=lat)
        mem = G.Memory(cfg, dram_bytes=16, sbuf=start)
        stream = G.sr_stream(cfg, 0)
        for d in part:
            assert G.run(cfg, d, mem, element_ops=True, rand=stream) == (0, 0)
        bad = [i for i in range(n) if got[i] != mem.sbuf[i]]
        assert not bad, f"seed={seed} lat={lat}: {len(bad)} bytes differ, first {bad[:6]}\n" \
            + "\n".join(str(d) for d in part)
    # rate with a port that always accepts: the port is the bound (a cast reads and writes
    # each element, an op reads twice), plus the pipeline's fill
    L = ElementALU.Signature(cfg).latency
    for op, accesses in ((G.OP_COPY, 2), (G.OP_ADD, 3)):
        d = G.Descriptor(src=0, dst=n // 2, src_space=G.SBUF, dst_space=G.SBUF, op=op,
                         dims=((64, 4, 2),), src_dtype=0, dst_dtype=2)
        _, _, cyc = _mover_run(cfg, [d], rng, bench, p_ready=1.0)
        assert accesses * 64 <= cyc[0] <= accesses * 64 + L + 12, \
            f"op {op}: {cyc[0]} cycles for 64 elements"
