# SPDX-License-Identifier: Apache-2.0
"""The tensor decoder and the sync engine in amaranth.sim (small preset): every check of
docs/isa.md §6 against statuses written here from the document, the command fields a good
instruction produces, overlapped completion at dispatch (after idle for posts), and the sync engine's
descriptor reads and queueing against a DRAM model."""

import random

from amaranth.sim import Simulator

from golden.asm import parse_instr
from rtl import isa
from rtl.config import get_preset
from rtl.core.sync_engine import E_AXI, E_DESC, SyncEngine
from rtl.core.tensor_decode import (E_AP_FORM, E_FLAGS, E_FORMAT, E_SHAPE, E_SPARSE_TAG,
                                   TensorDecoder)
from rtl.tensor.layouts import OP_LOAD, OP_MATMUL, OP_TRANSPOSE, TensorLayouts

CFG = get_preset("small")
K, M = CFG.pe_rows, CFG.pe_cols
BANK = CFG.psum_bank_bytes
TL = TensorLayouts(CFG)


def _raw(text):
    return int.from_bytes(isa.encode(parse_instr(text)), "little")


def run_decoder(texts, *, busy_cycles=5, err=None, disp_delay=2, p_ready=1.0, seed=0,
                stats=None, first_bad=0):
    """Stream ``texts`` into the decoder (one per cycle as far as it takes them) over a model
    engine; returns ``[(status, cmd or None)]`` in completion order.

    The model takes a command when ``p_ready`` allows and its 4-deep queue has room,
    dispatches the queue head ``disp_delay`` cycles after taking it (``eng_disp``), and stays
    busy ``busy_cycles`` after each dispatch; a matmul or transpose it takes (not rejected)
    raises ``eng_op_issue`` with its dispatch and ``eng_op_done`` ``busy_cycles`` later (one
    per cycle, in order). ``err`` = ``(ap_code or None, engine code or
    None)``: every dispatch from the ``first_bad``-th on is rejected with it (the reader's
    code, or the engine's, whose ``err_code`` is sticky from the next cycle). Checked on every
    completion: it comes after its own command's dispatch, in order; a matmul or transpose
    with a post or an interrupt completes only after its own ``eng_op_done``, a load with
    one only when the engine is idle."""
    dut = TensorDecoder(CFG)
    rng = random.Random(seed)
    out = []

    async def bench(ctx):
        cmds, queue, dispatched = [], [], 0
        busy_until, pending = -1, list(texts)
        op_of = {}                              # command index -> its operation's number
        op_due, n_done = [], 0                  # op_done cycles pending; ops done
        taken = []                              # (text, command index or None) in order
        ctx.set(dut.done.ready, 1)
        for now in range(200 + 40 * len(texts)):
            if pending:
                ctx.set(dut.issue.payload.raw, _raw(pending[0]))
            ctx.set(dut.issue.valid, bool(pending))
            ctx.set(dut.cmd.ready, len(queue) < 4 and rng.random() < p_ready)
            disp = bool(queue) and now - queue[0] >= disp_delay
            ctx.set(dut.eng_disp, disp)
            bad = disp and bool(err) and dispatched >= first_bad
            ctx.set(dut.eng_disp_code, (err[0] or 0) if bad and err[0] else 0)
            ctx.set(dut.eng_disp_reject, bad and err[1] is not None)
            is_op = disp and not bad and cmds[dispatched]["op"] in (OP_MATMUL, OP_TRANSPOSE)
            ctx.set(dut.eng_op_issue, is_op)
            if is_op:
                op_of[dispatched] = len(op_of)
                op_due.append(max(now + busy_cycles, op_due[-1] + 1 if op_due else 0))
            op_done = bool(op_due) and op_due[0] == now
            ctx.set(dut.eng_op_done, op_done)
            busy = bool(queue) or now <= busy_until or bool(op_due)
            ctx.set(dut.eng_busy, busy)
            if ctx.get(dut.done.valid):
                status = ctx.get(dut.done.payload.status)
                text, ci = taken[len(out)]
                if ci is not None:
                    assert ci < dispatched, f"{text!r} completed before its dispatch"
                if status == 0 and ("post=" in text or " irq" in text):
                    if ci in op_of:
                        assert op_of[ci] < n_done, f"{text!r} posted before its op was done"
                    else:
                        assert not busy, f"{text!r} posted while the engine was busy"
                    if stats is not None and busy:
                        stats["posted_busy"] = stats.get("posted_busy", 0) + 1
                out.append((status, cmds[ci] if ci is not None else None))
                if stats is not None:
                    stats["while_busy"] = stats.get("while_busy", 0) + busy
                    stats["cycles"] = now
            if ctx.get(dut.cmd.valid) and ctx.get(dut.cmd.ready):
                c = ctx.get(dut.cmd.payload)
                cmds.append({"op": c.cmd.op, "fmt": c.cmd.fmt, "k": c.cmd.k, "m": c.cmd.m,
                             "n": c.cmd.n, "bank": c.cmd.bank, "acc": c.cmd.acc,
                             "ap_count": c.ap.count, "ap_offset": c.ap.offset,
                             "ap_esize": c.ap.esize, "sp": c.cmd.sp if TL.sparse else 0})
                queue.append(now)
            if ctx.get(dut.issue.valid) and ctx.get(dut.issue.ready):
                fired = ctx.get(dut.cmd.valid) and ctx.get(dut.cmd.ready)
                taken.append((pending.pop(0), len(cmds) - 1 if fired else None))
            if disp:
                queue.pop(0)
                dispatched += 1
                busy_until = now + busy_cycles
            if op_done:
                op_due.pop(0)
                n_done += 1
            await ctx.tick()
            if err is not None and dispatched > first_bad:
                ctx.set(dut.eng_err, err[1] is not None)
                ctx.set(dut.eng_err_code, err[1] or 0)
            if len(out) == len(texts):
                return
        raise AssertionError(f"{len(out)} of {len(texts)} instructions completed "
                             f"(seed {seed})")

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    return out


