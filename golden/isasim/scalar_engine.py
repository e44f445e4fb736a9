# SPDX-License-Identifier: Apache-2.0
"""Scalar (activation) engine hooks of the golden ISA simulator: ``act_table_load``,
``activation`` and ``copy`` (docs/scalar.md; the decoder of rtl/core/engine_decode.py)."""

from __future__ import annotations

import numpy as np

from golden.ap import ELEM_BYTES, PSUM, SBUF
from golden.isasim.errors import E_OPCODE, ERROR_NAMES, Fault
from golden.isasim.hooks import (ZERO_AP, decoder_ap, decoder_form, dtype_code_of,
                                 elems_per_partition, footprint, footprints_overlap, register_op)
from golden.isasim.timing import port_sharing
from rtl.isa import OPCODES as OPCODES_ALL
from rtl.isa import OPS_BY_NAME

__all__ = ["act_instr", "act_slots", "table_words", "act_pipe_cycles", "register_scalar_ops"]


def act_instr(sim, ins):
    """The :class:`golden.activation.ActInstr` the ScalarDecoder gives for ``ins``: ``ap0`` /
    ``ap1`` -> ``dst`` / ``src``; ``ap2`` -> the bias AP when immediate ``bias_ap`` bit 0 is
    set and the scale AP when ``scale_ap`` bit 0 is (both: the same AP for both), ``func``,
    ``reduce_cmd`` (its low 2 bits), ``scale``/``bias`` (FP32 bits), flag ``sr``."""
    from golden import activation as ga
    g = ins.aps.get
    imm = ins.imm

    def bits(v, default):
        if v is None:
            return 0 if default is None else default
        return int(v) if isinstance(v, int) else int(np.float32(v).view(np.uint32))

    def eb(enc):
        return ELEM_BYTES.get((enc or ZERO_AP).dtype, 4)
    a2 = decoder_ap(sim, g("ap2"), eb(g("ap2")))
    return ga.ActInstr(opcode=OPS_BY_NAME[ins.op].code, func=imm.get("func", 0),
                       dst=decoder_ap(sim, g("ap0"), eb(g("ap0"))),
                       src=decoder_ap(sim, g("ap1"), eb(g("ap1"))),
                       dst_dtype=dtype_code_of(g("ap0")), src_dtype=dtype_code_of(g("ap1")),
                       scale=bits(imm.get("scale"), None), bias=bits(imm.get("bias"), None),
                       scale_ap=a2 if imm.get("scale_ap", 0) & 1 else None,
                       bias_ap=a2 if imm.get("bias_ap", 0) & 1 else None,
                       scale_dtype=dtype_code_of(g("ap2")), bias_dtype=dtype_code_of(g("ap2")),
                       reduce_cmd=imm.get("reduce_cmd", 0) & 3, sr="sr" in ins.flags)


def act_slots(ins):
    """The AP slots the ScalarDecoder checks: ``act_table_load`` ap1; ``activation`` ap0, ap1
    and ap2 when it is the bias or scale AP (bit 0 of ``bias_ap`` / ``scale_ap``)."""
    if ins.op == "act_table_load":
        return ("ap1",)
    per = (int(ins.imm.get("bias_ap", 0)) | int(ins.imm.get("scale_ap", 0))) & 1
    return ("ap0", "ap1", "ap2") if per else ("ap0", "ap1")


def _act_execute(sim, ins):
    from golden import activation as ga
    from golden.ap import E_OK
    decoder_form(sim, ins, act_slots(ins))
    ai = act_instr(sim, ins)
    loaded = sim.act_loaded
    if ai.opcode == ga.OP_ACTIVATION and loaded is None:
        raise Fault(E_OPCODE, 0, f"{ins.op}: no table loaded (act_table_load first)")
    code = ga.check_instr(sim.cfg, ai, loaded)
    if code != E_OK:
        raise Fault(code, 0, f"{ins.op}: scalar engine status {ERROR_NAMES.get(code, code)} "
                             f"(loaded table: {loaded})")
    rand = ga.sr_words(ai, sim.act_prng)
    code = ga.execute(sim.cfg, ai, {SBUF: sim.sbuf, PSUM: sim.psum}, sim.act_acc, rand=rand,
                      loaded=loaded)
    assert code == E_OK, code


