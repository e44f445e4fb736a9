# SPDX-License-Identifier: Apache-2.0
"""The instruction sequencer (rtl/core/sequencer.py) in amaranth.sim, small preset.

Around it: a DRAM read model on its AXI port (random AR/R stalls, injected SLVERR/DECERR), a
model engine (random issue back-pressure, completions after random delays, a status chosen by
the instruction) and a semaphore model (one-cycle read, random post back-pressure, host
increments at chosen cycles). Expected results come from :func:`reference`, the sequencer's
contract in program order (docs/core.md), never from the RTL.
"""

import random

import pytest
from amaranth.hdl import Elaboratable, Module, Signal
from amaranth.sim import Simulator

from golden.asm import assemble
from rtl import isa
from rtl.config import get_preset
from rtl.core.sequencer import (E_AXI, E_OPCODE, E_QUEUE, E_SEM, E_TIMEOUT, Sequencer,
                                opcode_check)
from rtl.isa import APEnc, Instr, encode

CFG = get_preset("small")
ENGINE = "dve"
BASE = 0x1000
IB = isa.INSTR_BYTES


def engine_status(raw):
    """The model engine's completion status: a ``tensor_tensor`` whose ``op0`` has bit 7 set
    fails with status ``op0 & 0x7F``; everything else succeeds."""
    ins = isa.decode(raw)
    op = ins.imm.get("op0", 0) if ins.op == "tensor_tensor" else 0
    return op & 0x7F if op & 0x80 else 0


def reference(raws, sems, *, bad_reads=(), host=()):
    """``(issued indices, semaphores, error (code, pc, info) or None, halted, notifies, posts,
    irqs)`` of a program in order. ``host``: ``(sem, inc)`` host increments, all applied before any wait
    could time out (the tests make them arrive in time)."""
    sems = dict(sems)
    for s, v in host:
        sems[s] = sems.get(s, 0) + v
    issued, notes, posts, irq = [], [], [], [0]

    def fin(err, halted=False):
        return issued, sems, err, halted, notes, posts, irq[0]
    for i, raw in enumerate(raws):
        if i in bad_reads:
            return fin((E_AXI, i, 0))
        if isa.check_reserved(raw, ENGINE) is not None:
            return fin((E_OPCODE, i, 0))
        ins = isa.decode(raw)
        for sv in (ins.wait, ins.post):
            if sv is not None and sv[0] >= CFG.semaphores:
                return fin((E_SEM, i, sv[0]))
        if ins.wait is not None and sems.get(ins.wait[0], 0) < ins.wait[1]:
            return fin((E_TIMEOUT, i, ins.wait[0]))
        if ins.opcode.engine is not None:
            issued.append(i)
            st = engine_status(raw)
            if st:
                return fin((st, i, 0xC0DE0000 | i))
        if ins.post is not None:
            sems[ins.post[0]] = sems.get(ins.post[0], 0) + ins.post[1]
            posts.append(ins.post)
        if ins.op == "notify":
            notes.append(ins.imm.get("code", 0))
        irq[0] += ins.irq
        if ins.op == "halt":
            return fin(None, True)
    return fin(None)


