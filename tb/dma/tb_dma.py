# SPDX-License-Identifier: Apache-2.0
"""cocotb tests of the DMA engine (through ``tb.dma.harness``): random batches of legal and
malformed descriptors against ``golden.dma`` byte for byte under random AXI back-pressure,
read/write latency and SBUF arbitration losses; SLVERR/DECERR; semaphore overflow; reset in
the middle of a transfer. Parameters: ``seed``, ``batches`` (random batches), ``per_batch``."""

from __future__ import annotations

import random

import cocotb
from cocotb.triggers import ReadOnly, RisingEdge

from golden import dma as G
from tb.dma.driver import DMATB, golden_batch
from tb.dma.program import mutate_bad, random_copy, random_element


def _slots(tb, n):
    """``n`` disjoint destination slots in DRAM and in SBUF (second halves), sources in the
    first halves."""
    sbuf_n = tb.cfg.partitions * tb.cfg.sbuf_bytes_per_partition
    dlo, dhi = tb.dram_base + tb.dram_bytes // 2, tb.dram_limit
    slo, shi = sbuf_n // 2, sbuf_n
    ds, ss = (dhi - dlo) // n, (shi - slo) // n
    return ([(dlo + j * ds, dlo + (j + 1) * ds) for j in range(n)],
            [(slo + j * ss, slo + (j + 1) * ss) for j in range(n)],
            (tb.dram_base, dlo), (0, slo))


def random_batch(tb, rng, n, *, p_bad=0.3, max_bytes=256, p_elem=None, max_elems=16, **kw):
    """``n`` random descriptors on random queues, disjoint destinations; a fraction ``p_elem``
    (default 0.3 when the engine has the element path) element descriptors (random op, cast,
    rounding), those with stochastic rounding all on one queue (the stream order,
    :func:`~tb.dma.driver.golden_batch`)."""
    cfg = tb.cfg
    if p_elem is None:
        p_elem = 0.3 if cfg.dma_element_ops else 0.0
    dslots, sslots, dsrc, ssrc = _slots(tb, n)
    sr_q = rng.randrange(cfg.dma_queues)
    batch = []
    for j in range(n):
        q = rng.randrange(cfg.dma_queues)
        spans = dict(dram_base=tb.dram_base, dram_limit=tb.dram_limit, dram_span=dsrc,
                     sbuf_span=ssrc, dst_dram_span=dslots[j], dst_sbuf_span=sslots[j])
        if rng.random() < p_elem:
            d = random_element(cfg, rng, max_elems=max_elems, **spans,
                               **{k: v for k, v in kw.items() if k.endswith("_space")})
            if d.rounding == G.RND_SR:
                q = sr_q
        else:
            d = random_copy(cfg, rng, max_bytes=max_bytes, **spans, **kw)
        if rng.random() < p_bad:
            d = mutate_bad(cfg, rng, d, dram_base=tb.dram_base, dram_limit=tb.dram_limit)
        batch.append((q, d))
    return batch


async def check_batch(tb, mem, batch, what, *, golden_mem=None):
    """Run ``batch`` on the harness loaded with ``mem`` and compare everything with golden."""
    cfg = tb.cfg
    tb.load(mem)
    sems0 = await tb.read_sems()
    want = mem.copy() if golden_mem is None else golden_mem
    codes, done, sem = golden_batch(cfg, want, batch, rand=tb.sr)
    cp = int(tb.dut.completed.value)
    done0 = [(cp >> (16 * q)) & 0xFFFF for q in range(cfg.dma_queues)]
    out = await tb.run_batch(batch)
    listing = "\n".join(f"  q{q} {d}" for q, d in batch)
    delta = [(a - b) % (1 << 16) for a, b in zip(out["completed"], done0)]
    assert delta == done, tb.fail_text(what, f"completed {delta} want {done}\n{listing}")
    got_dram, got_sbuf = tb.read_dram(), tb.read_sbuf()
    for name, got, exp in (("DRAM", got_dram, bytes(want.dram)),
                           ("SBUF", got_sbuf, bytes(want.sbuf))):
        if got != exp:
            bad = [i for i in range(len(exp)) if got[i] != exp[i]]
            raise AssertionError(tb.fail_text(what, f"{name}: {len(bad)} bytes differ, first at "
                                              f"{bad[:8]} got {[got[i] for i in bad[:8]]} want "
                                              f"{[exp[i] for i in bad[:8]]}\n"
                                              + "\n".join(f"  q{q} {d}" for q, d in batch)))
    assert out["codes"] == codes, tb.fail_text(what, f"queue codes {out['codes']} want {codes}")
    assert bool(out["err"]) == any(c for c, _ in codes), tb.fail_text(what, "err line")
    sems1 = await tb.read_sems()
    for s in range(cfg.semaphores):
        exp = (sems0[s] + sem.get(s, 0)) % (1 << cfg.semaphore_bits)
        assert sems1[s] == exp, tb.fail_text(
            what, f"semaphore {s}: {sems1[s]} want {exp}; completed {out['completed']}, golden "
                  f"{done}\n" + "\n".join(f"  q{q} {d}" for q, d in batch))
    return out, codes, done


