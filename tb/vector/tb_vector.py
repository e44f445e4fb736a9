# SPDX-License-Identifier: Apache-2.0
"""cocotb tests of the Vector engine alone on Verilator (:class:`tb.vector.harness.VecTop`: engine +
real SBUF + PSUM), bit for bit against :mod:`golden.vector`.

The memories are preloaded through the priority ``hog`` row ports with random contents; a
program of random legal instructions (every opcode, every enabled format as source and as
destination, random APs with negative and zero steps and partial partition ranges, SBUF and
PSUM, per-partition scalars, stochastic rounding) interleaved with the bad instructions of every
status is streamed with random gaps, ``done`` is taken with random back-pressure, and the hog
ports steal random banks (contention) while it runs. Every granted engine write is recorded
from the write monitors and applied to a byte model after its instruction's ``done``: after
each instruction the model equals golden (a result overwritten later is still checked), a
failing instruction writes nothing, and the final dumps of both memories equal golden.

Parameters (``tb.env.params()``): ``seed``, ``per_opcode`` (random instructions of each
opcode), ``mixed`` (random instructions of any opcode), ``p_gap``, ``p_ready``, ``p_hog``.
"""

from __future__ import annotations

import cocotb
import numpy as np
from cocotb.triggers import ReadOnly, RisingEdge

import golden.vector as gv
from golden.prng import XorWowLanes
from tb.vector.driver import PSUM, SBUF, VecTB
from tb.vector.program import bad_instrs, max8_find_pair, random_instr, random_memories
from tb.vector.rig import apply_write, pack_instr
from rtl.vector.isa import instr_layout

async def _monitor(tb, writes, state):
    """Record every granted engine write under the index of the instruction running (the
    number of ``done`` transfers so far)."""
    d = tb.dut
    mons = ((SBUF, d.sbuf_w), (PSUM, d.psum_w))
    from rtl.mem.port import RowPort
    lays = {mem: RowPort.Signature(tb.cfg, "sbuf" if mem == SBUF else "psum").req_layout
            for mem in (SBUF, PSUM)}
    while True:
        await RisingEdge(d.clk)
        await ReadOnly()
        for mem, sig in mons:
            v = int(sig.value)
            if not v & 1:
                continue
            req = v >> 1
            lay = lays[mem]
            f = {name: (req >> fl.offset) & ((1 << fl.width) - 1) for name, fl in lay}
            lanes = [(f["wdata"] >> (32 * p)) & 0xFFFFFFFF for p in range(tb.P)]
            writes.setdefault(state["done"], []).append((
                "sbuf" if mem == SBUF else "psum", f["addr"], f["mask"], f["be"], lanes))


async def _hogs(tb, rng, p_hog, state):
    """Random hog reads on random rows of both memories (bank contention) until stopped."""
    d = tb.dut
    from rtl.mem.port import RowPort
    bits = {mem: RowPort.Signature(tb.cfg, "sbuf" if mem == SBUF else "psum").addr_bits
            for mem in (SBUF, PSUM)}
    while not state["stop"]:
        for mem, pre in ((SBUF, "sbuf_hog"), (PSUM, "psum_hog")):
            on = rng.random() < p_hog
            getattr(d, f"{pre}__req__valid").value = int(on)
            if on:
                a = int(rng.integers(0, 1 << bits[mem]))
                getattr(d, f"{pre}__req__payload").value = tb.req(mem, a, mask=1)
        await RisingEdge(d.clk)
    d.sbuf_hog__req__valid.value = 0
    d.psum_hog__req__valid.value = 0


def _program(tb):
    cfg, rng = tb.cfg, tb.rng(1)
    per, mixed = int(tb.params.get("per_opcode", 2)), int(tb.params.get("mixed", 6))
    instrs = []
    for op in sorted(gv.OPCODES):
        n = 8 if op == gv.OP_TENSOR_TENSOR_SCAN else 16
        instrs += [random_instr(rng, cfg, opcodes=[op], max_elems=n) for _ in range(per)]
    fmts = gv.vector_formats(cfg)
    for k, f in enumerate(fmts):            # every format as a source and as a destination
        i = random_instr(rng, cfg, opcodes=[gv.OP_TENSOR_COPY, gv.OP_TENSOR_TENSOR], sr=False)
        instrs.append(gv.VecInstr(**{**i.__dict__, "src0_dtype": f,
                                     "dst_dtype": fmts[(k + 1) % len(fmts)]}))
        if gv.check(cfg, instrs[-1]) != 0:  # an element size that does not fit: keep legal
            instrs[-1] = i
    instrs += [random_instr(rng, cfg, max_elems=16) for _ in range(mixed)]
    order = rng.permutation(len(instrs))
    instrs = [instrs[j] for j in order]
    for _ in range(per):                    # max8's values found again by find_index8
        k = int(rng.integers(0, len(instrs) + 1))
        instrs[k:k] = max8_find_pair(rng, cfg)
    for _, ins, _code in bad_instrs(rng, cfg):
        instrs.insert(int(rng.integers(0, len(instrs) + 1)), ins)
    return instrs