def simulate(raws, *, sems=None, bad_reads=(), host=(), seed=0, q_size=None, q_tail=None,
             q_base=BASE, watchdog=200, max_cycles=20000, ready_p=0.7, linger=3, rerun=False):
    """Run the program on the RTL with the models; returns what the RTL did. The run ends
    after ``linger`` idle cycles; with ``rerun`` a halt is answered by ``run`` low for one
    cycle and high again (the host restarting the queue after the halt)."""
    rng = random.Random(seed)
    dut = Sequencer(CFG, ENGINE)
    q_size = q_size if q_size is not None else 1 << len(raws).bit_length()   # > len(raws)
    q_tail = q_tail if q_tail is not None else len(raws)
    dram = bytearray(q_size * IB if q_size else IB)
    for i, raw in enumerate(raws):
        dram[i * IB:(i + 1) * IB] = raw
    beat = CFG.axi_data_bits // 8
    sems = dict(sems or {})
    host = list(host)          # (cycle, sem, inc)
    out = {"issued": [], "posts": [], "notify": [], "irq": 0}

    async def bench(ctx):
        ctx.set(dut.q_base, q_base)
        ctx.set(dut.q_size, q_size)
        ctx.set(dut.q_tail, q_tail)
        ctx.set(dut.watchdog, watchdog)
        ctx.set(dut.run, 1)
        bursts, rbeat = [], 0
        pending_done = []          # [ready_cycle, status, info]
        sem_q = 0
        quiet = 0
        restarted = None            # the cycle run was low for the restart
        for cyc in range(max_cycles):
            if rerun and restarted is None and ctx.get(dut.halted):
                restarted = cyc
            ctx.set(dut.run, int(restarted != cyc))
            for (t, s, v) in host:
                if t == cyc:
                    sems[s] = sems.get(s, 0) + v
            # inputs of this cycle
            arready = rng.random() < ready_p
            ctx.set(dut.axi.arready, arready)
            rv = bool(bursts) and rng.random() < ready_p
            if rv:
                addr, _ = bursts[0]
                a = addr + rbeat * beat
                ctx.set(dut.axi.rdata, int.from_bytes(dram[a - q_base:a - q_base + beat],
                                                      "little"))
                bad = (addr - q_base) // IB in bad_reads and rbeat == 1
                ctx.set(dut.axi.rresp, rng.choice((2, 3)) if bad else 0)
                ctx.set(dut.axi.rlast, rbeat == bursts[0][1])
            ctx.set(dut.axi.rvalid, rv)
            iready = rng.random() < ready_p
            ctx.set(dut.issue.ready, iready)
            dv = bool(pending_done) and pending_done[0][0] <= cyc
            ctx.set(dut.done.valid, dv)
            if dv:
                ctx.set(dut.done.payload.status, pending_done[0][1])
                ctx.set(dut.done.payload.info, pending_done[0][2])
            pready = rng.random() < ready_p
            ctx.set(dut.post.ready, pready)
            ctx.set(dut.sem_data, sems.get(sem_q, 0) & ((1 << CFG.semaphore_bits) - 1))
            # outputs (settled)
            ar = ctx.get(dut.axi.arvalid) and arready
            if ar:
                assert ctx.get(dut.axi.arburst) == 1
                bursts.append((ctx.get(dut.axi.araddr), ctx.get(dut.axi.arlen)))
            r = rv and ctx.get(dut.axi.rready)
            if r:
                rbeat += 1
                if rbeat > bursts[0][1]:
                    bursts.pop(0)
                    rbeat = 0
            if ctx.get(dut.issue.valid) and iready:
                raw = ctx.get(dut.issue.payload.raw).to_bytes(IB, "little")
                idx = ctx.get(dut.issue.payload.index)
                out["issued"].append(idx)
                pending_done.append([cyc + rng.randint(1, 12), engine_status(raw),
                                     0xC0DE0000 | idx])
            if dv and ctx.get(dut.done.ready):
                pending_done.pop(0)
            if ctx.get(dut.post.valid) and pready:
                s, v = ctx.get(dut.post.payload.sem), ctx.get(dut.post.payload.inc)
                out["posts"].append((s, v))
                sems[s] = sems.get(s, 0) + v
            if ctx.get(dut.notify):
                out["notify"].append(ctx.get(dut.notify_code))
            out["irq"] += ctx.get(dut.irq_done)
            sem_q = ctx.get(dut.sem_rd)
            busy = ctx.get(dut.busy)
            out.setdefault("busy", []).append(busy)
            quiet = quiet + 1 if not busy and not pending_done and not bursts else 0
            await ctx.tick()
            if quiet > linger and all(t < cyc for t, _, _ in host):
                break
        else:
            raise AssertionError(f"seed {seed}: the sequencer did not go idle in "
                                 f"{max_cycles} cycles")
        # busy is one unbroken run from the first fetch to the end: a one-cycle drop would be a
        # false idle interrupt in the core
        b = "".join(str(int(x)) for x in out["busy"]).strip("0")
        assert rerun or "0" not in b, f"seed {seed}: busy dropped mid-program"
        out["err"] = ((ctx.get(dut.err_code), ctx.get(dut.err_pc), ctx.get(dut.err_info))
                      if ctx.get(dut.err) else None)
        out["halted"] = bool(ctx.get(dut.halted))
        out["head"] = ctx.get(dut.q_head)
        out["cycles"] = cyc

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    out["sems"] = sems
    return out