@cocotb.test()
async def test_random_batches(dut):
    tb = DMATB(dut)
    await tb.reset()
    rng = random.Random(tb.seed)
    batches = int(tb.params.get("batches", 6))
    per = int(tb.params.get("per_batch", 10))
    done_total = [0] * tb.cfg.dma_queues
    tb.start_monitor()
    for b in range(batches):
        stall = rng.choice((0, 0, 64, 160))
        bp = rng.choice((0.0, 0.0, 0.2, 0.5))
        rdl, bdl = rng.choice((0, 0, 5, 30)), rng.choice((0, 0, 5, 30))
        dut.sbuf_stall.value = stall
        dut.rd_delay.value = rdl
        dut.b_delay.value = bdl
        tb.set_backpressure(rng, bp)
        mem = tb.random_memory(rng)
        batch = random_batch(tb, rng, per, p_bad=0.25 if b % 2 else 0.0)
        what = f"batch {b} (sbuf_stall={stall} axi_pause={bp} rd_delay={rdl} b_delay={bdl})"
        out, codes, done = await check_batch(tb, mem, batch, what)
        tb.check_bursts(batch, what)
        for q in range(tb.cfg.dma_queues):
            done_total[q] += done[q]
        assert out["completed"] == [x % (1 << 16) for x in done_total], \
            tb.fail_text(what, f"completed {out['completed']} want {done_total}")
        await tb.clear_all()
        assert not int(dut.err.value), tb.fail_text(what, "err stays high after clear")
    assert tb.bursts_checked > batches, tb.fail_text("bursts", f"only {tb.bursts_checked} "
                                                                f"AXI bursts seen")
    tb.log.info(f"{tb.bursts_checked} AXI bursts checked, at most {tb.max_out} in flight")


@cocotb.test()
async def test_full_rate_copies(dut):
    """Long contiguous and 4-D copies in every direction, no back-pressure (the bench's case,
    checked for data)."""
    tb = DMATB(dut)
    await tb.reset()
    rng = random.Random(tb.seed + 1)
    for ss, ds in ((G.DRAM, G.SBUF), (G.SBUF, G.DRAM), (G.SBUF, G.SBUF), (G.DRAM, G.DRAM)):
        mem = tb.random_memory(rng)
        batch = random_batch(tb, rng, 2, p_bad=0.0, max_bytes=2048, src_space=ss,
                             dst_space=ds)
        await check_batch(tb, mem, batch, f"long copies {ss}->{ds}")


