# SPDX-License-Identifier: Apache-2.0
"""Test rigs of the AP reader/writer: an :class:`APReader` and an :class:`APWriter` on the row
ports of an SBUF (with a priority "hog" row port a testbench drives to steal cycles) or of a
PSUM unit, plus the per-cycle amaranth.sim driver that streams descriptors and elements; and
:class:`FedSystem`, the SBUF-fed tensor engine on an SBUF (its programs: :mod:`tb.mem.program`)."""

from __future__ import annotations

import numpy as np
from amaranth.hdl import Elaboratable, Module, Signal, Value
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from golden.ap import E_OK, addresses, error_code, partition_mask
from rtl.mem.apport import APReader, APWriter
from rtl.mem.port import SBUF
from rtl.mem.sbuf import SBUF as SbufMem
from rtl.tensor.psum import PsumUnit
from rtl.tensor.sbuf_fed import SbufTensorEngine
from tb.ap.program import pack_ap

__all__ = ["APRig", "reader_job", "writer_job", "run_jobs", "lane_of", "expected_reads",
           "apply_writes", "preload_sbuf", "dump_sbuf", "FedSystem"]


class APRig(Elaboratable):
    """``reader`` and ``writer`` on ``memory`` ("sbuf": row ports ``reader``/``writer`` of ``mem``, an
    :class:`rtl.mem.sbuf.SBUF` with a priority port ``hog``; "psum": of a ``PsumUnit``); with
    ``prefetch`` the reader has two generators."""

    def __init__(self, cfg, memory, *, prefetch=False):
        self.cfg, self.memory = cfg, memory
        if memory == SBUF:
            self.mem = SbufMem(cfg, row_ports=("hog", "reader", "writer"), priority=("hog",))
            lat = self.mem.signature.latency
        else:
            self.mem = PsumUnit(cfg, use_instances=False, row_ports=("hog", "reader", "writer"))
            lat = self.mem.signature.row_latency
        self.reader = APReader(cfg, memory, mem_latency=lat, prefetch=prefetch)
        self.writer = APWriter(cfg, memory)

    def elaborate(self, platform):
        m = Module()
        m.submodules.mem = self.mem
        m.submodules.reader = self.reader
        m.submodules.writer = self.writer
        wiring.connect(m, self.reader.port, self.mem.reader)
        wiring.connect(m, self.writer.port, self.mem.writer)
        return m


def lane_of(mem_bytes, p, addr, w):
    """The reader's expected data for partition ``p`` at byte ``addr``, element of ``w`` bytes:
    the bytes ``[addr, addr + w)`` little-endian (``mem_bytes`` = partitions x bytes)."""
    return int.from_bytes(mem_bytes[p, addr:addr + w].tobytes(), "little")


def _idle(ctx, rig):
    for s in (rig.reader.i.valid, rig.writer.i.valid, rig.writer.el.valid,
              rig.mem.hog.req.valid):
        ctx.set(s, 0)


def run_jobs(bench, *jobs):
    """Run the testbench jobs (``async def job(ctx)``) one after the other in one simulation
    (memories keep their contents between them)."""
    async def seq(ctx):
        for j in jobs:
            await j(ctx)
    bench.run(seq)


