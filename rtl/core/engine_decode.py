# SPDX-License-Identifier: Apache-2.0
"""Instruction decoders of the vector, scalar and collective engines: raw instructions from a
sequencer into the engines' decoded instructions (``rtl/vector/isa.py``, ``rtl/scalar/isa.py``,
``rtl/collective/engine.py``), field for
field from the encoding of ``rtl/isa.py``; the engines check and run them and report one
status per instruction, which goes back to the sequencer in order."""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from rtl import isa
from rtl.config import CoreConfig, check_config
from rtl.core.sequencer import Sequencer
from rtl.core.tensor_decode import decode_ap
from rtl.isa import E_AP_FORM

__all__ = ["VectorDecoder", "ScalarDecoder", "CCDecoder"]


class _Decoder(wiring.Component):
    """Common part: ``issue`` -> engine ``instr`` (mapped by :meth:`fill`), engine ``done`` ->
    sequencer ``done``, with the engine's ``info`` (the sequencer's ``ERR_INFO``) when its
    status has one (the collective engine's). A decoder-level error (an AP using a dimension
    beyond ``cfg.ap_dims``: ``E_AP_FORM``, info 0) is reported only once the engine has
    returned every earlier status, so statuses stay in instruction order."""

    engine = None

    def __init__(self, cfg: CoreConfig, instr_layout, done_layout):
        check_config(cfg, type(self).__name__)
        seq = Sequencer.Signature(cfg, self.engine)
        super().__init__({
            "issue": In(stream.Signature(seq.issue_layout)),
            "done": Out(stream.Signature(seq.done_layout)),
            "instr": Out(stream.Signature(instr_layout)),
            "eng_done": In(stream.Signature(done_layout)),
        })
        self.cfg = cfg
        self._has_info = "info" in dict(done_layout.members)

    def fill(self, m, raw, instr):
        """Drive ``instr`` from ``raw``; return a signal that is high when an AP is malformed
        beyond what the engine checks."""
        raise NotImplementedError

    def elaborate(self, platform):
        m = Module()
        raw = self.issue.payload.raw
        bad = self.fill(m, raw, self.instr.payload)
        inflight = Signal(range(4))
        took = self.instr.valid & self.instr.ready
        back = self.eng_done.valid & self.eng_done.ready
        m.d.sync += inflight.eq(inflight + took - back)
        local_err = Signal()
        with m.If(self.issue.valid & bad):
            # a malformed AP: report it in order, after every earlier status
            with m.If((inflight == 0) & ~self.eng_done.valid):
                m.d.comb += [self.done.valid.eq(1), self.done.payload.status.eq(E_AP_FORM),
                             local_err.eq(1)]
                m.d.comb += self.issue.ready.eq(self.done.ready)
        with m.Else():
            m.d.comb += [self.instr.valid.eq(self.issue.valid),
                         self.issue.ready.eq(self.instr.ready)]
        with m.If(~local_err):
            m.d.comb += [self.done.valid.eq(self.eng_done.valid),
                         self.done.payload.status.eq(self.eng_done.payload.status),
                         self.eng_done.ready.eq(self.done.ready)]
            if self._has_info:
                m.d.comb += self.done.payload.info.eq(self.eng_done.payload.info)
        return m


class VectorDecoder(_Decoder):
    """``dve`` instructions to :class:`~rtl.vector.engine.VectorEngine` instructions: ``ap0`` /
    ``ap1`` / ``ap2`` to ``dst`` / ``src0`` / ``src1`` with their dtypes, flag ``sr``, the
    immediates ``op0``, ``op1`` (low 4 bits), ``ctl`` (rev0, rev1, sel0, sel1), ``imm0``,
    ``imm1`` (``docs/vector.md`` §1.1).

    Members
    -------
    issue : In(stream Sequencer issue_layout); done : Out(stream Sequencer done_layout)
    instr : Out(stream vector instr_layout); eng_done : In(stream vector done_layout)
    """

    engine = "dve"

    def __init__(self, cfg: CoreConfig):
        from rtl.vector.isa import done_layout, instr_layout
        super().__init__(cfg, instr_layout(cfg), done_layout())

    def fill(self, m, raw, ins):
        cfg = self.cfg
        forms = []
        for slot, name in (("ap0", "dst"), ("ap1", "src0"), ("ap2", "src1")):
            _, _, _, form_ok = decode_ap(m, raw, slot, getattr(ins, name), cfg, f"v_{name}")
            forms.append(form_ok)
            m.d.comb += getattr(ins, f"{name}_dtype").eq(isa.ap_bits(raw, slot, "dtype"))
        op = "tensor_tensor"    # every vector opcode has the same immediates
        ctl = isa.imm_bits(raw, op, "ctl")
        m.d.comb += [
            ins.opcode.eq(isa.header_bits(raw, "opcode")),
            ins.sr.eq(isa.header_bits(raw, "flags")[isa.FLAG_BITS["sr"]]),
            ins.op0.eq(isa.imm_bits(raw, op, "op0")[:4]), ins.op1.eq(isa.imm_bits(raw, op, "op1")[:4]),
            ins.rev0.eq(ctl[0]), ins.rev1.eq(ctl[1]), ins.sel0.eq(ctl[2]), ins.sel1.eq(ctl[3]),
            ins.imm0.eq(isa.imm_bits(raw, op, "imm0")), ins.imm1.eq(isa.imm_bits(raw, op, "imm1")),
        ]
        bad = Signal()
        m.d.comb += bad.eq(~Cat(*forms).all())
        return bad