@cocotb.test()
async def test_axi_errors(dut):
    """SLVERR on a read and on a write (poisoned DRAM), DECERR forced on R and on B: the queue
    stops with E_AXI and the response in the detail, the other queues keep running, nothing is
    written outside the addressed ranges, the next descriptors of the stopped queue are
    dropped, clear restarts it."""
    tb = DMATB(dut)
    await tb.reset()
    rng = random.Random(tb.seed + 2)
    cfg = tb.cfg
    Q = cfg.dma_queues
    cases = ["slverr_r", "slverr_w", "decerr_r", "decerr_w"]
    if cfg.dma_element_ops:
        # element descriptors: an op reading a poisoned DRAM source, a cast writing a
        # poisoned DRAM destination (an op would read it first)
        cases += ["elem_slverr_r", "elem_slverr_w"]
    for case in cases:
        mem = tb.random_memory(rng)
        dslots, sslots, dsrc, ssrc = _slots(tb, 4)
        read_side = case.endswith("_r")
        # the faulty descriptor: DRAM -> SBUF (read error) or SBUF -> DRAM (write error)
        spaces = dict(src_space=G.DRAM if read_side else G.SBUF,
                      dst_space=G.SBUF if read_side else G.DRAM, dram_span=dsrc,
                      sbuf_span=ssrc, dst_dram_span=dslots[0], dst_sbuf_span=sslots[0])
        if case.startswith("elem"):
            bad = random_element(cfg, rng, dram_base=tb.dram_base, dram_limit=tb.dram_limit,
                                 sr=False, ops=None if read_side else (G.OP_COPY,), **spaces)
        else:
            bad = random_copy(cfg, rng, dram_base=tb.dram_base, dram_limit=tb.dram_limit,
                              max_bytes=128, **spaces)
        q_bad = rng.randrange(Q)
        good = [random_copy(cfg, rng, dram_base=tb.dram_base, dram_limit=tb.dram_limit,
                            src_space=G.SBUF, dst_space=G.SBUF, sbuf_span=ssrc,
                            dst_sbuf_span=sslots[j], max_bytes=128) for j in (1, 2)]
        q_good = (q_bad + 1) % Q
        if case in ("slverr_w", "decerr_r"):
            # a malformed descriptor behind the faulty one in its queue: checked (and
            # rejected) while the faulty one still runs, yet the queue reports the faulty one's
            # E_AXI, the first error in queue order
            good[1] = G.Descriptor(**{**good[1].__dict__, "op": 9})
        batch = [(q_bad, bad), (q_good, good[0]), (q_bad, good[1])]
        if Q == 1:
            batch = batch[:1]
        side = 0 if read_side else 1
        lo, hi = G.extent(bad, side)
        if "slverr" in case:
            tb.poison = [(lo, hi + 1)]
        else:
            (dut.force_rresp if read_side else dut.force_bresp).value = 3
        tb.load(mem)
        want = mem.copy()
        # golden: the faulty descriptor runs to its end (data of failed reads is whatever the
        # slave returned), so its destination range is excluded from the comparison
        G.run(cfg, bad, want, element_ops=cfg.dma_element_ops)
        if Q > 1:
            G.run(cfg, good[0], want)
        out = await tb.run_batch(batch)
        tb.poison = []
        dut.force_rresp.value = 0
        dut.force_bresp.value = 0
        dlo, dhi = G.extent(bad, 1)
        got_d, got_s = tb.read_dram(), tb.read_sbuf()
        for name, got, exp, base, sp in (("DRAM", got_d, bytes(want.dram), tb.dram_base, G.DRAM),
                                         ("SBUF", got_s, bytes(want.sbuf), 0, G.SBUF)):
            diff = [i + base for i in range(len(exp)) if got[i] != exp[i]]
            outside = [a for a in diff if not (bad.dst_space == sp and dlo <= a <= dhi)]
            assert not outside, tb.fail_text(case, f"{name} bytes changed outside the faulty "
                                                   f"destination: {outside[:8]}")
        code, info = out["codes"][q_bad]
        resp = 3 if case.startswith("decerr") else 2
        field = G.F_RRESP if read_side else G.F_BRESP
        assert code == G.E_AXI and info & 0xFF == field and (info >> 12) & 3 == resp, \
            tb.fail_text(case, f"queue {q_bad}: code {code:#x} info {info:#x}")
        assert out["err"], tb.fail_text(case, "err line low")
        if Q > 1:
            assert out["codes"][q_good] == (0, 0), tb.fail_text(case, "good queue stopped")
        await tb.clear_all()
        # the cleared queue runs again
        mem2 = tb.random_memory(rng)
        d2 = random_copy(cfg, rng, dram_base=tb.dram_base, dram_limit=tb.dram_limit,
                         dram_span=dsrc, sbuf_span=ssrc, dst_dram_span=dslots[3],
                         dst_sbuf_span=sslots[3], max_bytes=128)
        await check_batch(tb, mem2, [(q_bad, d2)], f"{case}: after clear")


