# SPDX-License-Identifier: Apache-2.0
"""Vector engine hooks of the golden ISA simulator: every ``golden.vector`` opcode
:mod:`rtl.isa` gives to ``dve`` (docs/vector.md; the decoder of rtl/core/engine_decode.py)."""

from __future__ import annotations

import numpy as np

from golden.isasim.errors import ERROR_NAMES, Fault
from golden.isasim.hooks import decoder_ap, decoder_form, dtype_code_of, footprint, register_op
from golden.isasim.timing import port_sharing
from rtl.isa import OPS_BY_CODE, OPS_BY_NAME

__all__ = ["vec_instr", "VEC_TIMING", "register_vector_ops"]


def vec_instr(sim, ins):
    """The :class:`golden.vector.VecInstr` the VectorDecoder gives for ``ins``: ``ap0`` /
    ``ap1`` / ``ap2`` -> ``dst`` / ``src0`` / ``src1`` (an all-zero slot: memory code 0), the
    opcode, flag ``sr``, ``op0``/``op1`` (their low 4 bits), ``ctl`` bits 0-3 (rev0, rev1, sel0,
    sel1), ``imm0``/``imm1`` (FP32 bits)."""
    from golden.vector import VecInstr
    g = ins.aps.get
    imm = ins.imm
    ctl = imm.get("ctl", 0)

    def bits(v):
        return int(v) if isinstance(v, int) else int(np.float32(v).view(np.uint32))
    return VecInstr(opcode=OPS_BY_NAME[ins.op].code, dst=decoder_ap(sim, g("ap0")),
                    src0=decoder_ap(sim, g("ap1")), src1=decoder_ap(sim, g("ap2")),
                    dst_dtype=dtype_code_of(g("ap0")), src0_dtype=dtype_code_of(g("ap1")),
                    src1_dtype=dtype_code_of(g("ap2")), sr=int("sr" in ins.flags),
                    op0=imm.get("op0", 0) & 15, op1=imm.get("op1", 0) & 15,
                    rev0=ctl & 1, rev1=ctl >> 1 & 1, sel0=ctl >> 2 & 1, sel1=ctl >> 3 & 1,
                    imm0=bits(imm.get("imm0", 0)), imm1=bits(imm.get("imm1", 0)))


def _vec_used(vi):
    """``[(role, AP with its dtype's element size, dtype)]`` of the APs the engine touches."""
    from golden import vector as gv
    used = [("w", vi.dst, vi.dst_dtype)]
    if gv.uses_src0(vi):
        used.append(("r", vi.src0, vi.src0_dtype))
    if gv.uses_src1(vi):
        used.append(("r", vi.src1, vi.src1_dtype))
    return used


def _vec_execute(sim, ins):
    from golden import vector as gv
    decoder_form(sim, ins)
    vi = vec_instr(sim, ins)
    code = gv.check(sim.cfg, vi)
    if code:
        raise Fault(code, 0, f"{ins.op}: vector engine status {ERROR_NAMES.get(code, code)} "
                             f"({vi})")
    mem = gv.VecMemory.__new__(gv.VecMemory)       # the simulator's arrays, no copy
    mem._cfg, mem.sbuf, mem.psum = sim.cfg, sim.sbuf, sim.psum
    code = gv.run(sim.cfg, vi, mem, sim.vec_prng)
    assert code == 0, code


def _vec_elems(vi):
    """Elements per lane the engine streams (the source pattern; MEMSET/IOTA: the
    destination's)."""
    from golden import vector as gv
    ap = vi.src0 if gv.uses_src0(vi) else vi.dst
    return ap.count


#: Vector opcode -> ``(timing, cycles per element)``: extra cycles beyond the elements per lane
#: (a :class:`Timing` field name) and the element rate (``None``: 1, or the most streams on
#: one SBUF bank or on the PSUM port; an int: that rate, the operands never streaming
#: together). A new golden.vector opcode with the usual timing needs no entry.
VEC_TIMING = {
    "tensor_reduce": ("vector_reduce_overhead", None),
    "max8": ("vector_max8_overhead", None),
    "tensor_tensor_scan": ("vector_scan_overhead", "scan"),
    "bn_stats": ("vector_bn_stats_overhead", None),
    "bn_aggr": ("vector_bn_aggr_overhead", None),
    "block_transpose": ("vector_transpose_overhead", None),
    "find_index8": ("vector_find_index8_overhead", 1),   # the 8 values first, then the data
}


def _vec_timing(sim, ins, issue):
    vi = vec_instr(sim, ins)
    over, rate = VEC_TIMING.get(ins.op, ("vector_overhead", None))
    c = sim.cfg
    if rate == "scan":                      # each result feeds the next element (serial)
        rate = 2 + 2 * (c.mul_stages + c.add_stages) + 1
    elif rate is None:
        rate = port_sharing(c, [ap for _k, ap, _d in _vec_used(vi)])
    st = sim.engine_state.setdefault("dve", {"free": 0})
    start = max(issue, st["free"])
    done = start + getattr(sim.timing, over) + rate * _vec_elems(vi)
    st["free"] = done                       # one instruction at a time (docs/vector.md)
    return start, done


def _vec_access(sim, ins):
    from golden.vector import elem_bytes_of
    import dataclasses
    vi = vec_instr(sim, ins)
    return [footprint(k, dataclasses.replace(ap, elem_bytes=elem_bytes_of(sim.cfg, dt)))
            for k, ap, dt in _vec_used(vi)]


def register_vector_ops():
    """Register the vector hooks for every opcode of ``golden.vector.OPCODES`` that
    :mod:`rtl.isa` gives to ``dve`` (so a new vector opcode in both tables plugs in here)."""
    from golden import vector as gv
    for code, name in gv.OPCODES.items():
        op = OPS_BY_CODE.get(code)
        if op is not None and op.engine == "dve" and op.name == name:
            register_op(name, _vec_execute, _vec_timing, _vec_access)


register_vector_ops()
