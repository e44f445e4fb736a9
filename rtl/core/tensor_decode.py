# SPDX-License-Identifier: Apache-2.0
"""The tensor engine's instruction decoder: raw instructions from its sequencer into
:class:`~rtl.tensor.sbuf_fed.SbufTensorEngine` commands, with the shape checks of
``docs/isa.md`` §6 before anything is issued, and one completion per instruction."""

from __future__ import annotations

from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import data, fifo, stream, wiring
from amaranth.lib.wiring import In, Out

from rtl import isa
from rtl.isa import E_AP_FORM, E_FLAGS, E_FORMAT, E_OPCODE, E_SHAPE, E_SPARSE_TAG, ERROR_BITS
from rtl.config import AP_MAX_DIMS, E8M0, CoreConfig, check_config
from rtl.mem.ap import esize_of
from rtl.core.sequencer import Sequencer
from rtl.tensor.layouts import (ERR_FORMAT, ERR_OPCODE, ERR_PAIR, ERR_SHAPE, ERR_SPARSE,
                                OP_LOAD, OP_MATMUL, OP_TRANSPOSE)
from rtl.tensor.sbuf_fed import SbufTensorEngine

__all__ = ["TensorDecoder", "decode_ap", "E_FORMAT", "E_SHAPE", "E_FLAGS", "E_SPARSE_TAG",
           "E_AP_FORM", "ENGINE_STATUS", "sparse_load_formats"]

#: Engine error code -> status (docs/architecture.md §11.2).
ENGINE_STATUS = {ERR_SHAPE: E_SHAPE, ERR_FORMAT: E_FORMAT, ERR_PAIR: E_FORMAT,
                 ERR_OPCODE: E_OPCODE, ERR_SPARSE: E_SPARSE_TAG}
#: Cycles after a command is dispatched before the engine's ``busy`` is trusted.
_SETTLE = 3
#: Instructions taken and not yet completed (the engine's command queue plus the readers').
_PENDING = 8
#: Bound on the engine operations issued and not done that a ticket comparison must
#: distinguish (the engine's op FIFO, the instructions taken and not completed, and margin); the
#: decoder's operation counters count modulo twice this.
_TICKETS = 32
#: dtypes no AP may address yet (packed FP4 is [later]): E_FORMAT, like the reserved codes.
_NO_ELEMENT = ("fp4_e2m1",)


def _esizes(cfg):
    """``{dtype name: AP esize}`` of every dtype an AP may address (``rtl.mem.ap.esize_of``)."""
    return {n: esize_of(E8M0 if n == "e8m0" else cfg.fmt(n))
            for n in isa.DTYPES if n not in _NO_ELEMENT}


def sparse_load_formats(tl):
    """Indices (into ``tl.pe_formats``) of the formats a sparse ``load_stationary`` takes: the
    dense ones of 8 or 16 bits (a (value, tag) pair element is twice the format's size and
    at most 4 bytes; docs/isa.md §6)."""
    nd = len(tl.cfg.formats)
    return tuple(i for i, f in enumerate(tl.pe_formats[:nd]) if f.width in (8, 16))


def _ap_fields(raw, slot):
    return {f.name: isa.ap_bits(raw, slot, f.name) for f in isa.AP_FIELDS}