LOAD = f"load_stationary ap1=sbuf.bf16[0:{K}]@0x20{{1x{M}}}"
MM = f"multiply_moving ap0=psum.fp32[0:{M}]@0x{BANK:x}{{1x6}} ap1=sbuf.bf16[0:{K}]@0x40{{1x6}}"


def test_good_instructions_make_the_commands():
    out = run_decoder([LOAD, MM, MM.replace("multiply_moving", "multiply_moving.acc"),
                       f"transpose ap0=psum.fp32[0:{M}]@0x{2 * BANK:x}{{1x{K}}}"])
    bf16 = [f.name for f in TL.pe_formats].index("bf16")
    assert [s for s, _ in out] == [0, 0, 0, 0]
    (_, ld), (_, mm), (_, acc), (_, tp) = out
    assert ld["op"] == OP_LOAD and (ld["k"], ld["m"], ld["fmt"]) == (K, M, bf16)
    assert (ld["ap_count"], ld["ap_offset"], ld["ap_esize"]) == (K, 0x20, 1)
    assert mm["op"] == OP_MATMUL and (mm["k"], mm["n"], mm["bank"], mm["acc"]) == (K, 6, 1, 0)
    assert acc["acc"] == 1
    assert tp["op"] == OP_TRANSPOSE and (tp["k"], tp["n"], tp["bank"]) == (K, K, 2)