def table_words(tab, parts=1):
    """What ``act_table_load`` reads through its fp32 AP ``ap1`` over ``parts`` partitions, as
    ``[parts, cols]`` words (element ``j`` of partition ``p`` is stream word ``j * parts + p``):
    ``golden.activation.table_words`` (the 10 header words, the 128 binade-map words, 9 words
    per segment), padded with zero segments to fill whole columns (the engine takes whole
    segments only; the map never selects the padding). A ``[1, n]`` array for one partition."""
    from golden.activation import NCOEF, table_words as stream
    from rtl.config import ACT_BINADES
    w = stream(tab)
    head, seg = 10 + 2 * ACT_BINADES, NCOEF + 2
    cols = -(-len(w) // parts)
    while (parts * cols - head) % seg:
        cols += 1
    img = np.zeros(parts * cols, np.uint32)
    img[:len(w)] = w
    return img.reshape(cols, parts).T


def _act_table_load(sim, ins):
    """``act_table_load`` as the engine runs it (``golden.activation.table_load``: the word
    stream over the AP's partitions, the image checks); a bad image leaves no function."""
    from golden import activation as ga
    decoder_form(sim, ins, act_slots(ins))
    ai = act_instr(sim, ins)
    status, image = ga.table_load(sim.cfg, ai, {SBUF: sim.sbuf, PSUM: sim.psum})
    if image is not None:
        sim.act_loaded = ga.FUNCTIONS[ai.func] if status == ga.E_OK else ""
    if status != ga.E_OK:
        raise Fault(status, 0, f"act_table_load: scalar engine status "
                               f"{ERROR_NAMES.get(status, status)}")


def act_pipe_cycles(cfg):
    """Cycles of the scalar engine's element pipeline (docs/scalar.md §5)."""
    L = cfg.mul_stages + cfg.add_stages
    return 2 + L + 12 * L + 4 + 3


def _act_timing(sim, ins, issue):
    # the engine overlaps instructions (docs/scalar.md §5): the next one's elements follow the
    # previous one's into the pipeline, unless it reads what the previous one writes (then it
    # waits for that write) or it is a table load (the pipeline drains first)
    st = sim.engine_state.setdefault("act", {"free": 0, "done": 0, "dst": None})
    over = sim.timing.act_overhead
    over = act_pipe_cycles(sim.cfg) + 14 if over is None else over
    if ins.op == "act_table_load":          # drain the pipeline, then one word per cycle
        start = max(issue, st["done"])
        n = elems_per_partition(ins.aps["ap1"])
        done = start + sim.timing.act_table_overhead + n * ins.aps["ap1"].count
        st.update(free=done, done=done, dst=None)
        return start, done
    ai = act_instr(sim, ins)
    start = max(issue, st["free"])
    reads = [ai.src] + [a for a in (ai.scale_ap, ai.bias_ap) if a is not None]
    if st["dst"] is not None and any(footprints_overlap(st["dst"], footprint("r", a))
                                     for a in reads):
        start = max(start, st["done"] + sim.timing.act_raw_wait)
    n = ai.src.count
    rate = port_sharing(sim.cfg, [ai.dst, *reads])
    st["free"] = start + rate * n
    done = start + over + rate * n
    st["done"] = max(st["done"], done)
    st["dst"] = footprint("w", ai.dst)
    return start, done


def _act_access(sim, ins):
    if ins.op == "act_table_load":
        return [footprint("r", decoder_ap(sim, ins.aps["ap1"], 4))]
    ai = act_instr(sim, ins)
    out = [footprint("w", ai.dst), footprint("r", ai.src)]
    for ap in {id(a): a for a in (ai.scale_ap, ai.bias_ap) if a is not None}.values():
        out.append(footprint("r", ap))
    return out


def register_scalar_ops():
    """Register ``act_table_load`` and the scalar opcodes ``golden.activation.execute`` runs
    (ACTIVATION, and COPY once :mod:`rtl.isa` gives it a row)."""
    from golden import activation as ga
    for op in OPCODES_ALL:
        if op.engine != "act":
            continue
        if op.code == ga.OP_ACT_TABLE_LOAD:
            register_op(op.name, _act_table_load, _act_timing, _act_access)
        elif op.code in (ga.OP_ACTIVATION, ga.OP_COPY):
            register_op(op.name, _act_execute, _act_timing, _act_access)


register_scalar_ops()
