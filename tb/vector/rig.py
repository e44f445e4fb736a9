# SPDX-License-Identifier: Apache-2.0
"""The Vector engine on a real SBUF and PSUM, and the amaranth.sim job that runs a program.

:class:`VecRig` joins a :class:`~rtl.vector.engine.VectorEngine` to an
:class:`rtl.mem.sbuf.SBUF` (row ports ``sbuf_rd0``, ``sbuf_rd1``, ``sbuf_wr`` plus a priority
``hog`` port that a testbench drives to steal banks) and a :class:`rtl.tensor.psum.PsumUnit`
(row ports ``psum_*`` plus ``hog``, used to preload and dump PSUM and to steal banks).
:func:`program_job` preloads both memories, streams instructions (random gaps), takes ``done``
with random back-pressure, lets the hogs steal, and dumps both memories; every wait is bounded.
"""

from __future__ import annotations

import numpy as np
from amaranth.hdl import Elaboratable, Module, Value
from amaranth.lib import wiring

from rtl.mem.port import PSUM, SBUF
from rtl.mem.sbuf import SBUF as SbufMem
from rtl.tensor.psum import PsumUnit
from rtl.vector.engine import VectorEngine
from rtl.vector.frame import PORT_NAMES
from tb.ap.program import pack_ap
from tb.mem.rig import dump_sbuf, preload_sbuf

__all__ = ["VecRig", "pack_instr", "program_job", "apply_write"]


class VecRig(Elaboratable):
    """``dut`` (the engine), ``sbuf`` and ``psum`` (the memories, each with a ``hog`` port)."""

    def __init__(self, cfg):
        self.cfg = cfg
        self.dut = VectorEngine(cfg)
        self.sbuf = SbufMem(cfg, row_ports=("hog", "sbuf_rd0", "sbuf_rd1", "sbuf_wr"),
                            priority=("hog",))
        self.psum = PsumUnit(cfg, use_instances=False,
                             row_ports=("hog", "psum_rd0", "psum_rd1", "psum_wr"))

    def elaborate(self, platform):
        m = Module()
        m.submodules.dut = self.dut
        m.submodules.sbuf = self.sbuf
        m.submodules.psum = self.psum
        for n in PORT_NAMES:
            mem = self.sbuf if n.startswith(SBUF) else self.psum
            wiring.connect(m, getattr(self.dut, n), getattr(mem, n))
        return m


def pack_instr(layout, cfg, ins):
    """A :class:`golden.vector.VecInstr` as an int of ``instr_layout(cfg)``."""
    word = 0
    for name, field in layout:
        v = getattr(ins, name)
        if name in ("dst", "src0", "src1"):
            v = pack_ap(field.shape, v, cfg.ap_dims)
        width = field.width
        if not 0 <= v < 1 << width:
            raise ValueError(f"instruction field '{name}' must fit {width} bits, not {v!r}")
        word |= v << field.offset
    return word


def _hog_idle(ctx, rig):
    ctx.set(rig.sbuf.hog.req.valid, 0)
    ctx.set(rig.psum.hog.req.valid, 0)


async def _psum_preload(ctx, rig, psum_bytes):
    """Write every PSUM entry (all partitions) through the ``hog`` row port."""
    cfg = rig.cfg
    hog = rig.psum.hog.req
    lay = hog.payload.shape()
    words = psum_bytes.view("<u4")                     # (P, entries)
    for e in range(words.shape[1]):
        ctx.set(hog.valid, 1)
        ctx.set(hog.payload, lay.const({"addr": e, "mask": (1 << cfg.partitions) - 1, "we": 1,
                                        "be": 0xF, "wdata": [int(x) for x in words[:, e]]}))
        for _ in range(100):
            granted = ctx.get(hog.ready)
            await ctx.tick()
            if granted:
                break
        else:
            raise AssertionError(f"PSUM preload: entry {e} never granted")
    ctx.set(hog.valid, 0)


async def _psum_dump(ctx, rig):
    cfg = rig.cfg
    hog = rig.psum.hog
    lay = hog.req.payload.shape()
    n = cfg.psum_banks * cfg.psum_bank_fp32
    out = np.zeros((cfg.partitions, n), np.uint32)
    got = 0
    issued = 0
    for _ in range(4 * n + 100):
        ctx.set(hog.req.valid, int(issued < n))
        if issued < n:
            ctx.set(hog.req.payload, lay.const({"addr": issued,
                                                "mask": (1 << cfg.partitions) - 1, "we": 0}))
        fire = issued < n and ctx.get(hog.req.ready)
        if ctx.get(hog.rsp.valid):
            d = ctx.get(Value.cast(hog.rsp.payload))
            for p in range(cfg.partitions):
                out[p, got] = (d >> (32 * p)) & 0xFFFFFFFF
            got += 1
        issued += int(fire)
        await ctx.tick()
        if got == n:
            break
    ctx.set(hog.req.valid, 0)
    assert got == n, f"PSUM dump: {got} of {n} entries"
    return out.view(np.uint8).reshape(cfg.partitions, -1)