@cocotb.test()
async def test_axi_timeout(dut):
    """A slave that never answers: R (read case) or B (write case) held back forever. The
    watchdog gives the descriptor up after ``TIMEOUT_CYCLES`` cycles without movement (not
    earlier): its queue stops with E_TIMEOUT and the waiting side in the detail, ``err`` rises,
    the engine goes idle (never hangs) with every AXI valid low, SBUF -> SBUF work of another
    queue still runs and a later DRAM descriptor is refused with E_TIMEOUT | TIMEOUT_LATER
    (nothing written); reset revives the bus."""
    import itertools

    from rtl.dma.engine import TIMEOUT_CYCLES, TIMEOUT_LATER
    tb = DMATB(dut)
    cfg = tb.cfg
    Q = cfg.dma_queues
    rng = random.Random(tb.seed + 5)
    for case in ("read", "write"):
        await tb.reset()
        tb.set_backpressure(rng, 0.0)
        mem = tb.random_memory(rng)
        dslots, sslots, dsrc, ssrc = _slots(tb, 3)
        read_side = case == "read"
        stuck = random_copy(cfg, rng, dram_base=tb.dram_base, dram_limit=tb.dram_limit,
                            src_space=G.DRAM if read_side else G.SBUF,
                            dst_space=G.SBUF if read_side else G.DRAM, dram_span=dsrc,
                            sbuf_span=ssrc, dst_dram_span=dslots[0], dst_sbuf_span=sslots[0],
                            max_bytes=128)
        local = random_copy(cfg, rng, dram_base=tb.dram_base, dram_limit=tb.dram_limit,
                            src_space=G.SBUF, dst_space=G.SBUF, sbuf_span=ssrc,
                            dst_sbuf_span=sslots[1], max_bytes=128)
        later = random_copy(cfg, rng, dram_base=tb.dram_base, dram_limit=tb.dram_limit,
                            src_space=G.DRAM, dst_space=G.SBUF, dram_span=dsrc,
                            dst_sbuf_span=sslots[2], max_bytes=128)
        batch = [(0, stuck), (1 % Q, local), (2 % Q, later)] if Q > 2 else [(0, stuck)]
        ch = tb.ram.read_if.r_channel if read_side else tb.ram.write_if.b_channel
        ch.set_pause_generator(itertools.repeat(True))
        tb.load(mem)
        want = mem.copy()
        if not read_side:
            # the W beats the slave took may have landed (AxiRam stops taking bursts once its
            # B queue is full): the destination range is excluded from the DRAM comparison
            G.run(cfg, stuck, want)
        if Q > 2:
            G.run(cfg, local, want)
        out = await tb.run_batch(batch, timeout=TIMEOUT_CYCLES + 3000)
        ch.set_pause_generator(None)
        ch.pause = False
        await ReadOnly()
        for sig in ("axi__arvalid", "axi__awvalid", "axi__wvalid"):
            assert not int(getattr(dut, sig).value), tb.fail_text(case, f"{sig} high after "
                                                                        f"the timeout")
        assert TIMEOUT_CYCLES <= out["cycles"] <= TIMEOUT_CYCLES + 400, tb.fail_text(
            case, f"done after {out['cycles']} cycles, watchdog {TIMEOUT_CYCLES}")
        code, info = out["codes"][0]
        assert code == G.E_TIMEOUT and info == G.F_TIMEOUT | ((0 if read_side else 1) << 8), \
            tb.fail_text(case, f"queue 0: code {code:#x} info {info:#x}")
        assert out["err"], tb.fail_text(case, "err line low")
        if Q > 2:
            assert out["codes"][1] == (0, 0) and out["completed"][1] >= 1, \
                tb.fail_text(case, f"SBUF->SBUF queue: {out['codes'][1]}")
            assert out["codes"][2] == (G.E_TIMEOUT, G.F_TIMEOUT | TIMEOUT_LATER), \
                tb.fail_text(case, f"later DRAM descriptor: {out['codes'][2]}")
        await RisingEdge(dut.clk)
        got_d, got_s = tb.read_dram(), tb.read_sbuf()
        assert got_s == bytes(want.sbuf), tb.fail_text(case, "SBUF differs from golden")
        dlo, dhi = G.extent(stuck, 1) if not read_side else (0, -1)
        diff = [i + tb.dram_base for i in range(len(got_d)) if got_d[i] != want.dram[i]]
        outside = [a for a in diff if not dlo <= a <= dhi]
        assert not outside, tb.fail_text(case, f"DRAM differs from golden at {outside[:8]}")
    # reset revives the bus
    await tb.reset()
    await tb.clear_all()
    dslots, sslots, dsrc, ssrc = _slots(tb, 2)
    mem2 = tb.random_memory(rng)
    d2 = random_copy(cfg, rng, dram_base=tb.dram_base, dram_limit=tb.dram_limit,
                     src_space=G.DRAM, dst_space=G.SBUF, dram_span=dsrc,
                     dst_sbuf_span=sslots[0], max_bytes=128)
    await check_batch(tb, mem2, [(0, d2)], "after the timeout and a reset")