def _tt(op=0, **kw):
    ap = APEnc(1, 0, 4, "fp32", 0, ((1, 4),))
    return Instr(op="tensor_tensor", aps={"ap0": ap, "ap1": ap, "ap2": ap},
                 imm={"op0": op} if op else {}, **kw)


def rand_program(rng, n, *, errors=True):
    """Random valid instructions of the vector engine and the common opcodes, with waits that
    the stream's own earlier posts satisfy; with ``errors`` some malformed ones."""
    prog, sems = [], {}
    for _ in range(n):
        kind = rng.random()
        post = (rng.randrange(CFG.semaphores), rng.randint(1, 3)) if rng.random() < 0.5 \
            else None
        wait = None
        if rng.random() < 0.4:
            s = rng.randrange(CFG.semaphores)
            wait = (s, rng.randint(0, sems.get(s, 0)))
        if kind < 0.6:
            ins = _tt(wait=wait, post=post, irq=rng.random() < 0.2)
        elif kind < 0.75:
            ins = Instr(op="nop", wait=wait, post=post)
        elif kind < 0.85:
            ins = Instr(op="notify", imm={"code": rng.randint(1, 999)}, wait=wait, post=post)
        else:
            ins = Instr(op="memset", aps={"ap0": APEnc(1, 0, 4, "bf16", 0, ((1, 8),))},
                        imm={"imm0": 1.0}, wait=wait, post=post)
        raw = bytearray(encode(ins))
        if errors and rng.random() < 0.04:
            raw[rng.choice((11, 12, 15, 100, 127))] |= 0x40     # reserved header / imm bit
        if post is not None:
            sems[post[0]] = sems.get(post[0], 0) + post[1]
        prog.append(bytes(raw))
    return prog


def check(prog, got, **ref_kw):
    issued, sems, err, halted, notes, posts, irq = reference(prog, ref_kw.pop("sems", {}),
                                                             **ref_kw)
    seed = got.get("seed")
    assert got["issued"] == issued, f"seed {seed}"
    assert got["err"] == err, f"seed {seed}: {got['err']} vs {err}"
    assert got["halted"] == halted, f"seed {seed}"
    assert got["notify"] == notes, f"seed {seed}"
    assert got["posts"] == posts and got["irq"] == irq, f"seed {seed}"
    assert {k: v for k, v in got["sems"].items() if v} == {k: v for k, v in sems.items() if v}, \
        f"seed {seed}"


@pytest.mark.parametrize("seed", range(6))
def test_random_programs(seed):
    rng = random.Random(seed)
    prog = rand_program(rng, 24)
    got = simulate(prog, seed=seed)
    got["seed"] = seed
    check(prog, got)


def test_engine_error_stops_the_stream_and_posts_nothing_after():
    prog = [encode(_tt(post=(1, 1))), encode(_tt(post=(1, 1))),
            encode(_tt(op=0x80 | 0x07, post=(1, 1))), encode(_tt(post=(1, 1))),
            encode(_tt(post=(1, 1))), encode(Instr(op="nop", post=(2, 1)))]
    for seed in range(3):
        got = simulate(prog, seed=seed)
        assert got["err"] == (0x07, 2, 0xC0DE0002), seed
        assert got["sems"].get(1) == 2 and not got["sems"].get(2), seed
        # instructions issued behind the failing one are consumed, not kept as errors
        assert got["issued"][:3] == [0, 1, 2], seed


def test_wait_blocks_until_the_host_posts_and_the_watchdog_fires_otherwise():
    prog = [encode(_tt(post=(0, 1))), encode(_tt(wait=(3, 2))), encode(_tt())]
    got = simulate(prog, host=[(150, 3, 1), (300, 3, 1)], watchdog=0, seed=1)
    assert got["issued"] == [0, 1, 2] and got["err"] is None and got["cycles"] > 300
    got = simulate(prog, host=[(20, 3, 1)], watchdog=100, seed=2)
    assert got["err"] == (E_TIMEOUT, 1, 3) and got["issued"] == [0]


