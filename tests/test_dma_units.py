# SPDX-License-Identifier: Apache-2.0
"""DMA sub-blocks in Amaranth's own simulator: the descriptor check against ``golden.dma.check``
(random legal and malformed descriptors of every class), the segment walker against the
golden address list, the semaphore file against a dictionary model. Every loop is bounded."""

from __future__ import annotations

import random

import pytest

from golden import dma as G
from rtl.config import get_preset
from rtl.dma.descriptor import DescriptorCheck
from tb.amsim import SimBench
from tb.dma.program import directed_bad, mutate_bad, random_copy, random_element

SMALL = get_preset("small")
DEFAULT = get_preset("default")
#: A format subset (no FP32/TF32/BF16/FP16) for the element path's dtype rule.
FP8 = SMALL.replace(formats=("fp8_e5m2", "fp8_e4m3", "fp8_e4m3fn", "cfp8"))


def directed_element(cfg, *, dram_base, dram_limit):
    """Element descriptors for the rules the element path changes: a cast to or from e8m0 or
    a format ``cfg`` does not enable (F_DTYPE, each side), a cast and an op whose addresses
    differ modulo the word (legal: no lane rule), an op with a misaligned address."""
    base = G.Descriptor(src=dram_base, dst=0, src_space=G.DRAM, dst_space=G.SBUF,
                        dims=((4, 1, 1),), src_dtype=4, dst_dtype=4, op=G.OP_ADD)
    from dataclasses import replace
    return [replace(base, src_dtype=9), replace(base, dst_dtype=9),
            replace(base, src_dtype=0, dims=((4, 4, 1),)), replace(base, dst_dtype=0,
                                                                    dims=((4, 1, 4),)),
            replace(base, dst=3, src=dram_base + 64, dims=((4, 1, 1), (3, 5, -7)), dst_dtype=5,
                    op=G.OP_COPY),
            replace(base, src_dtype=2, dst_dtype=3, dims=((4, 2, 2),), src=dram_base + 2,
                    dst=6),
            replace(base, src_dtype=2, dst_dtype=2, dims=((4, 2, 2),), src=dram_base + 1)]


def _check_cases(cfg, rng, n, base, limit, element_ops=False):
    out = []
    for _ in range(n):
        if element_ops and rng.random() < 0.5:
            d = random_element(cfg, rng, dram_base=base, dram_limit=limit)
        else:
            d = random_copy(cfg, rng, dram_base=base, dram_limit=limit)
        if rng.random() < 0.7:
            d = mutate_bad(cfg, rng, d, dram_base=base, dram_limit=limit)
        out.append(d)
    return out


@pytest.mark.parametrize("name, element_ops", [("small", False), ("small", True),
                                                ("default", False), ("fp8", True)])
def test_descriptor_check_matches_golden(name, element_ops, seed):
    cfg = {"small": SMALL, "default": DEFAULT, "fp8": FP8}[name]
    rng = random.Random(seed)
    base, limit = 0x4000, 0x4000 + (1 << 14)
    directed = directed_bad(cfg, dram_base=base, dram_limit=limit)
    if element_ops:
        directed += directed_element(cfg, dram_base=base, dram_limit=limit)
    descs = directed + _check_cases(cfg, rng, 300, base, limit, element_ops)
    dut = DescriptorCheck(cfg, element_ops=element_ops)
    bench = SimBench(dut)
    lat = DescriptorCheck.Signature(cfg).latency
    got = []

    async def job(ctx):
        from amaranth.hdl import Value
        pending = []
        for j in range(len(descs) + lat + 1):
            if j < len(descs):
                ctx.set(dut.i.valid, 1)
                ctx.set(dut.i.payload.desc.as_value(), descs[j].to_int())
                ctx.set(dut.i.payload.dram_base, base)
                ctx.set(dut.i.payload.dram_limit, limit)
            else:
                ctx.set(dut.i.valid, 0)
            if ctx.get(dut.o.valid):
                got.append((ctx.get(dut.o.payload.code), ctx.get(dut.o.payload.info)))
            pending.append(j)
            await ctx.tick()
        _ = Value

    bench.run(job)
    assert len(got) == len(descs), f"seed={seed}: {len(got)} verdicts for {len(descs)}"
    codes, fields, full = set(), set(), set()
    for d, (code, info) in zip(descs, got):
        want = G.check(cfg, d, dram_base=base, dram_limit=limit, element_ops=element_ops)
        codes.add(want[0])
        fields.add((want[0], want[1] & 0xFF))
        full.add(want[:2])
        assert (code, info) == want[:2], f"seed={seed} {d}: got {code:#x}/{info:#x}, want {want}"
    assert {G.E_OK, G.E_DESC, G.E_AP_ALIGN, G.E_AP_RANGE, G.E_AXI} <= codes, codes
    every = {(G.E_DESC, f) for f in (G.F_RESERVED, G.F_OP, G.F_SPACE, G.F_DTYPE, G.F_NUM,
                                       G.F_DIM0)}
    if not element_ops:
        every.add((G.E_DESC, G.F_ELEMWISE))
    else:                           # the element dtype rule, on both sides
        assert {(G.E_DESC, G.info_word(G.F_DTYPE, s)) for s in (0, 1)} <= full, seed
    every |= {(G.E_AP_ALIGN, f) for f in (G.F_ADDR_ALIGN, G.F_STRIDE_ALIGN, G.F_LANE)}
    every |= {(G.E_AP_RANGE, G.F_RANGE), (G.E_AXI, G.F_RANGE), (G.E_OK, 0)}
    if cfg.semaphores < 256:
        every.add((G.E_DESC, G.F_SEM))
    assert every <= fields, f"rules never exercised: {sorted(every - fields)}"