def reader_job(rig, aps, *, rng, p_ready=1.0, p_hog=0.0, limit=None):
    """A testbench job (and the dict it fills) that streams ``aps`` into the rig's reader (each
    held until taken), takes ``o`` with probability ``p_ready`` and lets the hog steal the
    memory with probability ``p_hog``. The dict gets ``res``: per accepted descriptor
    ``[(mask, last, [lane data...]) ...]``; ``errs``: the codes of the rejected ones (an ``err``
    strobe may come while elements of the previous descriptor are still buffered, so the two
    lists are kept apart); and timing: ``takes``
    (cycle each descriptor was taken), ``elems`` (cycle of each element), ``reqs`` (cycles with
    ``port.req.valid``)."""
    cfg = rig.cfg
    P = cfg.partitions
    lay = rig.reader.signature.desc_layout
    words = [pack_ap(lay, ap, cfg.ap_dims) for ap in aps]
    n_el = sum(ap.count for ap in aps if error_code(cfg, ap) == E_OK)
    limit = limit or int(4 * (n_el / max(p_ready, 0.05) + 10 * len(aps)) / max(0.1, 1 - p_hog)
                         ) + 100
    out = {"res": [], "errs": [], "takes": [], "elems": [], "reqs": []}

    async def job(ctx):
        _idle(ctx, rig)
        j, cur, t, pending = 0, [], 0, len(aps)
        hog_lay = rig.mem.hog.req.payload.shape()
        while pending:
            ctx.set(rig.reader.i.valid, int(j < len(aps)))
            if j < len(aps):
                ctx.set(Value.cast(rig.reader.i.payload), words[j])
            ctx.set(rig.reader.o.ready, int(rng.random() < p_ready))
            hog = rng.random() < p_hog
            ctx.set(rig.mem.hog.req.valid, int(hog))
            if hog:
                ctx.set(rig.mem.hog.req.payload, hog_lay.const(
                    {"addr": int(rng.integers(1 << len(rig.mem.hog.req.payload.addr))),
                     "mask": 1, "we": 0}))
            if j < len(aps) and ctx.get(rig.reader.i.ready):
                out["takes"].append(t)
                j += 1
            if ctx.get(rig.reader.port.req.valid):
                out["reqs"].append(t)
            if ctx.get(rig.reader.o.valid) and ctx.get(rig.reader.o.ready):
                o = rig.reader.o.payload
                d = ctx.get(Value.cast(o.data))
                last = ctx.get(o.last)
                cur.append((ctx.get(o.mask), last,
                            [(d >> (32 * p)) & 0xFFFFFFFF for p in range(P)]))
                out["elems"].append(t)
                if last:
                    out["res"].append(cur)
                    cur, pending = [], pending - 1
            if ctx.get(rig.reader.err):
                # may come while earlier elements are still buffered: kept in its own list
                out["errs"].append(ctx.get(rig.reader.err_code))
                pending -= 1
            await ctx.tick()
            t += 1
            assert t < limit, f"{pending} descriptors unfinished after {limit} cycles (hang)"
        _idle(ctx, rig)
    return job, out


def writer_job(rig, aps, elems, *, rng, p_valid=1.0, p_hog=0.0, limit=None):
    """A testbench job (and the dict it fills) that streams ``aps`` into the rig's writer and
    ``elems`` (per accepted descriptor, a list of per-partition lane lists) on ``el``, with gaps
    (``p_valid``) and hog steals. The dict gets
    ``errs`` (codes strobed), ``writes`` (cycles of granted writes), ``done`` (strobes)."""
    cfg = rig.cfg
    lay = rig.writer.signature.desc_layout
    ell = rig.writer.signature.elem_layout
    words = [pack_ap(lay, ap, cfg.ap_dims) for ap in aps]
    flat = [e for es in elems for e in es]
    n_bad = sum(error_code(cfg, ap) != E_OK for ap in aps)
    limit = limit or int(4 * (len(flat) / max(p_valid, 0.05) + 10 * len(aps))
                         / max(0.1, 1 - p_hog)) + 100
    out = {"errs": [], "writes": [], "done": 0}

    async def job(ctx):
        _idle(ctx, rig)
        j, k, t = 0, 0, 0
        hog_lay = rig.mem.hog.req.payload.shape()
        while j < len(aps) or k < len(flat) or ctx.get(rig.writer.busy) \
                or len(out["errs"]) < n_bad:
            ctx.set(rig.writer.i.valid, int(j < len(aps)))
            if j < len(aps):
                ctx.set(Value.cast(rig.writer.i.payload), words[j])
            ev = k < len(flat) and rng.random() < p_valid
            ctx.set(rig.writer.el.valid, int(ev))
            if ev:
                ctx.set(rig.writer.el.payload, ell.const({"data": flat[k], "mask": 0,
                                                          "last": 0}))
            hog = rng.random() < p_hog
            ctx.set(rig.mem.hog.req.valid, int(hog))
            if hog:
                ctx.set(rig.mem.hog.req.payload, hog_lay.const(
                    {"addr": int(rng.integers(1 << len(rig.mem.hog.req.payload.addr))),
                     "mask": 1, "we": 0}))
            if j < len(aps) and ctx.get(rig.writer.i.ready):
                j += 1
            if ev and ctx.get(rig.writer.el.ready):
                k += 1
            if ctx.get(rig.writer.port.req.valid) and ctx.get(rig.writer.port.req.ready):
                out["writes"].append(t)
            if ctx.get(rig.writer.err):
                out["errs"].append(ctx.get(rig.writer.err_code))
            out["done"] += ctx.get(rig.writer.done)
            await ctx.tick()
            t += 1
            assert t < limit, f"writer unfinished after {limit} cycles (hang): {j} APs, {k} els"
        _idle(ctx, rig)
    return job, out