class ScalarDecoder(_Decoder):
    """``act`` instructions to :class:`~rtl.scalar.engine.ScalarEngine` instructions: ``ap0`` /
    ``ap1`` to ``dst`` / ``src``, ``ap2`` to ``bias_ap`` (immediate ``bias_ap`` = 1) or
    ``scale_ap`` (``scale_ap`` = 1), the immediates ``func``, ``reduce_cmd``, ``scale``,
    ``bias``, flag ``sr`` (``docs/scalar.md``). ``act_table_load``: ``ap1`` (the table words)
    to ``src`` and ``func``; its unused APs are not checked and ``bias_src``/``scale_src`` are
    0 (the flags are activation's immediates).

    Members
    -------
    issue : In(stream Sequencer issue_layout); done : Out(stream Sequencer done_layout)
    instr : Out(stream scalar instr_layout); eng_done : In(stream scalar done_layout)
    """

    engine = "act"

    def __init__(self, cfg: CoreConfig):
        from rtl.scalar.isa import done_layout, instr_layout
        super().__init__(cfg, instr_layout(cfg), done_layout(cfg))

    def fill(self, m, raw, ins):
        cfg = self.cfg
        op = "activation"
        opcode = isa.header_bits(raw, "opcode")
        is_act = opcode == isa.OPS_BY_NAME["activation"].code
        is_tbl = opcode == isa.OPS_BY_NAME["act_table_load"].code
        # the per-partition operand flags exist only in activation's immediates
        bias_ap = isa.imm_bits(raw, op, "bias_ap")[0] & is_act
        scale_ap = isa.imm_bits(raw, op, "scale_ap")[0] & is_act
        forms = []
        for slot, name in (("ap0", "dst"), ("ap1", "src"), ("ap2", "bias_ap"),
                           ("ap2", "scale_ap")):
            _, _, _, form_ok = decode_ap(m, raw, slot, getattr(ins, name), cfg, f"s_{name}")
            # an AP the instruction does not use is not checked (act_table_load: ap1 only)
            used = {"dst": ~is_tbl, "src": Const(1, 1), "bias_ap": bias_ap, "scale_ap": scale_ap}[name]
            forms.append(form_ok | ~used)
            dt = {"dst": "dst_dtype", "src": "src_dtype", "bias_ap": "bias_dtype",
                  "scale_ap": "scale_dtype"}[name]
            m.d.comb += getattr(ins, dt).eq(isa.ap_bits(raw, slot, "dtype"))
        m.d.comb += [
            ins.opcode.eq(isa.header_bits(raw, "opcode")),
            ins.sr.eq(isa.header_bits(raw, "flags")[isa.FLAG_BITS["sr"]]),
            ins.func.eq(isa.imm_bits(raw, op, "func")), ins.reduce_cmd.eq(isa.imm_bits(raw, op, "reduce_cmd")),
            ins.scale.eq(isa.imm_bits(raw, op, "scale")), ins.bias.eq(isa.imm_bits(raw, op, "bias")),
            ins.bias_src.eq(bias_ap), ins.scale_src.eq(scale_ap),
        ]
        bad = Signal()
        m.d.comb += bad.eq(~Cat(*forms).all())
        return bad


class CCDecoder(_Decoder):
    """``cc`` instructions to :class:`~rtl.collective.engine.CollectiveEngine` instructions:
    ``ap0`` / ``ap1`` to ``dst`` / ``src`` with their dtypes, the opcode and the immediates
    ``op``, ``stream``, ``d`` (the same bit positions in every CC opcode; a field an opcode
    does not have is reserved, hence 0).

    Members
    -------
    issue : In(stream Sequencer issue_layout); done : Out(stream Sequencer done_layout)
    instr : Out(stream collective instr_layout); eng_done : In(stream collective done_layout)
    """

    engine = "cc"

    def __init__(self, cfg: CoreConfig):
        from rtl.collective.engine import done_layout, instr_layout
        super().__init__(cfg, instr_layout(cfg), done_layout())

    def fill(self, m, raw, ins):
        cfg = self.cfg
        forms = []
        for slot, name in (("ap0", "dst"), ("ap1", "src")):
            _, _, _, form_ok = decode_ap(m, raw, slot, getattr(ins, name), cfg, f"c_{name}")
            forms.append(form_ok)
            m.d.comb += getattr(ins, f"{name}_dtype").eq(isa.ap_bits(raw, slot, "dtype"))
        m.d.comb += [ins.opcode.eq(isa.header_bits(raw, "opcode")),
                     ins.op.eq(isa.imm_bits(raw, "all_reduce", "op")),
                     ins.stream.eq(isa.imm_bits(raw, "all_reduce", "stream")),
                     ins.d.eq(isa.imm_bits(raw, "send_recv", "d"))]
        bad = Signal()
        m.d.comb += bad.eq(~Cat(*forms).all())
        return bad