# --- segment walker ------------------------------------------------------------------------

def ref_segments(cfg, d, side, axi):
    """Segments of one side from the descriptor text: each row's words, cut at 256 words and
    (AXI) at 4 KiB pages."""
    W = cfg.sbuf_word_bytes
    es = G.ELEM_BYTES[G.DTYPES[d.src_dtype if side == 0 else d.dst_dtype]]
    sl = d.slots
    L = sl[0][0] * es
    base = d.src if side == 0 else d.dst
    out = []
    for i3 in range(sl[3][0]):
        for i2 in range(sl[2][0]):
            for i1 in range(sl[1][0]):
                a = base + sum(i * s[1 + side] for i, s in zip((i1, i2, i3), sl[1:]))
                w, last = a // W, (a + L - 1) // W
                first = True
                while w <= last:
                    n = min(last - w + 1, 256)
                    if axi:
                        n = min(n, (4096 - (w * W) % 4096) // W)
                    out.append((w, n, int(first), int(w + n - 1 == last), a % W,
                                (a + L) % W))
                    first = False
                    w += n
    return out


@pytest.mark.parametrize("name", ["small", "default"])
def test_walker_matches_reference(name, seed):
    from rtl.dma.walker import SegmentWalker
    cfg = {"small": SMALL, "default": DEFAULT}[name]
    rng = random.Random(seed)
    dut = SegmentWalker(cfg)
    bench = SimBench(dut)
    cases = []
    for j in range(40):
        big = j % 8 == 0
        d = random_copy(cfg, rng, dram_base=0, dram_limit=1 << 20,
                        max_bytes=20000 if big else 400, contiguous=big,
                        dram_span=(4096 - 64 * (j % 3), 1 << 20))
        side = rng.randrange(2)
        cases.append((d, side, rng.random() < 0.6))
    for d, side, axi in cases:
        want = ref_segments(cfg, d, side, axi)
        got = []
        es = G.ELEM_BYTES[G.DTYPES[d.src_dtype]]
        p_ready = rng.choice((1.0, 0.5))
        prng = random.Random(rng.randrange(1 << 30))

        async def job(ctx, d=d, side=side, axi=axi, want=want, got=got, es=es,
                      p_ready=p_ready, prng=prng):
            sl = d.slots
            ctx.set(dut.base, d.src if side == 0 else d.dst)
            ctx.set(dut.row_bytes, sl[0][0] * es)
            for k in range(3):
                ctx.set(dut.nums[k], sl[k + 1][0])
                ctx.set(dut.strides[k], sl[k + 1][1 + side])
            ctx.set(dut.axi, int(axi))
            ctx.set(dut.start, 1)
            await ctx.tick()
            ctx.set(dut.start, 0)
            limit = 4 * len(want) / p_ready + 20
            for _ in range(int(limit)):
                r = prng.random() < p_ready
                ctx.set(dut.seg.ready, int(r))
                if r and ctx.get(dut.seg.valid):
                    p = dut.seg.payload
                    got.append(tuple(ctx.get(x) for x in (p.word, p.count, p.first, p.last,
                                                          p.soff, p.eoff)))
                if not ctx.get(dut.busy):
                    break
                await ctx.tick()
            assert not ctx.get(dut.busy), f"seed={seed}: walker still busy after {limit} cycles"

        bench.run(job)
        assert got == want, f"seed={seed} {d} side={side} axi={axi}:\n{got[:6]}\n{want[:6]}"


def test_walker_full_rate(seed):
    """A contiguous side: one segment per cycle, a segment of 256 words where the page
    allows."""
    from rtl.dma.walker import SegmentWalker
    cfg = DEFAULT
    dut = SegmentWalker(cfg)
    bench = SimBench(dut)
    d = G.Descriptor(src=0, dst=0, dims=((4096, 4, 4), (3, 1 << 16, 1 << 16)))
    want = ref_segments(cfg, d, 0, True)
    cycles = []

    async def job(ctx):
        ctx.set(dut.base, 0)
        ctx.set(dut.row_bytes, 4096 * 4)
        ctx.set(dut.nums[0], 3)
        ctx.set(dut.nums[1], 1)
        ctx.set(dut.nums[2], 1)
        ctx.set(dut.strides[0], 1 << 16)
        ctx.set(dut.axi, 1)
        ctx.set(dut.seg.ready, 1)
        ctx.set(dut.start, 1)
        await ctx.tick()
        ctx.set(dut.start, 0)
        for c in range(200):
            if ctx.get(dut.seg.valid):
                cycles.append(c)
            if not ctx.get(dut.busy):
                break
            await ctx.tick()

    bench.run(job)
    assert len(cycles) == len(want) == 3 * (4096 * 4 // cfg.sbuf_word_bytes // 256)
    assert cycles == list(range(len(want)))


# --- semaphore file ------------------------------------------------------------------------

def test_semaphore_file(seed):
    """Increments from 3 sources and host additions/decrements, host sets, two read ports:
    against a sequential model (fairness bound, over/underflow -> E_SEM, the first kept)."""
    from rtl.core.semaphores import E_SEM, SemaphoreFile
    cfg = SMALL.replace(semaphore_bits=8)
    S = 3
    dut = SemaphoreFile(cfg, sources=S, readers=1)
    bench = SimBench(dut)
    rng = random.Random(seed)
    N, top = cfg.semaphores, (1 << 8) - 1
    log = {"err": None}
    srcs = list(dut.inc) + [dut.add]

    async def job(ctx):
        model = [0] * N
        pend = [None] * (S + 1)
        waits = [0] * (S + 1)
        # the clearing sweep after reset: nothing is taken, reads are 0
        for s in range(N):
            ctx.set(dut.add.valid, 1)
            ctx.set(dut.add.payload.sem, s)
            ctx.set(dut.add.payload.value, 1)
            ctx.set(dut.rd_sem, s)
            assert not ctx.get(dut.add.ready) and not ctx.get(dut.set.ready)
            await ctx.tick()
            assert ctx.get(dut.rd_data) == 0
        ctx.set(dut.add.valid, 0)
        for _ in range(700):
            for k, src in enumerate(srcs):
                if pend[k] is None and rng.random() < 0.5:
                    pend[k] = (rng.randrange(N), rng.randrange(0, 40),
                               k == S and rng.random() < 0.5)
                ctx.set(src.valid, int(pend[k] is not None))
                if pend[k] is not None:
                    ctx.set(src.payload.sem, pend[k][0])
                    if k == S:
                        ctx.set(src.payload.value, pend[k][1])
                        ctx.set(src.payload.dec, int(pend[k][2]))
                    else:
                        ctx.set(src.payload.inc, pend[k][1])
            do_set = rng.random() < 0.1
            sv = (rng.randrange(N), rng.randrange(0, top + 1))
            ctx.set(dut.set.valid, int(do_set))
            ctx.set(dut.set.payload.sem, sv[0])
            ctx.set(dut.set.payload.value, sv[1])
            ctx.set(dut.rd_sem, rng.randrange(N))
            ctx.set(dut.wait_sem[0], rng.randrange(N))
            taken = [ctx.get(src.ready) and pend[k] is not None for k, src in enumerate(srcs)]
            set_taken = do_set and ctx.get(dut.set.ready)
            await ctx.tick()
            for k in range(S + 1):
                if pend[k] is not None:
                    waits[k] = 0 if taken[k] else waits[k] + 1
                    assert waits[k] <= 2 * (S + 1) + 2, f"seed={seed}: source {k} starved"
            # a set and an increment taken in the same cycle: the set first (the increment's
            # read sees the set value through the transparent read port)
            if set_taken:
                model[sv[0]] = sv[1]
            for k in range(S + 1):
                if taken[k]:
                    s, i, dec = pend[k]
                    pend[k] = None
                    new = model[s] - i if dec else model[s] + i
                    if not 0 <= new <= top:
                        if log["err"] is None:
                            log["err"] = s
                    else:
                        model[s] = new
        # drain, then read every semaphore through both ports
        for src in srcs:
            ctx.set(src.valid, 0)
        ctx.set(dut.set.valid, 0)
        await ctx.tick()
        await ctx.tick()
        for s in range(N):
            ctx.set(dut.rd_sem, s)
            ctx.set(dut.wait_sem[0], N - 1 - s)
            await ctx.tick()
            assert ctx.get(dut.rd_data) == model[s], f"seed={seed} sem {s}"
            assert ctx.get(dut.wait_data[0]) == model[N - 1 - s], f"seed={seed} sem {N - 1 - s}"
        if log["err"] is not None:
            assert ctx.get(dut.err) and ctx.get(dut.err_code) == E_SEM
            assert ctx.get(dut.err_sem) == log["err"]
        else:
            assert not ctx.get(dut.err)

    bench.run(job)


@pytest.mark.parametrize("limit", [0, 40])
def test_watchdog_from_the_register(limit):
    """``DMAEngine(timeout=None)`` takes its AXI watchdog limit from the ``watchdog`` input (the
    core's WATCHDOG register): a DRAM read the slave never accepts stops the queue with
    E_TIMEOUT after that many idle cycles; 0 turns the watchdog off (still waiting 10 x later)."""
    from amaranth.sim import Simulator
    from golden.dma import DRAM, SBUF as SP_SBUF, Descriptor
    from rtl.dma.descriptor import E_TIMEOUT
    from rtl.dma.engine import DMAEngine
    cfg = get_preset("small")
    dut = DMAEngine(cfg, timeout=None)
    d = Descriptor(src=0x1000, dst=0, src_space=DRAM, dst_space=SP_SBUF,
                   dims=((8, 2, 2),), src_dtype=2, dst_dtype=2)
    out = {}

    async def bench(ctx):
        ctx.set(dut.dram_limit, 1 << 20)
        ctx.set(dut.watchdog, limit)
        ctx.set(dut.i.payload.desc.as_value(), d.to_int())
        ctx.set(dut.i.payload.queue, 1)
        ctx.set(dut.i.valid, 1)
        for t in range(10 * 40 + 100):
            took = ctx.get(dut.i.ready)
            if ctx.get(dut.q_code[1]) != 0:
                out["code"], out["t"] = ctx.get(dut.q_code[1]), t
                return
            await ctx.tick()
            if took:
                ctx.set(dut.i.valid, 0)
        out["busy"] = ctx.get(dut.busy)

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    if limit:
        assert out.get("code") == E_TIMEOUT and limit <= out["t"] <= limit + 30, out
    else:
        assert "code" not in out and out["busy"], out


def _golden_stream(descs, timing):
    from golden.asm import assemble
    from golden.isasim import IsaSim
    cfg = get_preset("small")
    dram = bytearray(1 << 15)
    for j, d in enumerate(descs):
        dram[64 * j:64 * (j + 1)] = d.pack()
    sim = IsaSim(cfg, dram_bytes=dram, timing=timing)
    assert sim.run({"sp": assemble(f"dma_start count={len(descs)} desc_addr=0")}) is None
    return cfg, [e for e in sim.timeline if e.op == "descriptor"]


def test_golden_dma_overlap():
    """The golden cycle model overlaps descriptors as the RTL does (docs/dma.md §4.1): a
    stream of DRAM -> SBUF copies pays the DRAM latency once, completes in order; an SBUF ->
    SBUF copy waits for the engine to be empty."""
    from golden.isasim import Timing
    tm = Timing(dram_latency=64)
    n = 1024
    copies = [G.Descriptor(src=0x2000 + j * n, dst=j * n, src_space=G.DRAM, dst_space=G.SBUF,
                           dims=((n // 4, 4, 4),)) for j in range(4)]
    cfg, evs = _golden_stream(copies, tm)
    beats = n // cfg.sbuf_word_bytes
    dones = [e.done for e in evs]
    assert dones == sorted(dones) and len(evs) == 4
    # the latency and the check are paid once, not per descriptor
    span = evs[-1].done - evs[0].start
    assert 4 * beats < span <= 4 * beats + tm.dma_desc_cycles + 64 + 4 * tm.dma_read_ahead + 8, \
        (span, dones)
    local = G.Descriptor(src=0, dst=8 * n, src_space=G.SBUF, dst_space=G.SBUF,
                         dims=((n // 4, 4, 4),))
    _, evs2 = _golden_stream(copies[:1] + [local], tm)
    assert evs2[1].done - beats >= evs2[0].done, [(e.start, e.done) for e in evs2]