@cocotb.test()
async def test_semaphore_overflow(dut):
    tb = DMATB(dut)
    await tb.reset()
    cfg = tb.cfg
    top = (1 << cfg.semaphore_bits) - 1
    dut.sem_set_valid.value = 1
    dut.sem_set_sem.value = 3
    dut.sem_set_value.value = top - 1
    await RisingEdge(dut.clk)
    dut.sem_set_valid.value = 0
    d = G.Descriptor(src=0, dst=64, src_space=G.SBUF, dst_space=G.SBUF, dims=((4, 4, 4),),
                     post=True, sem=3, inc=1)
    mem = tb.random_memory(random.Random(tb.seed + 3))
    tb.load(mem)
    await tb.run_batch([(0, d)])
    await ReadOnly()
    assert not int(dut.sem_err.value), tb.fail_text("sem", "E_SEM below the top")
    await RisingEdge(dut.clk)
    await tb.run_batch([(0, G.Descriptor(**{**d.__dict__, "inc": 2}))])
    for _ in range(4):
        await RisingEdge(dut.clk)
    await ReadOnly()
    assert int(dut.sem_err.value) and int(dut.sem_err_code.value) == G.E_SEM \
        and int(dut.sem_err_sem.value) == 3, tb.fail_text("sem", "no E_SEM on overflow")
    await RisingEdge(dut.clk)
    vals = await tb.read_sems()
    assert vals[3] == top, tb.fail_text("sem", f"semaphore 3 = {vals[3]}, want {top} (kept)")


@cocotb.test()
async def test_reset_mid_transfer(dut):
    """Reset while long transfers run in both directions: afterwards no AXI valid is high, the
    engine is idle and ready, and a new batch runs correctly."""
    tb = DMATB(dut)
    await tb.reset()
    rng = random.Random(tb.seed + 4)
    for k, cut in enumerate((5, 40, 130)):
        mem = tb.random_memory(rng)
        tb.load(mem)
        dut.rd_delay.value = 10
        tb.set_backpressure(rng, 0.3)
        batch = random_batch(tb, rng, 3, p_bad=0.0, max_bytes=1024)
        dm = dut.desc_mem
        for j, (q, d) in enumerate(batch):
            dm[j].value = (q << 512) | d.to_int()
        dut.n_desc.value = len(batch)
        dut.start.value = 1
        await RisingEdge(dut.clk)
        dut.start.value = 0
        for _ in range(cut):
            await RisingEdge(dut.clk)
        await tb.reset()
        await ReadOnly()
        for s in ("axi__arvalid", "axi__awvalid", "axi__wvalid"):
            assert not int(getattr(dut, s).value), tb.fail_text(f"reset {k}", f"{s} high")
        assert not int(dut.busy.value) and not int(dut.err.value), \
            tb.fail_text(f"reset {k}", "engine busy or in error after reset")
        await RisingEdge(dut.clk)
        tb.set_backpressure(rng, 0.0)
        dut.rd_delay.value = 0
        mem2 = tb.random_memory(rng)
        await check_batch(tb, mem2, random_batch(tb, rng, 4, p_bad=0.0), f"after reset {k}")


