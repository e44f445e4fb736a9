# SPDX-License-Identifier: Apache-2.0
"""The SBUF-fed tensor engine in a testable system: :class:`FedSystem` (SBUF + the fed engine +
an optional synthetic full-rate writer on a partition port) and :func:`fed_program`, which lays a
:class:`tb.tensor.program.Program`'s stationary and moving beats out in SBUF behind random access
patterns (contiguous, reversed, strided, two-dimensional) and turns its commands into fed
commands. Expected results stay the program's golden ones (``golden/tensor.py``)."""

from __future__ import annotations

import numpy as np
from amaranth.hdl import Module, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from golden.ap import AP, ELEM_BYTES, addresses, check
from rtl.mem.sbuf import SBUF
from rtl.tensor.layouts import OP_LOAD, OP_MATMUL, TensorLayouts
from rtl.tensor.sbuf_fed import SbufTensorEngine
from tb.ap.program import pack_ap

__all__ = ["FedSystem", "fed_program", "FedProgram"]


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
        self.sbuf = SBUF(cfg, row_ports=("tensor_st", "tensor_mv"), part_ports=("dma",),
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


class FedProgram:
    """Fed command words and the SBUF image of a :class:`~tb.tensor.program.Program`.

    Attributes
    ----------
    cmds : list of int
        Fed commands (``SbufTensorEngine.Signature(cfg).cmd_layout``).
    image : ndarray (partitions, sbuf_bytes_per_partition) uint8
    aps : list of AP or None
        The AP of each command (None for transpose / read).
    """

    def __init__(self, cmds, image, aps):
        self.cmds, self.image, self.aps = cmds, image, aps


def _pattern(rng, count, w, base, style):
    """An AP (dims, offset) walking ``count`` distinct elements of ``w`` bytes in
    ``[base, base + span)``; returns ``(AP, bytes used)``."""
    if style == "reversed":
        dims, off, used = ((-1, count),), base + (count - 1) * w, count * w
    elif style == "strided":
        s = int(rng.integers(2, 4))
        dims, off, used = ((s, count),), base, ((count - 1) * s + 1) * w
    elif style == "2d" and count % 2 == 0 and count >= 4:
        h = count // 2          # two rows of h, the second row first (negative outer step)
        dims, off, used = ((1, h), (-(h + 1), 2)), base + (h + 1) * w, (2 * h + 1) * w
    else:
        dims, off, used = ((1, count),), base, count * w
    return dims, off, used


def fed_program(cfg, prog, rng, *, st_bank=0, mv_bank=1):
    """Lay ``prog``'s beats out in SBUF (stationary operands in bank ``st_bank``, moving ones in
    ``mv_bank``, one region after the other, wrapping) behind random patterns; return a
    :class:`FedProgram`. Every AP is checked legal with :func:`golden.ap.check`."""
    tl = TensorLayouts(cfg)
    sig = SbufTensorEngine.Signature(cfg)
    lay = sig.cmd_layout
    P = cfg.partitions
    image = rng.integers(0, 256, (P, cfg.sbuf_bytes_per_partition), np.uint8)
    st_it, mv_it = iter(prog.st), iter(prog.mv)
    cur = {st_bank: 0, mv_bank: 0}
    cmds, aps = [], []
    W = tl.code_width
    for word in prog.cmds:
        c = data.Const(tl.cmd, word)
        op = int(c.op)
        if op in (OP_LOAD, OP_MATMUL):
            count = int(c.m) if op == OP_LOAD else int(c.n)
            w = ELEM_BYTES[tl.pe_formats[int(c.fmt)].name]
            sp = int(c.sp) if tl.sparse else 0
            fw = w                      # a format's element bytes (pair half of a sparse load)
            if sp:                      # sparse: (value, tag) pairs / 32-bit packed lanes
                w = 2 * w if op == OP_LOAD else 4
            bank = st_bank if op == OP_LOAD else mv_bank
            style = str(rng.choice(["contiguous", "reversed", "strided", "2d"]))
            dims, off0, used = _pattern(rng, count, w, 0, style)
            if cur[bank] + used > cfg.sbuf_bank_bytes:
                cur[bank] = 0
            base = bank * cfg.sbuf_bank_bytes + cur[bank]
            cur[bank] += -(-used // 4) * 4
            ap = AP(offset=base + off0, elem_bytes=w, dims=dims, num_partitions=P)
            assert check(cfg, ap) is None, (ap, check(cfg, ap))
            beats = [next(st_it if op == OP_LOAD else mv_it) for _ in range(count)]
            for a, beat in zip(addresses(ap).tolist(), beats):
                for k in range(cfg.pe_rows):
                    code = (beat >> (k * W)) & ((1 << W) - 1)
                    if sp and op == OP_LOAD:
                        tb_ = tl.tag_bits
                        tag = (beat >> (tl.lanes_in.size + k * tb_)) & ((1 << tb_) - 1)
                        code |= tag << (8 * fw)
                    image[k, a:a + w] = np.frombuffer(int(code).to_bytes(w, "little"), np.uint8)
        else:
            ap = None
        aps.append(ap)
        apw = pack_ap(lay["ap"].shape, ap, cfg.ap_dims) if ap is not None else 0
        # cmd_layout = {"cmd", "ap"}: the command word in the low bits, the AP above
        assert lay["ap"].offset == tl.cmd.size
        cmds.append(int(word) | (apw << tl.cmd.size))
    return FedProgram(cmds, image, aps)