def test_every_check():
    NB = CFG.psum_bank_fp32
    p = f"psum.fp32[0:{M}]@0x{BANK:x}{{1x6}}"
    x = f"sbuf.bf16[0:{K}]@0x40{{1x6}}"
    cases = [
        (f"load_stationary.mx ap1=sbuf.bf16[0:{K}]@0x0{{1x{M}}}", E_FLAGS),
        (f"load_stationary ap1=sbuf.fp4_e2m1[0:{K}]@0x0{{1x{M}}}", E_FORMAT),
        (f"load_stationary ap1=sbuf.e8m0[0:{K}]@0x0{{1x{M}}}", E_FORMAT),
        (f"load_stationary ap1=sbuf.bf16[1:{K - 1}]@0x0{{1x{M}}}", E_SHAPE),
        (f"load_stationary ap1=sbuf.bf16[0:{K + 1}]@0x0{{1x{M}}}", E_SHAPE),
        (f"load_stationary ap1=sbuf.bf16[0:{K}]@0x0{{1x{M + 1}}}", E_SHAPE),
        (f"load_stationary ap1=psum.bf16[0:{K}]@0x0{{1x{M}}}", E_SHAPE),
        (f"multiply_moving.mx ap0={p} ap1={x}", E_FLAGS),
        (f"multiply_moving ap0={p.replace('fp32', 'bf16')} ap1={x}", E_SHAPE),
        (f"multiply_moving ap0={p.replace('1x6', '1x5')} ap1={x}", E_SHAPE),
        (f"multiply_moving ap0={p.replace('1x6', '2x6')} ap1={x}", E_SHAPE),
        (f"multiply_moving ap0={p.replace('1x6', '1x6,1x1')} ap1={x}", E_SHAPE),
        (f"multiply_moving ap0=psum.fp32[0:{M}]@0x{BANK + 4:x}{{1x6}} ap1={x}", E_SHAPE),
        (f"multiply_moving ap0=psum.fp32[0:{M}]@0x{BANK * CFG.psum_banks:x}{{1x6}} ap1={x}",
         E_SHAPE),
        (f"multiply_moving ap0=psum.fp32[0:{M - 1}]@0x{BANK:x}{{1x6}} ap1={x}", E_SHAPE),
        (f"multiply_moving ap0=sbuf.fp32[0:{M}]@0x{BANK:x}{{1x6}} ap1={x}", E_SHAPE),
        # more moving columns than a PSUM bank holds (the PSUM AP itself is well formed)
        (f"multiply_moving ap0=psum.fp32[0:{M}]@0x{BANK:x}{{1x{NB + 1}}} "
         f"ap1=sbuf.bf16[0:{K}]@0x40{{1x{NB + 1}}}", E_SHAPE),
    ]
    if CFG.ap_dims < 4:
        cases.append((f"load_stationary ap1=sbuf.bf16[0:{K}]@0x0{{1x{M},1x1,1x1,1x1}}",
                      E_AP_FORM))
    texts = [LOAD]
    for t, _ in cases:
        texts += [t]
    out = run_decoder(texts)
    assert out[0] == (0, out[0][1])
    for (t, want), (got, cmd) in zip(cases, out[1:]):
        assert got == want and cmd is None, (t, got, want)


def test_sparse_flag_commands_and_checks():
    """The sparse flag (docs/isa.md §6): an enabled sp_n:sp_m becomes the command's sp (its
    index + 1); a sparse load reads (value, tag) pairs (esize one up: 2 bytes for fp8, 4 for
    bf16), a sparse matmul 32-bit lanes (esize 2) whatever its dtype; a pattern the config
    does not enable is E_SPARSE_TAG, a 32-bit sparse load E_FORMAT, mx still E_FLAGS."""
    assert TL.sparse and "4:16" in CFG.sparsity and "2:4" in CFG.sparsity
    sp416, sp24 = TL.sp_index("4:16"), TL.sp_index("2:4")
    p = f"psum.fp32[0:{M}]@0x{BANK:x}{{1x6}}"
    good = [f"load_stationary.sparse ap1=sbuf.fp8_e4m3[0:{K}]@0x20{{1x{M}}} sp_n=4 sp_m=16",
            f"multiply_moving.sparse.acc ap0={p} ap1=sbuf.fp8_e4m3[0:{K}]@0x40{{1x6}} "
            f"sp_n=4 sp_m=16",
            f"load_stationary.sparse ap1=sbuf.bf16[0:{K}]@0x20{{1x{M}}} sp_n=2 sp_m=4",
            f"multiply_moving.sparse ap0={p} ap1=sbuf.bf16[0:{K}]@0x40{{1x6}} sp_n=2 sp_m=4",
            f"load_stationary ap1=sbuf.bf16[0:{K}]@0x20{{1x{M}}} sp_n=2 sp_m=4"]
    out = run_decoder(good)
    assert [s for s, _ in out] == [0] * 5
    c = [cmd for _, cmd in out]
    assert (c[0]["op"], c[0]["sp"], c[0]["ap_esize"], c[0]["m"]) == (OP_LOAD, sp416, 1, M)
    assert (c[1]["op"], c[1]["sp"], c[1]["ap_esize"], c[1]["acc"]) == (OP_MATMUL, sp416, 2, 1)
    assert (c[2]["sp"], c[2]["ap_esize"]) == (sp24, 2)
    assert (c[3]["sp"], c[3]["ap_esize"]) == (sp24, 2)
    assert (c[4]["sp"], c[4]["ap_esize"]) == (0, 1)         # no flag: dense, sp_n ignored
    bad = [(f"load_stationary.sparse ap1=sbuf.bf16[0:{K}]@0x0{{1x{M}}} sp_n=3 sp_m=4",
            E_SPARSE_TAG),
           (f"load_stationary.sparse ap1=sbuf.bf16[0:{K}]@0x0{{1x{M}}} sp_n=4 sp_m=4",
            E_SPARSE_TAG),
           (f"load_stationary.sparse ap1=sbuf.fp32[0:{K}]@0x0{{1x{M}}} sp_n=2 sp_m=4", E_FORMAT),
           (f"load_stationary.sparse ap1=sbuf.tf32[0:{K}]@0x0{{1x{M}}} sp_n=2 sp_m=4", E_FORMAT),
           (f"load_stationary.sparse.mx ap1=sbuf.bf16[0:{K}]@0x0{{1x{M}}} sp_n=2 sp_m=4",
            E_FLAGS),
           (f"multiply_moving.sparse ap0={p} ap1=sbuf.fp8_e4m3[0:{K}]@0x40{{1x6}} sp_n=2 "
            f"sp_m=16", E_SPARSE_TAG),
           (f"multiply_moving.sparse ap0={p} ap1=sbuf.fp8_e4m3[0:{K}]@0x40{{1x7}} sp_n=4 "
            f"sp_m=16", E_SHAPE)]
    out = run_decoder([good[0]] + [t for t, _ in bad])
    for (t, want), (got, cmd) in zip(bad, out[1:]):
        assert got == want and cmd is None, (t, got, want)