def decode_ap(m, raw, slot, desc, cfg, name):
    """Drive ``desc`` (an :class:`~rtl.mem.ap.APGenerator` descriptor view) from AP ``slot``
    of ``raw``; returns ``(fields, elements, esize_ok, form_ok)``: the raw fields, the element
    count (saturated at ``2**16``), whether the dtype has an element size, and whether no
    dimension beyond ``cfg.ap_dims`` is used."""
    f = _ap_fields(raw, slot)
    esize = Signal(2, name=f"{name}_esize")
    esize_ok = Signal(name=f"{name}_esize_ok")
    with m.Switch(f["dtype"]):
        for dt, e in _esizes(cfg).items():
            with m.Case(isa.DTYPE_CODES[dt]):
                m.d.comb += [esize.eq(e), esize_ok.eq(1)]
    m.d.comb += [desc.mem.eq(f["mem"]), desc.start.eq(f["start"]), desc.count.eq(f["count"]),
                 desc.esize.eq(esize), desc.offset.eq(f["offset"])]
    for d in range(cfg.ap_dims):
        m.d.comb += [desc.dims[d].step.eq(f[f"step{d}"].as_signed()),
                     desc.dims[d].num.eq(f[f"num{d}"])]
    form_ok = Signal(name=f"{name}_form_ok")
    m.d.comb += form_ok.eq(Cat(f[f"num{d}"] == 0 for d in range(cfg.ap_dims, AP_MAX_DIMS)).all()
                           if cfg.ap_dims < AP_MAX_DIMS else 1)
    lim = 1 << 16
    count = Signal(range(lim + 1), name=f"{name}_elements")
    acc = 1
    for d in range(cfg.ap_dims):
        nd = f[f"num{d}"]
        prod = acc * Mux(nd == 0, 1, nd)
        acc = Mux(prod > lim, lim, prod)[:17]
    m.d.comb += count.eq(acc)
    return f, count, esize_ok, form_ok


