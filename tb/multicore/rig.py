# SPDX-License-Identifier: Apache-2.0
"""amaranth.sim rig of the collective engine on a ring (docs/collectives.md §14): ``n``
:class:`rtl.collective.engine.CollectiveEngine` (or, with ``engine=``, the
:class:`rtl.collective.permute.PermuteEngine` of §14.6), each with its own
:class:`rtl.mem.sbuf.SBUF` (row ports ``cc_r``, ``cc_w``) and its link ports, joined rank r's
TX -> :class:`rtl.collective.delay.DelayLine` -> rank r+1's RX (credits back through a second
delay line; the TX of rank n-1 the dateline). :func:`run_engines` loads every rank's SBUF,
issues one CC instruction (assembled bytes) per rank and returns each rank's status and SBUF.
A wire can be cut (``cut``: no flit and no credit crosses link ``cut -> cut + 1``)."""

from __future__ import annotations

import numpy as np
from amaranth.hdl import Elaboratable, Module, Mux, Signal

from golden.ap import ELEM_BYTES
from rtl.collective.delay import DelayLine
from rtl.collective.engine import CollectiveEngine
from rtl.collective.link import LinkRX, LinkTX
from rtl.config import LINK_VCS
from rtl.isa import DTYPE_CODES, OPS_BY_NAME, decode
from rtl.mem.sbuf import SBUF
from tb.mem.rig import dump_sbuf, preload_sbuf

__all__ = ["EngineRing", "RING_SBUF_PORTS", "instr_fields", "ring_sbuf", "run_engines"]


class EngineRing(Elaboratable):
    """``n`` engines on a ring of ``cfg`` (``cfg.ring_size`` = ``n``); ``engine`` their class
    (:class:`CollectiveEngine`, or :class:`rtl.collective.permute.PermuteEngine`, whose
    ``tx_credit`` gets its TX port's credits of the VC it injects on), or any function of
    ``cfg`` returning a component of that signature; ``sbuf`` likewise the function making each
    rank's SBUF (row ports ``cc_r``, ``cc_w``; default :func:`ring_sbuf`). The Verilator build
    (:class:`tb.multicore.harness.EngineRingHarness`) passes ``Leaf`` instances for both."""

    def __init__(self, cfg, engine=CollectiveEngine, *, sbuf=None):
        self.cfg, self.n = cfg, cfg.ring_size
        n = self.n
        self.eng = [engine(cfg) for _ in range(n)]
        self.sbuf = [(sbuf or ring_sbuf)(cfg) for _ in range(n)]
        self.tx = [LinkTX(cfg, dateline=(r == n - 1)) for r in range(n)] if n > 1 else []
        self.rx = [LinkRX(cfg) for _ in range(n)] if n > 1 else []
        self.fwd = [DelayLine(cfg.link_flit_bits, cfg.link_latency)
                    for _ in range(n)] if n > 1 else []
        self.rev = [DelayLine(LINK_VCS, cfg.link_latency, in_memory=False)
                    for _ in range(n)] if n > 1 else []
        self.watchdog = Signal(32)
        self.cut = Signal(range(n + 1), init=n)          # link index cut (n: none)

    def elaborate(self, platform):
        m = Module()
        n = self.n
        for r in range(n):
            e, sb = self.eng[r], self.sbuf[r]
            m.submodules[f"eng{r}"], m.submodules[f"sbuf{r}"] = e, sb
            m.d.comb += e.rank.eq(r)
            for a, b in ((e.rd, sb.cc_r), (e.wr, sb.cc_w)):
                m.d.comb += [b.req.valid.eq(a.req.valid), b.req.payload.eq(a.req.payload),
                             a.req.ready.eq(b.req.ready), a.rsp.valid.eq(b.rsp.valid),
                             a.rsp.payload.eq(b.rsp.payload)]
            credit = "tx_credit" in e.signature.members
            if n == 1:
                m.d.comb += [e.tx.ready.eq(1), e.link_err.eq(0)]
                if credit:
                    m.d.comb += e.tx_credit.eq(self.cfg.link_credits)
                continue
            tx, rx = self.tx[r], self.rx[r]
            m.submodules[f"tx{r}"], m.submodules[f"rx{r}"] = tx, rx
            m.submodules[f"fwd{r}"], m.submodules[f"rev{r}"] = self.fwd[r], self.rev[r]
            m.d.comb += [tx.i[0].valid.eq(e.tx.valid), tx.i[0].payload.eq(e.tx.payload),
                         e.tx.ready.eq(tx.i[0].ready), tx.i[1].valid.eq(0),
                         tx.watchdog.eq(self.watchdog), rx.watchdog.eq(self.watchdog),
                         rx.expect.eq(e.rx_expect),
                         e.link_err.eq(tx.err | rx.err),
                         e.link_info.eq(Mux(rx.err, rx.err_info, tx.err_info))]
            if credit:                  # the engine feeds i[0]; the dateline port sends VC1
                m.d.comb += e.tx_credit.eq(tx.credits[int(r == n - 1)])
            for v in range(LINK_VCS):
                m.d.comb += [e.rx[v].valid.eq(rx.o[v].valid), e.rx[v].payload.eq(rx.o[v].payload),
                             rx.o[v].ready.eq(e.rx[v].ready)]
        for r in range(n if n > 1 else 0):
            nxt = (r + 1) % n
            live = self.cut != r
            tx, rx, fwd, rev = self.tx[r], self.rx[nxt], self.fwd[r], self.rev[r]
            m.d.comb += [fwd.i.eq(tx.w_flit.as_value()), fwd.i_valid.eq(tx.w_valid & live),
                         rx.w_valid.eq(fwd.o_valid), rx.w_flit.eq(fwd.o),
                         rev.i.eq(rx.credit), rev.i_valid.eq(live),
                         tx.credit.eq(rev.o & Mux(rev.o_valid, 3, 0))]
        return m