def test_sparse_flag_without_sparsity_hardware_is_e_flags():
    cfg = CFG.replace(sparse_patterns=())
    dut = TensorDecoder(cfg)
    text = f"load_stationary.sparse ap1=sbuf.fp8_e4m3[0:{K}]@0x0{{1x{M}}} sp_n=4 sp_m=16"

    async def bench(ctx):
        ctx.set(dut.done.ready, 1)
        ctx.set(dut.issue.payload.raw, _raw(text))
        ctx.set(dut.issue.valid, 1)
        for _ in range(20):
            if ctx.get(dut.done.valid):
                assert ctx.get(dut.done.payload.status) == E_FLAGS
                assert not ctx.get(dut.cmd.valid)
                return
            await ctx.tick()
        raise AssertionError("no completion")
    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()


def test_moving_rows_beyond_the_load_and_engine_errors():
    half = f"load_stationary ap1=sbuf.bf16[0:{K // 2}]@0x0{{1x{M}}}"
    out = run_decoder([half, MM])
    assert [s for s, _ in out] == [0, E_SHAPE]
    # engine-reported errors become the completion status (feed-level first)
    assert run_decoder([LOAD], err=(0x04, None))[0][0] == 0x04
    assert run_decoder([LOAD], err=(None, 5))[0][0] == 0x07      # ERR_SPARSE -> E_SPARSE_TAG
    assert run_decoder([LOAD], err=(None, 3))[0][0] == E_FORMAT  # ERR_PAIR
    assert run_decoder([LOAD], busy_cycles=40)[0][0] == 0


def test_instructions_overlap_and_posts_wait_for_their_op():
    """Back-to-back matmuls are taken one per cycle and complete at their dispatch; a matmul
    with a post completes only after its own operation is done, while later ones still run
    (no drain), a load with an interrupt only when the engine is idle (checked in the
    model)."""
    post = MM.replace("multiply_moving", "multiply_moving.acc") + " post=s1+1"
    texts = [LOAD] + [MM] * 6 + [post, MM, MM, LOAD + " irq", MM + " post=s2+1"]
    tp = f"transpose ap0=psum.fp32[0:{M}]@0x{BANK:x}{{1x{K}}}"
    for seed in range(4):
        stats = {}
        out = run_decoder(texts, busy_cycles=30, p_ready=0.6, seed=seed, stats=stats)
        # the matmuls between the posts complete while the engine still works on them
        assert stats["while_busy"] >= 6, (seed, stats)
        # the posting matmul completed while the ones after it were still in the engine
        assert stats.get("posted_busy", 0) >= 1, (seed, stats)
        assert [s for s, _ in out] == [0] * len(texts), seed
        assert [c["op"] for _, c in out] == [OP_LOAD] + [OP_MATMUL] * 9 + [OP_LOAD, OP_MATMUL]
    # a posting transpose waits for its own operation too
    out = run_decoder([LOAD, MM, tp + " post=s0+1", MM], busy_cycles=20, seed=5)
    assert [s for s, _ in out] == [0] * 4
    assert [c["op"] for _, c in out] == [OP_LOAD, OP_MATMUL, OP_TRANSPOSE, OP_MATMUL]
    # rejected dispatches complete with their code even when the instruction posts
    assert [s for s, _ in run_decoder([LOAD + " post=s0+1", MM], err=(0x04, None))] == [4, 4]
    assert [s for s, _ in run_decoder([LOAD, MM + " post=s0+1"], err=(None, 5))] == [7, 7]