class TensorDecoder(wiring.Component):
    """Decodes tensor-engine instructions and runs them on an ``SbufTensorEngine``.

    Instructions overlap: one is taken per cycle while the engine's command queue has room, and
    they complete in order. An instruction is checked (``docs/isa.md`` §6): a shape, flag or
    format error becomes its completion status (nothing is issued). Otherwise the decoder
    issues its command (the command word and its AP); the instruction completes when the
    engine dispatched the command (``eng_disp``), with the reader's AP error or the engine's
    rejection as its status. An instruction whose completion is observable (a semaphore post
    or an interrupt in ``ctl``) waits longer, so whoever waits on the post sees its results:

    * a matmul or transpose waits for its own operation's completion: the engine pulses
      ``eng_op_done`` once per operation it took (``eng_op_issue``), in order, when that
      operation's PSUM writes have all landed. The decoder counts both (modulo
      ``2 * _TICKETS``); a dispatch record keeps the issue count including its own operation
      (its *ticket*), and the instruction completes once the done count reaches it. Every
      earlier operation completed before it (in order), every earlier load finished before it
      was taken (the engine takes a matmul only when no load runs), and the following
      matmuls keep streaming: the array is not drained.
    * a ``load_stationary`` that posts or raises an interrupt, and a sparse one (its tags are
      checked beat by beat), completes only when the engine has gone idle after its
      dispatch; its status is then the engine's first error (``eng_err``), or 0.

    An AP error of a later instruction that dispatched meanwhile is that instruction's own
    status, from its dispatch record (found by the 10^5-instruction differential run: it used
    to complete the waiting instruction, and the error named the wrong index). Since every
    error stops the core (§11.3), a sticky first error is enough.

    Parameters
    ----------
    cfg : CoreConfig

    Members
    -------
    issue : In(stream.Signature(Sequencer issue_layout))
    done : Out(stream.Signature(Sequencer done_layout))
    cmd : Out(stream.Signature(SbufTensorEngine cmd_layout))
    eng_busy, eng_err : In(1); eng_err_code : In(3)
        The engine's status members (its feed-level AP errors arrive in the dispatch
        records).
    eng_disp, eng_disp_reject : In(1); eng_disp_code : In(ERROR_BITS)
        The engine's dispatch events (:class:`~rtl.tensor.sbuf_fed.SbufTensorEngine`).
    eng_op_issue, eng_op_done : In(1)
        The engine's operation issue (with the ``eng_disp`` of a matmul or transpose it took)
        and in-order operation completion (its PSUM writes landed).
    """

    class Signature(wiring.Signature):
        def __init__(self, cfg: CoreConfig):
            check_config(cfg, "TensorDecoder")
            seq = Sequencer.Signature(cfg, "pe")
            self.fed = SbufTensorEngine.Signature(cfg)
            super().__init__({
                "issue": In(stream.Signature(seq.issue_layout)),
                "done": Out(stream.Signature(seq.done_layout)),
                "cmd": Out(stream.Signature(self.fed.cmd_layout)),
                "eng_busy": In(1), "eng_err": In(1), "eng_err_code": In(3),
                "eng_disp": In(1), "eng_disp_code": In(ERROR_BITS), "eng_disp_reject": In(1),
                "eng_op_issue": In(1), "eng_op_done": In(1),
            })

    def __init__(self, cfg: CoreConfig):
        super().__init__(self.Signature(cfg))
        self.cfg = cfg

    def elaborate(self, platform):
        m = Module()
        cfg, sig = self.cfg, self.signature
        tl = sig.fed.tl
        raw = self.issue.payload.raw
        opcode, flags = isa.header_bits(raw, "opcode"), isa.header_bits(raw, "flags")
        cmd = Signal(sig.fed.cmd_layout)
        op = isa.OPS_BY_NAME

        # the source AP (ap1) goes to the reader; the PSUM AP (ap0) is only checked here
        src, n_src, esz_ok, form_ok = decode_ap(m, raw, "ap1", cmd.ap, cfg, "src")
        dst = _ap_fields(raw, "ap0")
        dst_form = Cat(dst[f"num{d}"] == 0 for d in range(1, AP_MAX_DIMS)).all()
        # the format index of the source dtype among the engine's formats
        fmt_ok = Signal()
        with m.Switch(src["dtype"]):
            for i, f in enumerate(tl.pe_formats):
                if f.name in isa.DTYPE_CODES:
                    with m.Case(isa.DTYPE_CODES[f.name]):
                        m.d.comb += [cmd.cmd.fmt.eq(i), fmt_ok.eq(1)]
        last_m = Signal(range(cfg.pe_cols + 1))        # columns of the last load
        last_k = Signal(range(cfg.pe_rows + 1))
        bank_bytes = cfg.psum_bank_bytes
        bank = dst["offset"] // bank_bytes
        psum_ok = ((dst["mem"] == 2) & (dst["start"] == 0)
                   & (dst["dtype"] == isa.DTYPE_CODES["fp32"])
                   & (dst["offset"] % bank_bytes == 0) & (bank < cfg.psum_banks)
                   & (dst["step0"] == 1) & dst_form & (dst["count"] == last_m))
        src_ok = (src["mem"] == 1) & (src["start"] == 0) & (src["count"] != 0) \
            & (src["count"] <= cfg.pe_rows)
        m.d.comb += [cmd.cmd.k.eq(src["count"]), cmd.cmd.bank.eq(bank),
                     cmd.cmd.acc.eq(flags[isa.FLAG_BITS["acc"]])]

        # the sparse flag: sp_n:sp_m names an enabled pattern (cmd sp = its index + 1); a
        # sparse load's elements are (value, tag) pairs twice the format's size, a sparse
        # matmul's are 32-bit lanes of CR packed elements (docs/isa.md §6)
        fb = isa.FLAG_BITS
        sparse = flags[fb["sparse"]]
        sp_ok = Signal()
        sp_ld_fmt = Signal()
        if tl.sparse:
            sp_n = isa.imm_bits(raw, "load_stationary", "sp_n")
            sp_m = isa.imm_bits(raw, "load_stationary", "sp_m")
            for i, (pn, pm) in enumerate(tl.patterns):
                with m.If((sp_n == pn) & (sp_m == pm)):
                    m.d.comb += [sp_ok.eq(1), cmd.cmd.sp.eq(Mux(sparse, i + 1, 0))]
            m.d.comb += sp_ld_fmt.eq(Cat(*[cmd.cmd.fmt == i for i in sparse_load_formats(tl)]
                                         ).any())
            wide16 = Cat(*[cmd.cmd.fmt == i for i in sparse_load_formats(tl)
                           if tl.pe_formats[i].width == 16]).any()
            with m.If(sparse & (opcode == op["load_stationary"].code)):
                m.d.comb += cmd.ap.esize.eq(Mux(wide16, 2, 1))      # 2- or 4-byte pairs
            with m.If(sparse & (opcode == op["multiply_moving"].code)):
                m.d.comb += cmd.ap.esize.eq(2)                       # 32-bit lanes
        ld_flags = (1 << fb["sparse"]) if tl.sparse else 0
        mm_flags = (1 << fb["acc"]) | ld_flags
        status = Signal(ERROR_BITS)
        with m.Switch(opcode):
            with m.Case(op["load_stationary"].code):
                m.d.comb += [cmd.cmd.op.eq(OP_LOAD), cmd.cmd.m.eq(n_src)]
                with m.If((flags & (0xFF & ~ld_flags)) != 0):
                    m.d.comb += status.eq(E_FLAGS)
                with m.Elif(sparse & ~sp_ok):
                    m.d.comb += status.eq(E_SPARSE_TAG)
                with m.Elif(~esz_ok | ~fmt_ok | (sparse & ~sp_ld_fmt)):
                    m.d.comb += status.eq(E_FORMAT)
                with m.Elif(~form_ok):
                    m.d.comb += status.eq(E_AP_FORM)
                with m.Elif(~src_ok | (n_src == 0) | (n_src > cfg.pe_cols)):
                    m.d.comb += status.eq(E_SHAPE)
            with m.Case(op["multiply_moving"].code):
                m.d.comb += [cmd.cmd.op.eq(OP_MATMUL), cmd.cmd.n.eq(n_src)]
                with m.If((flags & (0xFF & ~mm_flags)) != 0):
                    m.d.comb += status.eq(E_FLAGS)
                with m.Elif(sparse & ~sp_ok):
                    m.d.comb += status.eq(E_SPARSE_TAG)
                with m.Elif(~esz_ok | ~fmt_ok):
                    m.d.comb += status.eq(E_FORMAT)
                with m.Elif(~form_ok):
                    m.d.comb += status.eq(E_AP_FORM)
                with m.Elif(~src_ok | (n_src == 0) | (n_src > cfg.psum_bank_fp32) | ~psum_ok
                            | (dst["num0"] != n_src) | (src["count"] > last_k)):
                    m.d.comb += status.eq(E_SHAPE)
            with m.Case(op["transpose"].code):
                m.d.comb += [cmd.cmd.op.eq(OP_TRANSPOSE), cmd.cmd.k.eq(last_k),
                             cmd.cmd.n.eq(last_k)]
                with m.If(~psum_ok | (dst["num0"] != last_k) | (last_k == 0)):
                    m.d.comb += status.eq(E_SHAPE)
            with m.Default():
                m.d.comb += status.eq(isa.E_OPCODE)

        # ---- overlapped issue, in-order completion ------------------------------------------
        # Every instruction gets a record in ``pend`` when it is taken: a check failure
        # completes with its status as soon as it reaches the head; an issued command
        # completes when the engine dispatched it (``disp``, in command order). An instruction
        # whose completion is observable (a semaphore post, an interrupt) waits further: a
        # matmul or transpose until the engine reports its own operation done (its ticket,
        # below), a load (and a sparse load, whose weights are checked beat by beat) until
        # the engine has gone idle, so its SBUF reads (and every earlier access) are done.
        ctl = isa.header_bits(raw, "ctl")
        rec = data.StructLayout({"status": ERROR_BITS, "cmd": 1, "wait": 1, "idle": 1})
        m.submodules.pend = pend = fifo.SyncFIFOBuffered(width=rec.size, depth=_PENDING)
        tk_bits = (2 * _TICKETS - 1).bit_length()
        m.submodules.disp = dq = fifo.SyncFIFOBuffered(width=ERROR_BITS + 1 + tk_bits,
                                                       depth=_PENDING)
        is_load = opcode == op["load_stationary"].code
        observed = (ctl & ((1 << isa.CTL_BITS["post_en"]) | (1 << isa.CTL_BITS["irq"]))) != 0
        sp_load = is_load & flags[isa.FLAG_BITS["sparse"]]
        w = data.View(rec, pend.w_data)
        m.d.comb += [w.status.eq(status), w.cmd.eq(status == 0), w.wait.eq(observed | sp_load),
                     w.idle.eq(is_load)]
        with m.If(self.issue.valid & pend.w_rdy):
            with m.If(status != 0):
                m.d.comb += [self.issue.ready.eq(1), pend.w_en.eq(1)]
            with m.Else():
                m.d.comb += [self.cmd.valid.eq(1), self.cmd.payload.eq(cmd)]
                with m.If(self.cmd.ready):
                    m.d.comb += [self.issue.ready.eq(1), pend.w_en.eq(1)]
                    with m.If(opcode == op["load_stationary"].code):
                        m.d.sync += [last_m.eq(n_src), last_k.eq(src["count"])]
        # operation counters (modulo 2 * _TICKETS): issued and done, in the engine's order
        issued = Signal(tk_bits)
        finished = Signal(tk_bits)
        m.d.sync += [issued.eq(issued + self.eng_op_issue),
                     finished.eq(finished + self.eng_op_done)]
        # dispatch records: the reader's code, whether the engine rejected the command, and
        # its ticket (the issue count including an operation it started this cycle)
        m.d.comb += [dq.w_en.eq(self.eng_disp),
                     dq.w_data.eq(Cat(self.eng_disp_code, self.eng_disp_reject,
                                      (issued + self.eng_op_issue)[:tk_bits]))]

        head = data.View(rec, pend.r_data)
        d_code, d_rej = dq.r_data[:ERROR_BITS], dq.r_data[ERROR_BITS]
        d_ticket = dq.r_data[ERROR_BITS + 1:]
        eng_code = Signal(ERROR_BITS)
        with m.Switch(self.eng_err_code):
            for k, v in ENGINE_STATUS.items():
                with m.Case(k):
                    m.d.comb += eng_code.eq(v)
        # the engine's busy covers a dispatched command only after its queues' latency:
        # it is trusted SETTLE cycles after the head's dispatch record was seen
        settle = Signal(range(_SETTLE + 1))
        seen = Signal()                 # the head's dispatch record is in, its status 0
        ticket = Signal(tk_bits)        # ... and the ticket of its operation
        ahead = Signal(tk_bits)
        m.d.comb += ahead.eq(finished - ticket)     # >= 0 (top bit clear): its op is done
        d_status = Mux(d_code != 0, d_code, Mux(d_rej, eng_code, 0))
        m.d.comb += self.done.payload.info.eq(0)
        with m.If(pend.r_rdy):
            with m.If(~head.cmd):
                m.d.comb += [self.done.valid.eq(1), self.done.payload.status.eq(head.status),
                             pend.r_en.eq(self.done.ready)]
            with m.Elif(~seen):
                with m.If(dq.r_rdy & ((d_status != 0) | ~head.wait)):
                    m.d.comb += [self.done.valid.eq(1), self.done.payload.status.eq(d_status),
                                 pend.r_en.eq(self.done.ready), dq.r_en.eq(self.done.ready)]
                with m.Elif(dq.r_rdy):
                    m.d.comb += dq.r_en.eq(1)
                    m.d.sync += [seen.eq(1), settle.eq(0), ticket.eq(d_ticket)]
            with m.Elif(~head.idle):
                # a posting matmul / transpose: its own operation's PSUM writes have landed
                with m.If(~ahead[-1]):
                    m.d.comb += [self.done.valid.eq(1), self.done.payload.status.eq(0),
                                 pend.r_en.eq(self.done.ready)]
                    with m.If(self.done.ready):
                        m.d.sync += seen.eq(0)
            with m.Else():
                with m.If(settle != _SETTLE):
                    m.d.sync += settle.eq(settle + 1)
                with m.Elif(~self.eng_busy):
                    # the head's own AP passed (its dispatch record had status 0): a feed-level
                    # AP error now belongs to a later instruction, which completes with it
                    # from its own dispatch record, so the error keeps that one's index
                    m.d.comb += [self.done.valid.eq(1),
                                 self.done.payload.status.eq(Mux(self.eng_err, eng_code, 0)),
                                 pend.r_en.eq(self.done.ready)]
                    with m.If(self.done.ready):
                        m.d.sync += seen.eq(0)
        return m