@cocotb.test()
async def test_element_ops(dut):
    """Element descriptors only (random ops, casts, RNE and SR, 1-4 dims, negative strides) in
    each of the four directions, then mixed batches with malformed ones, under random AXI
    pauses and latency and SBUF arbitration losses: DRAM and SBUF byte for byte against
    ``golden.dma.run`` with the engine's SR stream."""
    tb = DMATB(dut)
    if not tb.cfg.dma_element_ops:
        return
    await tb.reset()
    rng = random.Random(tb.seed + 5)
    rounds = int(tb.params.get("element_rounds", 1))
    seen = set()
    for r in range(rounds):
        for ss, ds in ((G.DRAM, G.SBUF), (G.SBUF, G.DRAM), (G.SBUF, G.SBUF), (G.DRAM, G.DRAM)):
            dut.sbuf_stall.value = rng.choice((0, 64))
            dut.rd_delay.value = rng.choice((0, 7))
            dut.b_delay.value = rng.choice((0, 7))
            tb.set_backpressure(rng, rng.choice((0.0, 0.3)))
            mem = tb.random_memory(rng)
            batch = random_batch(tb, rng, 4, p_bad=0.0, p_elem=1.0, src_space=ss,
                                 dst_space=ds)
            seen |= {(d.op, d.rounding) for _, d in batch}
            await check_batch(tb, mem, batch, f"element round {r} {ss}->{ds}")
        mem = tb.random_memory(rng)
        batch = random_batch(tb, rng, 6, p_bad=0.3, p_elem=0.7)
        await check_batch(tb, mem, batch, f"element round {r} mixed")
        await tb.clear_all()
    tb.set_backpressure(rng, 0.0)
    tb.log.info(f"element (op, rounding) pairs seen: {sorted(seen)}")