def test_malformed_and_out_of_range():
    good = encode(_tt())
    bad_ops = [
        bytes([0x11]) + good[1:],                                   # a tensor opcode
        bytes([0x2F]) + good[1:],                                   # unknown
        good[:1] + bytes([0x01]) + good[2:],                        # flag acc: not taken
        good[:10] + bytes([0x08]) + good[11:],                      # reserved ctl bit
        good[:91] + bytes([0x01]) + good[92:],                      # a reserved imm byte
        good[:43] + bytes([good[43] | 0x40]) + good[44:],           # AP1 reserved bit
        encode(Instr(op="nop")).replace(bytes(24), bytes([1]) + bytes(23), 1),  # AP0 in a nop
    ]
    for k, b in enumerate(bad_ops):
        got = simulate([good, b, good], seed=k)
        assert got["err"] == (E_OPCODE, 1, 0) and got["issued"] == [0], k
    got = simulate([good, encode(_tt(post=(CFG.semaphores, 1)))], seed=9)
    assert got["err"] == (E_SEM, 1, CFG.semaphores)
    got = simulate([good, encode(Instr(op="nop", wait=(CFG.semaphores + 1, 0)))], seed=9)
    assert got["err"] == (E_SEM, 1, CFG.semaphores + 1)


def test_axi_read_error_and_bad_queue():
    prog = [encode(_tt()) for _ in range(4)]
    got = simulate(prog, bad_reads={2}, seed=3)
    assert got["err"] == (E_AXI, 2, 0) and got["issued"] == [0, 1]
    for kw in ({"q_size": 3, "q_tail": 1}, {"q_size": 4, "q_tail": 5},
               {"q_size": 4, "q_tail": 1, "q_base": BASE + 64}):
        got = simulate(prog, seed=4, **kw)
        assert got["err"] == (E_QUEUE, 0, 0) and got["issued"] == [], kw


def test_halt_pauses_and_ring_wraps():
    text = "tensor_tensor ap0=sbuf.fp32[0:4]@0x0{1x4} ap1=sbuf.fp32[0:4]@0x0{1x4} " \
           "ap2=sbuf.fp32[0:4]@0x0{1x4} post=s1+1\nhalt\nnop post=s2+1\n"
    raw = assemble(text)
    prog = [raw[i:i + IB] for i in range(0, len(raw), IB)]
    got = simulate(prog, q_size=4, q_tail=3, seed=5)
    assert got["halted"] and got["issued"] == [0] and got["sems"] == {1: 1}
    # a full ring: 8 slots, tail 7 (one slot stays empty), every instruction runs once
    rng = random.Random(7)
    prog = rand_program(rng, 7, errors=False)
    got = simulate(prog + [bytes(IB)], q_size=8, q_tail=7, seed=7)
    got["seed"] = 7
    check(prog, got)
    assert got["head"] == 7


class _Check(Elaboratable):
    """The sequencer's instruction check (:func:`rtl.core.sequencer.opcode_check`) alone."""

    def __init__(self, engine):
        self.engine = engine
        self.raw = Signal(8 * IB)
        self.ok = Signal()

    def elaborate(self, platform):
        m = Module()
        ok, _ = opcode_check(m, self.raw, self.engine)
        m.d.comb += self.ok.eq(ok)
        return m


def _field_ones(raw, lsb_bit, width):
    w = int.from_bytes(raw, "little") | (((1 << width) - 1) << lsb_bit)
    return w.to_bytes(IB, "little")


def _check_cases(engine):
    """``[(raw, what)]`` for ``engine``: per opcode (its own, the common ones and one foreign
    one) the bare instruction, each of the 1,024 bits set alone, each immediate field at all
    ones, and every field at once at all ones."""
    hdr = {f.name: f for f in isa.HEADER}
    ops = [op for op in isa.OPCODES if op.engine in (None, engine)]
    ops.append(next(op for op in isa.OPCODES if op.engine not in (None, engine)))
    cases = []
    for op in ops:
        base = bytes([op.code]) + bytes(IB - 1)
        cases.append((base, f"{op.name} bare"))
        cases += [((int.from_bytes(base, "little") ^ (1 << b)).to_bytes(IB, "little"),
                   f"{op.name} bit {b}") for b in range(8 * IB)]
        full = base
        for f in op.imm:
            cases.append((_field_ones(base, 8 * isa.IMM_BYTE + f.lsb, f.width),
                          f"{op.name} {f.name} all ones"))
            full = _field_ones(full, 8 * isa.IMM_BYTE + f.lsb, f.width)
        for f in isa.HEADER:
            if f.name not in ("opcode", "reserved", "flags", "ctl"):
                full = _field_ones(full, f.lsb, f.width)
        w = int.from_bytes(full, "little")
        w |= sum(1 << b for b in isa.CTL_BITS.values()) << hdr["ctl"].lsb
        w |= sum(1 << isa.FLAG_BITS[fl] for fl in op.flags) << hdr["flags"].lsb
        cases.append((w.to_bytes(IB, "little"), f"{op.name} every field all ones"))
        for raw, what in cases[-len(op.imm) - 1:] + [(base, f"{op.name} bare")]:
            # legal by the ISA tables for the engine's own and the common opcodes
            assert (isa.check_reserved(raw, engine) is None) == (op.engine in (None, engine)), \
                what
    return cases