#: The row ports of a rank's SBUF (:func:`ring_sbuf`): the engine's reads and its writes.
RING_SBUF_PORTS = ("cc_r", "cc_w")


def ring_sbuf(cfg):
    """One rank's SBUF: row ports ``cc_r`` (the engine's reads) and ``cc_w`` (its writes)."""
    return SBUF(cfg, row_ports=RING_SBUF_PORTS)


def instr_fields(raw, cfg):
    """The engine's ``instr`` payload (a dict for ``ctx.set``) of 128 instruction bytes."""
    ins = decode(bytes(raw))
    out = {"opcode": OPS_BY_NAME[ins.op].code, "op": ins.imm.get("op", 0),
           "stream": ins.imm.get("stream", 0), "d": ins.imm.get("d", 0)}
    for slot, nm in (("ap0", "dst"), ("ap1", "src")):
        a = ins.aps[slot]
        eb = ELEM_BYTES.get(a.dtype, 4)
        dims = list(a.dims)[:cfg.ap_dims] + [(0, 0)] * (cfg.ap_dims - len(a.dims))
        out[f"{nm}_dtype"] = DTYPE_CODES[a.dtype]
        out[nm] = {"mem": a.mem, "start": a.start, "count": a.count,
                   "esize": {1: 0, 2: 1, 4: 2}[eb], "offset": a.offset,
                   "dims": [{"step": s, "num": k} for s, k in dims]}
    return out


def run_engines(bench, rig, raws, images, *, watchdog=0, cut=None, max_cycles=200_000):
    """Run one instruction per rank (``raws[r]``) on ``rig`` from SBUF ``images[r]``
    (partitions x bytes); ``(statuses, infos, images after, cycles)``. Each rank's status is
    its ``done``; a run longer than ``max_cycles`` raises ``TimeoutError``."""
    cfg, n = rig.cfg, rig.n
    res = {}

    async def job(ctx):
        ctx.set(rig.watchdog, watchdog)
        ctx.set(rig.cut, n if cut is None else cut)
        for r in range(n):
            preload_sbuf(ctx, rig.sbuf[r], images[r])
        for r in range(n):
            ctx.set(rig.eng[r].instr.payload, instr_fields(raws[r], cfg))
            ctx.set(rig.eng[r].instr.valid, 1)
            ctx.set(rig.eng[r].done.ready, 1)
        got = [None] * n
        await ctx.tick()                  # every engine is idle: each takes its instruction
        for e in rig.eng:
            ctx.set(e.instr.valid, 0)
        cyc = 0
        while cyc < max_cycles:
            await ctx.tick()
            cyc += 1
            for r, e in enumerate(rig.eng):
                if got[r] is None and ctx.get(e.done.valid):
                    got[r] = (ctx.get(e.done.payload.status), ctx.get(e.done.payload.info))
            if all(g is not None for g in got):
                break
        if any(g is None for g in got):
            raise TimeoutError(f"engines did not finish in {max_cycles} cycles: {got}")
        for _ in range(4):
            await ctx.tick()
        res["st"] = got
        res["cycles"] = cyc + 1          # with the issue cycle
        res["img"] = [dump_sbuf(ctx, s) for s in rig.sbuf]

    bench.run(job)
    return ([g[0] for g in res["st"]], [g[1] for g in res["st"]], res["img"], res["cycles"])


def empty_image(cfg):
    """An all-zero SBUF image (partitions x bytes)."""
    return np.zeros((cfg.partitions, cfg.sbuf_bytes_per_partition), np.uint8)