def program_job(rig, instrs, *, sbuf, psum, rng, p_gap=0.0, p_ready=1.0, p_hog=0.0,
                limit=None, dump=True):
    """A testbench job and the dict it fills: preload ``sbuf``/``psum`` (partitions x bytes),
    run ``instrs`` (``golden.vector.VecInstr``), dump both memories. ``psum=None`` skips the
    PSUM preload (it starts at zero); ``dump=False`` skips the dumps (benches). The dict gets
    ``status`` (one code per instruction), ``takes`` and ``dones`` (cycles), ``sbuf``, ``psum``
    (dumps), ``writes``: per instruction, the engine's granted writes as
    ``(memory, addr, mask, be, lanes)`` (see :func:`apply_write`), and ``write_cycles``
    (their cycles).
    """
    cfg = rig.cfg
    dut = rig.dut
    lay = dut.signature.instr_layout
    words = [pack_instr(lay, cfg, ins) for ins in instrs]
    elems = sum(max(ins.dst.count, ins.src0.count) for ins in instrs)
    limit = limit or int((elems + 80 * len(instrs)) * 4 / max(0.1, p_ready)
                         / max(0.1, 1 - p_hog)) + 200
    out = {"status": [], "takes": [], "dones": [], "writes": [[] for _ in instrs],
           "write_cycles": [[] for _ in instrs]}
    wports = ((SBUF, dut.sbuf_wr.req), (PSUM, dut.psum_wr.req))

    async def job(ctx):
        _hog_idle(ctx, rig)
        ctx.set(dut.instr.valid, 0)
        ctx.set(dut.done.ready, 0)
        preload_sbuf(ctx, rig.sbuf, sbuf)
        if psum is not None:
            await _psum_preload(ctx, rig, psum)
        j, t = 0, 0
        offer = False
        while len(out["status"]) < len(instrs):
            if not offer and j < len(instrs):
                offer = rng.random() >= p_gap
            ctx.set(dut.instr.valid, int(offer))
            if offer:
                ctx.set(Value.cast(dut.instr.payload), words[j])
            rdy = rng.random() < p_ready
            ctx.set(dut.done.ready, int(rdy))
            for mem in (rig.sbuf, rig.psum):
                hog = rng.random() < p_hog
                ctx.set(mem.hog.req.valid, int(hog))
                if hog:
                    hl = mem.hog.req.payload.shape()
                    ctx.set(mem.hog.req.payload, hl.const(
                        {"addr": int(rng.integers(1 << len(mem.hog.req.payload.addr))),
                         "mask": 1, "we": 0}))
            if offer and ctx.get(dut.instr.ready):
                out["takes"].append(t)
                j += 1
                offer = False
            for mem, req in wports:
                if ctx.get(req.valid) and ctx.get(req.ready):
                    k = len(out["status"])
                    assert k < len(instrs), "a write after the last instruction finished"
                    d = ctx.get(Value.cast(req.payload.wdata))
                    out["writes"][k].append(
                        (mem, ctx.get(req.payload.addr), ctx.get(req.payload.mask),
                         ctx.get(req.payload.be),
                         [(d >> (32 * p)) & 0xFFFFFFFF for p in range(cfg.partitions)]))
                    out["write_cycles"][k].append(t)
            # the busy contract: high from the cycle after an instruction is taken until its
            # done is taken (so always while done is offered)
            assert not ctx.get(dut.done.valid) or ctx.get(dut.busy), \
                f"cycle {t}: done offered while busy is low"
            if rdy and ctx.get(dut.done.valid):
                out["status"].append(ctx.get(dut.done.payload.status))
                out["dones"].append(t)
            await ctx.tick()
            t += 1
            assert t < limit, (f"{len(out['status'])} of {len(instrs)} instructions done after "
                               f"{limit} cycles (hang)")
        _hog_idle(ctx, rig)
        ctx.set(dut.instr.valid, 0)
        for _ in range(3):
            await ctx.tick()
        assert not ctx.get(dut.busy), "busy stays high after the last done was taken"
        if dump:
            out["sbuf"] = dump_sbuf(ctx, rig.sbuf)
            out["psum"] = await _psum_dump(ctx, rig)
    return job, out


def apply_write(sbuf, psum, write):
    """Apply one recorded row-port write to the byte arrays ``sbuf``/``psum`` (partitions x
    bytes): SBUF ``addr`` is a byte address (its lane at ``addr & ~3``), PSUM ``addr`` an FP32
    entry; ``be`` picks the lane's bytes, ``mask`` the partitions."""
    mem, addr, mask, be, lanes = write
    buf, base = (sbuf, addr & ~3) if mem == SBUF else (psum, 4 * addr)
    for p, v in enumerate(lanes):
        if mask >> p & 1:
            for b in range(4):
                if be >> b & 1:
                    buf[p, base + b] = (v >> (8 * b)) & 0xFF