def _run_check(engine, cases):
    """``[(what, accepted)]`` of the RTL check for ``cases``."""
    dut = _Check(engine)
    got = []

    async def bench(ctx):
        for raw, what in cases:
            ctx.set(dut.raw, int.from_bytes(raw, "little"))
            got.append((what, bool(ctx.get(dut.ok))))

    sim = Simulator(dut)
    sim.add_testbench(bench)
    sim.run()
    return got


def test_every_field_and_reserved_bit():
    """For every engine, the instruction check accepts or rejects exactly as
    :func:`rtl.isa.check_reserved` says (:func:`_check_cases`): every reserved header, flag,
    ctl, AP and immediate bit set alone is rejected, every bit of a field accepted, each
    immediate field at all ones (``op1`` = 0xFF, ``imm1`` = 0xFFFFFFFF, ...) and every field at
    once accepted, a foreign opcode rejected."""
    for engine in isa.ENGINES:
        cases = _check_cases(engine)
        bad = [f"{engine}: {what}: {'accepted' if ok else 'rejected'}"
               for (raw, what), (_, ok) in zip(cases, _run_check(engine, cases))
               if ok != (isa.check_reserved(raw, engine) is None)]
        assert not bad, f"{len(bad)} wrong: {bad[:6]}"


def test_a_wait_is_decided_on_its_own_semaphore():
    """An instruction whose wait was met, then at once one waiting on another, never posted
    semaphore: the second times out (the first one's semaphore value, still on the one-cycle
    read port, must not count for it)."""
    prog = [encode(_tt(wait=(1, 1))), encode(Instr(op="nop", wait=(2, 1))), encode(_tt())]
    for seed in range(3):
        got = simulate(prog, sems={1: 1}, watchdog=40, seed=seed)
        got["seed"] = seed
        check(prog, got, sems={1: 1})
        assert got["err"] == (E_TIMEOUT, 1, 2), seed


def test_halted_is_quiet_and_run_restarts_after_the_halt():
    """Halted with a waiting instruction fetched behind the halt: no watchdog error however long
    it stays halted; run low then high again runs what follows the halt."""
    prog = [encode(_tt()), encode(Instr(op="halt")), encode(Instr(op="nop", wait=(3, 1)))]
    got = simulate(prog, watchdog=10, linger=60, seed=1)
    got["seed"] = 1
    check(prog, got)
    assert got["halted"] and got["err"] is None and got["issued"] == [0]
    prog = [encode(_tt()), encode(Instr(op="halt")), encode(_tt(post=(2, 1))),
            encode(Instr(op="notify", imm={"code": 7}))]
    for seed in range(2):
        got = simulate(prog, rerun=True, seed=seed)
        assert got["issued"] == [0, 2] and got["err"] is None and not got["halted"], seed
        assert got["sems"] == {2: 1} and got["notify"] == [7], seed


def test_widest_post_increment_and_notify_code():
    """Post increments and notify codes at their full 16 bits (the random programs use small
    ones)."""
    prog = [encode(_tt(post=(1, 0x8001))), encode(Instr(op="nop", post=(2, 0xFFFF))),
            encode(Instr(op="notify", imm={"code": 0xFFFF}, post=(3, 0x7FFF)))]
    got = simulate(prog, seed=4)
    got["seed"] = 4
    check(prog, got)
    assert got["posts"] == [(1, 0x8001), (2, 0xFFFF), (3, 0x7FFF)] and got["notify"] == [0xFFFF]