def test_post_tickets_wrap():
    """More operations than the decoder's ticket counters hold (modulo 64): every posting
    matmul still completes after its own operation and before the engine idles."""
    post = MM + " post=s1+1"
    texts = [LOAD] + [MM, MM, post] * 30
    stats = {}
    out = run_decoder(texts, busy_cycles=12, p_ready=0.9, seed=7, stats=stats)
    assert [s for s, _ in out] == [0] * len(texts)
    assert stats.get("posted_busy", 0) >= 20, stats


def test_a_later_ap_error_keeps_its_own_index():
    """A draining instruction (it posts) waits for the engine to go idle; a later matmul whose
    AP the reader rejects dispatches meanwhile. The draining one completes clean and the later
    one with the code, so the sequencer names the later index (the 10^5-instruction run found
    the code reported at the draining instruction's index)."""
    texts = [LOAD, MM + " post=s0+1", MM, MM]
    out = run_decoder(texts, busy_cycles=30, err=(0x04, None), first_bad=2)
    assert [s for s, _ in out] == [0, 0, 4, 4], out


def run_sync(text, dram, *, window=(0, 1 << 20), p=0.7, seed=0):
    rng = random.Random(seed)
    dut = SyncEngine(CFG)
    beat = CFG.axi_data_bits // 8
    got = {"queued": [], "status": None, "info": None}

    async def bench(ctx):
        ctx.set(dut.dram_base, window[0])
        ctx.set(dut.dram_limit, window[1])
        ctx.set(dut.issue.payload.raw, _raw(text))
        ctx.set(dut.issue.valid, 1)
        burst, bi = None, 0
        for _ in range(5000):
            ctx.set(dut.axi.arready, rng.random() < p)
            rv = burst is not None and rng.random() < p
            ctx.set(dut.axi.rvalid, rv)
            if rv:
                a = burst + bi * beat
                ctx.set(dut.axi.rdata, int.from_bytes(dram.get(a, bytes(beat)), "little"))
                ctx.set(dut.axi.rresp, 2 if a in dram.get("bad", ()) else 0)
                ctx.set(dut.axi.rlast, bi == 64 // beat - 1)
            for port in dut.dma:
                ctx.set(port.ready, rng.random() < p)
            ctx.set(dut.done.ready, 1)
            took = ctx.get(dut.issue.ready)
            if ctx.get(dut.axi.arvalid) and ctx.get(dut.axi.arready):
                assert ctx.get(dut.axi.arlen) == 64 // beat - 1
                burst, bi = ctx.get(dut.axi.araddr), 0
            elif rv and ctx.get(dut.axi.rready):
                bi += 1
                if bi == 64 // beat:
                    burst = None
            for e, port in enumerate(dut.dma):
                if ctx.get(port.valid) and ctx.get(port.ready):
                    got["queued"].append((e, ctx.get(port.payload.queue),
                                          ctx.get(port.payload.desc.as_value())))
            if ctx.get(dut.done.valid):
                got["status"] = ctx.get(dut.done.payload.status)
                got["info"] = ctx.get(dut.done.payload.info)
                return
            await ctx.tick()
            if took:
                ctx.set(dut.issue.valid, 0)
        raise AssertionError("the sync engine did not complete")

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    return got


def _dram_with(descs, base):
    beat = CFG.axi_data_bits // 8
    dram = {}
    for i, d in enumerate(descs):
        for b in range(64 // beat):
            dram[base + 64 * i + b * beat] = d[b * beat:(b + 1) * beat]
    return dram


def test_sync_engine_reads_and_queues_descriptors():
    rng = random.Random(1)
    descs = [bytes(rng.getrandbits(8) for _ in range(64)) for _ in range(3)]
    base = 0x3000
    for seed in range(3):
        got = run_sync(f"dma_start engine=0 queue={CFG.dma_queues - 1} count=3 "
                       f"desc_addr={base}", _dram_with(descs, base), seed=seed)
        assert got["status"] == 0
        assert [(e, q) for e, q, _ in got["queued"]] == [(0, CFG.dma_queues - 1)] * 3
        assert [int.from_bytes(d, "little") for d in descs] == [d for _, _, d in got["queued"]]


def test_sync_engine_errors():
    ok = _dram_with([bytes(64)] * 2, 0x3000)
    cases = [("dma_start engine=0 queue=0 count=1 desc_addr=0x3020", E_DESC, 0),
             (f"dma_start engine={CFG.dma_engines} queue=0 count=1 desc_addr=0x3000", E_DESC, 0),
             (f"dma_start engine=0 queue={CFG.dma_queues} count=1 desc_addr=0x3000", E_DESC, 0),
             ("dma_start engine=0 queue=0 count=2 desc_addr=0x3000", E_AXI, 0)]
    # the window's edges: a list starting at dram_base or ending at dram_limit is inside it,
    # one starting a descriptor below dram_base is not
    cases += [("dma_start engine=0 queue=0 count=1 desc_addr=0x1000", 0, 1),
              ("dma_start engine=0 queue=0 count=1 desc_addr=0x3000", 0, 1),
              ("dma_start engine=0 queue=0 count=2 desc_addr=0xFC0", E_AXI, 0)]
    for text, code, n in cases:
        got = run_sync(text, ok, window=(0x1000, 0x3040))
        assert (got["status"], len(got["queued"])) == (code, n), text
    assert run_sync("dma_start engine=0 queue=0 count=0 desc_addr=0x3000", ok)["status"] == 0
    bad = dict(ok)
    bad["bad"] = (0x3040,)
    got = run_sync("dma_start engine=0 queue=0 count=2 desc_addr=0x3000", bad)
    assert (got["status"], got["info"], len(got["queued"])) == (E_AXI, 1, 1)


def test_vector_and_scalar_decoders_fill_every_field():
    """Every field of the engines' decoded instructions from the encoding, and statuses back in
    order; a dimension beyond ap_dims (if any) is E_AP_FORM without reaching the engine."""
    from rtl.core.engine_decode import ScalarDecoder, VectorDecoder
    vec = ("tensor_scalar.sr ap0=sbuf.bf16[0:4]@0x40{1x8} ap1=psum.fp32[0:4]@0x80{-1x8} "
           "ap2=sbuf.fp8_e4m3[0:4]@0x10{0x8} op0=3 op1=9 ctl=10 imm0=1.5 imm1=-2.0")
    act = ("activation ap0=sbuf.bf16[0:4]@0x40{1x8} ap1=psum.fp32[0:4]@0x80{1x8} "
           "ap2=sbuf.fp32[0:4]@0x0{0x8} func=5 reduce_cmd=3 bias_ap=1 scale=0.5 bias=0.25")
    for cls, text, check in (
            (VectorDecoder, vec, lambda i: (
                i.opcode == 0x21 and i.sr == 1 and i.op0 == 3 and i.op1 == 9
                and (i.rev0, i.rev1, i.sel0, i.sel1) == (0, 1, 0, 1)
                and i.imm0 == 0x3FC00000 and i.imm1 == 0xC0000000
                and (i.dst.mem, i.dst.offset, i.dst.count) == (1, 0x40, 4)
                and (i.src0.mem, i.src0.dims[0].step, i.src0.dims[0].num) == (2, -1, 8)
                and (i.src1.dims[0].step, i.src1.offset) == (0, 0x10)
                and (i.dst_dtype, i.src0_dtype, i.src1_dtype) == (2, 0, 5))),
            (ScalarDecoder, act, lambda i: (
                i.opcode == 0x30 and i.func == 5 and i.reduce_cmd == 3 and i.sr == 0
                and i.bias_src == 1 and i.scale_src == 0
                and i.scale == 0x3F000000 and i.bias == 0x3E800000
                and (i.src.mem, i.src.offset) == (2, 0x80) and i.bias_ap.dims[0].step == 0
                and (i.dst_dtype, i.src_dtype, i.bias_dtype) == (2, 0, 0)))):
        dut = cls(CFG)
        res = {}

        async def bench(ctx, dut=dut, text=text, res=res):
            ctx.set(dut.issue.payload.raw, _raw(text))
            ctx.set(dut.issue.valid, 1)
            ctx.set(dut.instr.ready, 1)
            ctx.set(dut.done.ready, 1)
            assert ctx.get(dut.instr.valid) and ctx.get(dut.issue.ready)
            res["instr"] = ctx.get(dut.instr.payload)
            await ctx.tick()
            ctx.set(dut.issue.valid, 0)
            assert not ctx.get(dut.done.valid)
            ctx.set(dut.eng_done.valid, 1)
            ctx.set(dut.eng_done.payload.status, 0x05)
            assert ctx.get(dut.done.valid) and ctx.get(dut.done.payload.status) == 0x05
            assert ctx.get(dut.eng_done.ready)

        sim = Simulator(dut)
        sim.add_clock(1e-8)
        sim.add_testbench(bench)
        sim.run()
        assert check(res["instr"]), (cls.__name__, res["instr"])


def test_a_malformed_ap_completes_in_order_without_reaching_the_engine():
    """With ``ap_dims`` = 2, a vector instruction whose AP uses a third dimension is E_AP_FORM:
    it never reaches the engine; with nothing in flight (also after idle cycles) it completes
    in the cycle it is offered, and behind an instruction still in the engine it waits for
    that one's status (in order)."""
    from rtl.core.engine_decode import VectorDecoder
    cfg = CFG.replace(ap_dims=2)
    good = _raw("tensor_copy ap0=sbuf.bf16[0:4]@0x40{1x8} ap1=sbuf.bf16[0:4]@0x80{1x8}")
    bad = _raw("tensor_copy ap0=sbuf.bf16[0:4]@0x40{1x4,4x2} "
               "ap1=sbuf.bf16[0:4]@0x80{1x4,4x1,1x2}")
    dut = VectorDecoder(cfg)

    async def bench(ctx):
        ctx.set(dut.instr.ready, 1)
        ctx.set(dut.done.ready, 1)
        await ctx.tick().repeat(5)                      # idle, the engine ready
        # nothing in flight: completes at once, never offered to the engine
        ctx.set(dut.issue.payload.raw, bad)
        ctx.set(dut.issue.valid, 1)
        assert ctx.get(dut.issue.ready) and not ctx.get(dut.instr.valid)
        assert ctx.get(dut.done.valid) and ctx.get(dut.done.payload.status) == E_AP_FORM
        await ctx.tick()
        # a good one goes to the engine and stays there
        ctx.set(dut.issue.payload.raw, good)
        assert ctx.get(dut.instr.valid) and ctx.get(dut.issue.ready)
        await ctx.tick()
        # the bad one behind it waits for the good one's status
        ctx.set(dut.issue.payload.raw, bad)
        for _ in range(4):
            assert not ctx.get(dut.done.valid) and not ctx.get(dut.instr.valid)
            await ctx.tick()
        ctx.set(dut.eng_done.valid, 1)
        ctx.set(dut.eng_done.payload.status, 0)
        assert ctx.get(dut.done.valid) and ctx.get(dut.done.payload.status) == 0
        await ctx.tick()
        ctx.set(dut.eng_done.valid, 0)
        for _ in range(3):
            if ctx.get(dut.done.valid):
                break
            await ctx.tick()
        assert ctx.get(dut.done.valid) and ctx.get(dut.done.payload.status) == E_AP_FORM
        assert ctx.get(dut.issue.ready) and not ctx.get(dut.instr.valid)

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()


def test_cc_decoder_passes_the_engines_info():
    """The collective engine's ``info`` (E_LINK's link fault kind, E_SHAPE's sending rank,
    E_FORMAT's slot) reaches the sequencer's ``done`` and so ``ERR_INFO``; it was dropped
    (ERR_INFO 0 on the multi-core top, tests/test_multicore_faults.py)."""
    from rtl.core.engine_decode import CCDecoder
    dut = CCDecoder(CFG)

    async def bench(ctx):
        ctx.set(dut.done.ready, 1)
        for status, info in ((isa.E_LINK, 6), (E_SHAPE, 1), (E_FORMAT, 0xA5), (0, 0)):
            ctx.set(dut.eng_done.valid, 1)
            ctx.set(dut.eng_done.payload.status, status)
            ctx.set(dut.eng_done.payload.info, info)
            assert ctx.get(dut.done.valid) and ctx.get(dut.eng_done.ready)
            assert ctx.get(dut.done.payload.status) == status
            assert ctx.get(dut.done.payload.info) == info
            await ctx.tick()

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