def expected_reads(cfg, aps, mem_bytes):
    """Golden reader output of ``aps`` over memory contents ``mem_bytes`` (partitions x bytes,
    PSUM: byte address ``bank * psum_bank_bytes + byte``), as :func:`reader_job` fills it:
    ``(res, errs)``; lanes outside the mask are ``None`` (undefined)."""
    res, errs = [], []
    for ap in aps:
        code = error_code(cfg, ap)
        if code != E_OK:
            errs.append(code)
            continue
        mask = partition_mask(ap)
        addrs = addresses(ap).tolist()
        res.append([(mask, int(i == len(addrs) - 1),
                     [lane_of(mem_bytes, p, a, ap.elem_bytes) if mask >> p & 1 else None
                      for p in range(cfg.partitions)])
                    for i, a in enumerate(addrs)])
    return res, errs


def apply_writes(cfg, aps, elems, mem_bytes, lanes=None):
    """Apply ``aps`` with their ``elems`` to ``mem_bytes`` in order (golden writer): element k's
    low ``elem_bytes`` bytes at its address in every partition of the mask (partitions
    ``>= lanes`` untouched, e.g. PSUM lanes beyond ``pe_cols``)."""
    lanes = cfg.partitions if lanes is None else lanes
    it = iter(elems)
    for ap in aps:
        if error_code(cfg, ap) != E_OK:
            continue
        es = next(it)
        mask = partition_mask(ap)
        for a, e in zip(addresses(ap).tolist(), es):
            for p in range(lanes):
                if mask >> p & 1:
                    v = e[p] & ((1 << (8 * ap.elem_bytes)) - 1)
                    mem_bytes[p, a:a + ap.elem_bytes] = np.frombuffer(
                        v.to_bytes(ap.elem_bytes, "little"), np.uint8)
    return mem_bytes