@cocotb.test()
async def random_program(dut):
    tb = VecTB(dut)
    cfg, P = tb.cfg, tb.P
    rng = tb.rng(2)
    p_gap, p_ready = float(tb.params.get("p_gap", 0.3)), float(tb.params.get("p_ready", 0.6))
    p_hog = float(tb.params.get("p_hog", 0.25))
    await tb.reset(instr__valid=0, done__ready=0, sbuf_hog__req__valid=0,
                   psum_hog__req__valid=0)
    sbuf, psum = random_memories(rng, cfg)
    await tb.poke_rows(SBUF, sbuf.view("<u4"))
    await tb.poke_rows(PSUM, psum.view("<u4"))
    instrs = _program(tb)
    lay = instr_layout(cfg)
    words = [pack_instr(lay, cfg, i) for i in instrs]
    state = {"done": 0, "stop": False}
    writes = {}
    mon = cocotb.start_soon(_monitor(tb, writes, state))
    hogs = cocotb.start_soon(_hogs(tb, tb.rng(3), p_hog, state))
    statuses = []
    elems = sum(max(i.dst.count, i.src0.count) for i in instrs)
    limit = int((elems * 10 + 60 * len(instrs)) / max(0.1, p_ready) / max(0.1, 1 - p_hog)) + 500
    j, offer = 0, False
    for _ in range(limit):
        if not offer and j < len(instrs) and rng.random() >= p_gap:
            offer = True
            dut.instr__payload.value = words[j]
        dut.instr__valid.value = int(offer)
        rdy = rng.random() < p_ready
        dut.done__ready.value = int(rdy)
        await ReadOnly()
        took = offer and int(dut.instr__ready.value)
        status = int(dut.done__payload.value) if rdy and int(dut.done__valid.value) else None
        await RisingEdge(dut.clk)
        if took:
            j += 1
            offer = False
        if status is not None:
            statuses.append(status)
            state["done"] += 1
        if len(statuses) == len(instrs):
            break
    else:
        raise AssertionError(tb.fail_text("program", f"{len(statuses)} of {len(instrs)} "
                                                     f"instructions done in {limit} cycles"))
    dut.instr__valid.value = 0
    state["stop"] = True
    await RisingEdge(dut.clk)
    await RisingEdge(dut.clk)
    mon.cancel()
    await hogs
    for _ in range(4):
        await RisingEdge(dut.clk)
    # golden, instruction by instruction, against the recorded writes
    mem = gv.VecMemory(cfg, sbuf=sbuf, psum=psum)
    prng = XorWowLanes(cfg.sr_seed, P)
    rs, rp = sbuf.copy(), psum.copy()
    want = []
    for k, ins in enumerate(instrs):
        want.append(gv.run(cfg, ins, mem, prng))
        if want[k] != 0 and writes.get(k):
            raise AssertionError(tb.fail_text(f"instruction {k}", f"status {want[k]:#x} but "
                                              f"{len(writes[k])} writes"))
        for w in writes.get(k, []):
            apply_write(rs, rp, w)
        for name, got, exp in (("SBUF", rs, mem.sbuf), ("PSUM", rp, mem.psum)):
            diff = np.argwhere(got != exp)
            if diff.size:
                p, a = diff[0]
                raise AssertionError(tb.fail_text(
                    f"instruction {k} ({gv.OPCODES.get(ins.opcode, hex(ins.opcode))})",
                    f"{len(diff)} {name} bytes differ from golden, first partition {p} byte "
                    f"{a}: {got[p, a]:#x} vs {exp[p, a]:#x}; {ins}"))
    tb.check_equal("statuses", statuses, want, lambda k: f"instruction {k} "
                   f"({gv.OPCODES.get(instrs[k].opcode, hex(instrs[k].opcode))})")
    got_s = (await tb.peek_rows(SBUF, cfg.sbuf_bytes_per_partition // 4)).view(
        np.uint8).reshape(P, -1)
    got_p = (await tb.peek_rows(PSUM, cfg.psum_banks * cfg.psum_bank_fp32)).view(
        np.uint8).reshape(P, -1)
    for name, got, exp in (("SBUF", got_s, mem.sbuf), ("PSUM", got_p, mem.psum)):
        diff = np.argwhere(got != exp)
        if diff.size:
            p, a = diff[0]
            raise AssertionError(tb.fail_text("final dump", f"{len(diff)} {name} bytes differ "
                                              f"from golden, first ({p}, {a}): {got[p, a]:#x} "
                                              f"vs {exp[p, a]:#x}"))
    ops = {gv.OPCODES.get(i.opcode, "bad") for i in instrs}
    tb.record(instructions=len(instrs), elements=elems, opcodes=len(ops),
              errors=sum(1 for s in want if s), writes=sum(len(v) for v in writes.values()))