def _copy(src, dst, ss, ds, nbytes, **kw):
    """A contiguous copy of ``nbytes`` (4-byte elements)."""
    return G.Descriptor(src=src, dst=dst, src_space=ss, dst_space=ds,
                        dims=((nbytes // 4, 4, 4),), **kw)


async def _watch_err(tb, q, log):
    """Append ``completed[q]`` of the first cycle ``err`` is high to ``log``."""
    dut = tb.dut
    while True:
        await RisingEdge(dut.clk)
        await ReadOnly()
        if int(dut.err.value):
            log.append((int(dut.completed.value) >> (16 * q)) & 0xFFFF)
            return


@cocotb.test()
async def test_overlap_faults(dut):
    """Errors with descriptors in flight together (docs/dma.md §4.1): a descriptor that fails
    its check behind a running one stops its queue only after that one completed and writes
    nothing; a read error in a descriptor read ahead is its own (code, detail), the one before
    it completes; a write error in a descriptor whose successor on the queue already runs
    stops the queue with the first one's error and the successor neither completes nor posts;
    another queue keeps running; the queue's later descriptors are dropped."""
    tb = DMATB(dut, dram_bytes=0x8000)
    await tb.reset()
    cfg = tb.cfg
    Q = cfg.dma_queues
    rng = random.Random(tb.seed + 7)
    W = cfg.sbuf_word_bytes
    n = 64 * W                                          # 64 beats per descriptor
    dsrc, dd = tb.dram_base, tb.dram_base + tb.dram_bytes // 2
    sbuf_n = cfg.partitions * cfg.sbuf_bytes_per_partition
    ssrc, sd = 0, sbuf_n // 2
    q, q2 = rng.randrange(Q), None
    if Q > 1:
        q2 = (q + 1) % Q
    for case in ("check", "read", "write"):
        await tb.clear_all()
        dut.rd_delay.value = 32 if case != "write" else 0
        dut.b_delay.value = 32 if case == "write" else 0
        mem = tb.random_memory(rng)
        bad_dst = None
        if case == "check":
            first = _copy(dsrc, sd, G.DRAM, G.SBUF, n)
            ok = _copy(dsrc + n, sd + n, G.DRAM, G.SBUF, n)
            bad = mutate_bad(cfg, rng, ok, dram_base=tb.dram_base, dram_limit=tb.dram_limit)
            code, info, _ = G.check(cfg, bad, dram_base=tb.dram_base, dram_limit=tb.dram_limit,
                                    element_ops=cfg.dma_element_ops)
            assert code, "mutate_bad gave a legal descriptor"
            expect = (code, info)
            done_q = 1
        elif case == "read":
            first = _copy(dsrc, sd, G.DRAM, G.SBUF, n)
            bad = _copy(dsrc + n, sd + n, G.DRAM, G.SBUF, n)
            tb.poison = [(dsrc + n + W, dsrc + n + 2 * W)]
            bad_dst = G.extent(bad, 1)
            expect = (G.E_AXI, G.F_RRESP | (2 << 12))
            done_q = 1
        else:
            first = _copy(ssrc, dd, G.SBUF, G.DRAM, n)
            bad = _copy(ssrc + n, dd + n, G.SBUF, G.DRAM, n, post=1, sem=1, inc=1)
            tb.poison = [(dd + W, dd + 2 * W)]
            # the first one's write error comes after its successor began writing: both
            # destinations are excluded from the comparison (docs/dma.md §4.1)
            bad_dst = (dd, dd + 2 * n - 1)
            expect = (G.E_AXI, G.F_BRESP | (1 << 8) | (2 << 12))
            done_q = 0
        later = _copy(ssrc + 2 * n, sd + 2 * n, G.SBUF, G.SBUF, n, post=1, sem=2, inc=1)
        batch = [(q, first), (q, bad), (q, later)]
        other = _copy(dsrc + 3 * n, sd + 3 * n, G.DRAM, G.SBUF, n, post=1, sem=3, inc=1)
        if q2 is not None:
            batch.append((q2, other))
        tb.load(mem)
        sems0 = await tb.read_sems()
        want = mem.copy()
        if case != "write":
            G.run(cfg, first, want)
        if q2 is not None:
            G.run(cfg, other, want)
        log = []
        watch = cocotb.start_soon(_watch_err(tb, q, log))
        cp0 = (int(dut.completed.value) >> (16 * q)) & 0xFFFF
        out = await tb.run_batch(batch)
        watch.cancel()
        tb.poison = []
        what = f"{case} (queue {q})"
        assert out["codes"][q] == expect, tb.fail_text(
            what, f"code/info {out['codes'][q]}, want {expect}")
        assert (out["completed"][q] - cp0) % (1 << 16) == done_q, tb.fail_text(
            what, f"completed {out['completed'][q] - cp0}, want {done_q}")
        assert log and (log[0] - cp0) % (1 << 16) == done_q, tb.fail_text(
            what, f"err rose with {log} completed (from {cp0}), want {done_q}: the queue "
                  f"stopped before the descriptor ahead of the failing one completed")
        if q2 is not None:
            assert out["codes"][q2] == (0, 0), tb.fail_text(what, "other queue stopped")
        got = {G.DRAM: tb.read_dram(), G.SBUF: tb.read_sbuf()}
        for sp, exp, base in ((G.DRAM, bytes(want.dram), tb.dram_base),
                              (G.SBUF, bytes(want.sbuf), 0)):
            lo, hi = bad_dst if bad_dst is not None and bad.dst_space == sp else (0, -1)
            diff = [i + base for i in range(len(exp)) if got[sp][i] != exp[i]
                    and not lo <= i + base <= hi]
            assert not diff, tb.fail_text(what, f"{len(diff)} bytes differ from golden, "
                                                f"first at {diff[:8]}")
        sems1 = await tb.read_sems()
        want_inc = {3: 1} if q2 is not None else {}
        for s in (1, 2, 3):
            assert (sems1[s] - sems0[s]) % (1 << cfg.semaphore_bits) == want_inc.get(s, 0), \
                tb.fail_text(what, f"semaphore {s}: {sems0[s]} -> {sems1[s]}")
    dut.rd_delay.value = 0
    dut.b_delay.value = 0
    await tb.clear_all()