def preload_sbuf(ctx, sbuf, mem_bytes):
    """Write ``mem_bytes`` (partitions x bytes) into the bank memories of ``sbuf`` (backdoor)."""
    cfg = sbuf.cfg
    WB, BB = cfg.sbuf_word_bytes, cfg.sbuf_bank_bytes
    for b, bank in enumerate(sbuf.banks):
        for i in range(BB // WB):
            a = b * BB + i * WB
            word = 0
            for p in range(cfg.partitions):
                word |= int.from_bytes(mem_bytes[p, a:a + WB].tobytes(), "little") << (p * WB * 8)
            ctx.set(bank.data[i], word)


def dump_sbuf(ctx, sbuf):
    """The contents of ``sbuf`` as partitions x bytes (backdoor)."""
    cfg = sbuf.cfg
    WB, BB = cfg.sbuf_word_bytes, cfg.sbuf_bank_bytes
    out = np.zeros((cfg.partitions, cfg.sbuf_bytes_per_partition), np.uint8)
    for b, bank in enumerate(sbuf.banks):
        for i in range(BB // WB):
            word = ctx.get(bank.data[i])
            for p in range(cfg.partitions):
                a = b * BB + i * WB
                out[p, a:a + WB] = np.frombuffer(
                    ((word >> (p * WB * 8)) & ((1 << (8 * WB)) - 1)).to_bytes(WB, "little"),
                    np.uint8)
    return out


class FedSystem(wiring.Component):
    """SBUF (row ports ``tensor_st``/``tensor_mv`` with priority, partition port ``dma``) and an
    :class:`SbufTensorEngine` on it; with ``writer`` a synthetic DMA that, while ``wr_en`` is
    high, writes one full word per cycle to partition ``wr_part`` of bank ``wr_bank``
    (addresses cycling through the bank), counting writes granted and cycles stalled.

    Members: ``cmd``, ``res`` (the engine's), ``busy``, ``mv_fire``, ``psum_we``, ``err``,
    ``err_code``, ``ap_err``, ``ap_err_code``; ``wr_en``, ``wr_bank`` in; ``wr_count``,
    ``wr_stall`` out.
    """

    def __init__(self, cfg, *, use_instances=False, writer=True, yield_after=16):
        self.cfg = cfg
        self.sbuf = SbufMem(cfg, row_ports=("tensor_st", "tensor_mv"), part_ports=("dma",),
                            priority=("tensor_st", "tensor_mv"), yield_after=yield_after)
        self.fed = SbufTensorEngine(cfg, use_instances=use_instances)
        self.writer = writer
        fs = self.fed.signature
        super().__init__({
            "cmd": In(stream.Signature(fs.cmd_layout)),
            "res": Out(stream.Signature(fs.tl.lanes_out)),
            "busy": Out(1), "mv_fire": Out(1), "psum_we": Out(1), "err": Out(1),
            "err_code": Out(3), "ap_err": Out(1), "ap_err_code": Out(8),
            "wr_en": In(1), "wr_bank": In(range(max(2, cfg.sbuf_banks))),
            "wr_count": Out(32), "wr_stall": Out(32),
        })

    def elaborate(self, platform):
        m = Module()
        cfg = self.cfg
        m.submodules.sbuf = sb = self.sbuf
        m.submodules.fed = fed = self.fed
        wiring.connect(m, fed.st_port, sb.tensor_st)
        wiring.connect(m, fed.mv_port, sb.tensor_mv)
        wiring.connect(m, wiring.flipped(self.cmd), fed.cmd)
        wiring.connect(m, fed.res, wiring.flipped(self.res))
        for n in ("busy", "mv_fire", "psum_we", "err", "err_code", "ap_err", "ap_err_code"):
            m.d.comb += getattr(self, n).eq(getattr(fed, n))
        req = sb.dma.req
        if self.writer:
            WB = cfg.sbuf_word_bytes
            words = cfg.sbuf_bank_bytes // WB
            idx = Signal(range(words))
            word_bits = (words - 1).bit_length()
            bank_shift = (cfg.sbuf_bank_bytes - 1).bit_length()
            addr = (self.wr_bank << bank_shift) | (idx << (WB.bit_length() - 1)) \
                if word_bits else self.wr_bank << bank_shift
            m.d.comb += [req.valid.eq(self.wr_en), req.payload.addr.eq(addr),
                         req.payload.part.eq(idx[:max(1, (cfg.partitions - 1).bit_length())]),
                         req.payload.we.eq(1), req.payload.be.eq(-1),
                         req.payload.wdata.eq(self.wr_count)]
            with m.If(req.valid & req.ready):
                m.d.sync += [idx.eq(idx + 1), self.wr_count.eq(self.wr_count + 1)]
            with m.If(req.valid & ~req.ready):
                m.d.sync += self.wr_stall.eq(self.wr_stall + 1)
        return m
