# SPDX-License-Identifier: Apache-2.0
"""Scalar-engine stimulus: random legal ACTIVATION / COPY instructions (every enabled format,
SBUF and PSUM, random APs with negative and zero steps and partial partition ranges,
immediate or per-partition scale/bias, every ``reduce_cmd``), bad instructions of every static
and AP status, and the golden model of a program (``golden.activation``)."""

from __future__ import annotations

import dataclasses

import numpy as np

from golden.activation import (DTYPE_NAMES, FUNCTIONS, OP_ACT_TABLE_LOAD, OP_COPY,
                               OP_TENSOR_SCALAR, ActInstr, execute, table_load)
from golden.ap import ELEM_BYTES, PSUM, SBUF
from tb.ap.program import fit_ap_in_zone, random_float_memories, random_partitions

__all__ = ["zones", "random_memories", "random_instr", "bad_instr", "golden_program",
           "enabled_dtypes"]


def zones(cfg):
    """Disjoint byte ranges per role, so that within a program no instruction reads what an
    earlier one wrote: ``{(memory, role): (lo, hi)}``, role ``src``, ``op`` (scale/bias),
    ``dst``."""
    S, B, nb = cfg.sbuf_bytes_per_partition, cfg.psum_bank_bytes, cfg.psum_banks
    return {(SBUF, "src"): (0, S // 2), (SBUF, "op"): (S // 2, S // 2 + S // 8),
            (SBUF, "dst"): (S // 2 + S // 8, S),
            (PSUM, "src"): (0, B), (PSUM, "op"): (B, 2 * B), (PSUM, "dst"): (2 * B, nb * B)}


def enabled_dtypes(cfg):
    """The dtype codes the engine takes under ``cfg`` (FP32 always; TF32 excluded: a 4-byte
    container the converters do not produce)."""
    return [c for c, n in DTYPE_NAMES.items()
            if (n == "fp32" or n in cfg.formats) and n not in ("tf32", "cfp8")]


def random_memories(rng, cfg):
    """``(sbuf, psum)``: random bytes, most 32-bit words replaced by FP32 values of moderate
    range."""
    return random_float_memories(rng, cfg, exps=(-6, 4), floats=0.8)


def _fit_ap(rng, cfg, memory, role, w, nums, start, count):
    """An AP of shape ``nums`` inside the zone of ``(memory, role)``, random steps, or None."""
    return fit_ap_in_zone(rng, cfg, memory, zones(cfg)[memory, role], w, nums, start, count,
                          steps=(3, 16), unit_step=0.8)


def _imm(rng):
    r = rng.random()
    if r < 0.1:
        return int(rng.choice([0, 0x80000000, 0x3F800000, 0xBF800000, 0x7F800000, 0x7FC00000]))
    return int(np.float32(rng.standard_normal() * 2).view(np.uint32))


def random_instr(rng, cfg, func, *, max_elems=24, p_copy=0.2, p_op_ap=0.4):
    """A random legal ACTIVATION of function id ``func`` (or COPY), ``execute``-legal."""
    dts = enabled_dtypes(cfg)
    for _ in range(200):
        nd = int(rng.integers(1, cfg.ap_dims + 1))
        nums, total = [], 1
        for _k in range(nd):
            n = int(rng.integers(1, max(1, max_elems // total) + 1))
            nums.append(n)
            total *= n
        start, count = random_partitions(rng, cfg.partitions)
        sdt, ddt = int(rng.choice(dts)), int(rng.choice(dts))
        sm, dm = int(rng.choice([SBUF, PSUM])), int(rng.choice([SBUF, PSUM]))
        src = _fit_ap(rng, cfg, sm, "src", ELEM_BYTES[DTYPE_NAMES[sdt]], nums, start, count)
        dst = _fit_ap(rng, cfg, dm, "dst", ELEM_BYTES[DTYPE_NAMES[ddt]],
                      [total] if rng.random() < 0.5 else nums, start, count)
        if src is None or dst is None:
            continue
        kw = dict(opcode=OP_COPY if rng.random() < p_copy else 0x30, func=func, src=src,
                  dst=dst, src_dtype=sdt, dst_dtype=ddt, scale=_imm(rng), bias=_imm(rng),
                  reduce_cmd=int(rng.integers(0, 4)))
        if rng.random() < 0.3:
            kw["scale"] = 0x3F800000
        for k in ("scale", "bias"):
            if rng.random() < p_op_ap:
                dt = int(rng.choice(dts))
                om = int(rng.choice([SBUF, PSUM]))
                ap = _fit_ap(rng, cfg, om, "op", ELEM_BYTES[DTYPE_NAMES[dt]], [1], start,
                             count)
                if ap is not None:
                    kw[f"{k}_ap"], kw[f"{k}_dtype"] = ap, dt
        ins = ActInstr(**kw)
        if execute(cfg, ins, {SBUF: np.zeros((cfg.partitions, cfg.sbuf_bytes_per_partition),
                                              np.uint8),
                              PSUM: np.zeros((cfg.partitions, cfg.psum_bytes_per_partition),
                                             np.uint8)},
                   np.zeros(cfg.partitions, np.uint32)) == 0:
            return ins
    raise RuntimeError("random_instr: no legal instruction in 200 draws")


def bad_instr(rng, cfg, good):
    """A bad variant of the legal instruction ``good`` (a random status)."""
    from golden.ap import AP
    P = cfg.partitions
    k = int(rng.integers(0, 8))
    if k == 0:
        return dataclasses.replace(good, opcode=OP_TENSOR_SCALAR)
    if k == 1:
        return dataclasses.replace(good, opcode=0x30, func=int(rng.integers(17, 256)))
    if k == 2:
        return dataclasses.replace(good, src_dtype=12)
    if k == 3:
        return dataclasses.replace(good, dst=dataclasses.replace(
            good.dst, dims=((1, good.src.count + 1),)))
    if k == 4:          # out of range source
        return dataclasses.replace(good, src=AP(memory=SBUF, start_partition=good.src.start_partition,
                                                num_partitions=good.src.num_partitions,
                                                offset=cfg.sbuf_bytes_per_partition - 4,
                                                dims=((1, good.src.count),)), src_dtype=0)
    if k == 5:          # misaligned destination
        w = good.dst.elem_bytes
        if w == 1:
            return dataclasses.replace(good, func=17, opcode=0x30)
        return dataclasses.replace(good, dst=dataclasses.replace(good.dst,
                                                                  offset=good.dst.offset + 1))
    if k == 6:          # scale AP with a partition count other than src's
        n = good.src.num_partitions
        return dataclasses.replace(good, scale_ap=AP(memory=SBUF, num_partitions=P if n < P
                                                     else P // 2,
                                                     offset=zones(cfg)[SBUF, "op"][0]),
                                   scale_dtype=0)
    # a bias AP out of range (E_AP_RANGE after a good source: the elements read are dropped)
    return dataclasses.replace(good, bias_ap=AP(
        memory=PSUM, start_partition=good.src.start_partition,
        num_partitions=good.src.num_partitions, offset=cfg.psum_banks * cfg.psum_bank_bytes,
        dims=((1, 1),)), bias_dtype=0)


def golden_program(cfg, instrs, sbuf, psum, loaded, acc=None):
    """``(statuses, sbuf, psum, acc, loaded)`` after ``instrs`` by golden.activation from the
    given memories, accumulators (``None``: zeros) and loaded function name."""
    mems = {SBUF: sbuf.copy(), PSUM: psum.copy()}
    acc = np.zeros(cfg.partitions, np.uint32) if acc is None else np.array(acc, np.uint32)
    st = []
    for ins in instrs:
        if ins.opcode == OP_ACT_TABLE_LOAD:
            s, img = table_load(cfg, ins, mems)
            if img is not None:
                loaded = FUNCTIONS[ins.func] if s == 0 else ""
        else:
            s = execute(cfg, ins, mems, acc, loaded=loaded)
        st.append(s)
    return st, mems[SBUF], mems[PSUM], acc, loaded
