# SPDX-License-Identifier: Apache-2.0
"""Vector-engine stimulus: random legal instructions (every opcode, ALU op, enabled format,
SBUF/PSUM, random APs with negative and zero steps and partial partition ranges, SR), the
directed bad instructions of every status, and memory contents mixing random bytes with
ordinary floats. Expected results always come from :mod:`golden.vector`."""

from __future__ import annotations

import dataclasses

import numpy as np

import golden.vector as gv
from golden.ap import PSUM, SBUF, addresses
from tb.ap.program import fit_ap_in_zone, random_float_memories, random_partitions

__all__ = ["random_memories", "random_instr", "bad_instrs", "zones", "max8_find_pair"]


def zones(cfg):
    """Disjoint byte ranges per role so that no instruction reads what it writes:
    ``{(memory, role): (lo, hi)}``, role in ``src0``, ``src1``, ``dst``."""
    S = cfg.sbuf_bytes_per_partition
    B = cfg.psum_bank_bytes
    nb = cfg.psum_banks
    return {(SBUF, "src0"): (0, S // 4), (SBUF, "src1"): (S // 4, S // 2),
            (SBUF, "dst"): (S // 2, S),
            (PSUM, "src0"): (0, B), (PSUM, "src1"): (B, 2 * B),
            (PSUM, "dst"): (2 * B, nb * B)}


def random_memories(rng, cfg):
    """``(sbuf, psum)`` byte arrays: random bytes with most 32-bit words replaced by float32
    values of moderate range (so arithmetic sees cancellation and ordinary rounding)."""
    return random_float_memories(rng, cfg, exps=(-8, 8), floats=0.7)


def _fit_ap(rng, cfg, memory, role, w, nums, start, count):
    """An AP of shape ``nums`` in the zone of ``(memory, role)``, random steps, or None."""
    return fit_ap_in_zone(rng, cfg, memory, zones(cfg)[memory, role], w, nums, start, count,
                          steps=(4, 20))


def random_instr(rng, cfg, *, max_elems=20, opcodes=None, sr=True):
    """A random legal instruction (``golden.vector.check`` gives 0)."""
    fmts = gv.vector_formats(cfg)
    for _ in range(100):
        op = int(rng.choice(opcodes or list(gv.OPCODES)))
        nd = int(rng.integers(1, cfg.ap_dims + 1))
        nums, total = [], 1
        for _k in range(nd):
            n = int(rng.integers(1, max(1, max_elems // total) + 1))
            nums.append(n)
            total *= n
        start, count = random_partitions(rng, cfg.partitions)
        if op == gv.OP_BN_AGGR:
            nums[0] = gv.BN_STATS_N
        if op == gv.OP_TRANSPOSE:
            B = gv.transpose_block(cfg)
            nums = [B]
            start, count = B * int(rng.integers(0, cfg.partitions // B)), B
        dt = {r: int(rng.choice(fmts)) for r in ("src0", "src1", "dst")}
        kw = dict(opcode=op, sr=int(sr and rng.random() < 0.3),
                  op0=int(rng.integers(0, 16)), op1=int(rng.integers(0, 16)),
                  rev0=int(rng.integers(0, 2)), rev1=int(rng.integers(0, 2)),
                  sel0=int(rng.integers(0, 2)), sel1=int(rng.integers(0, 2)),
                  imm0=_imm(rng), imm1=_imm(rng), dst_dtype=dt["dst"], src0_dtype=dt["src0"],
                  src1_dtype=dt["src1"])
        if op == gv.OP_TENSOR_REDUCE:
            kw["op1"] = int(rng.choice(gv.REDUCE_OPS))
        if op == gv.OP_MAX8:
            kw["op1"] = int(rng.integers(0, 2))
        if op == gv.OP_AFFINE_SELECT:
            kw["op0"] = int(rng.choice(gv.AFFINE_CMPS))
            kw["imm1"] = gv.affine_imm1(int(rng.integers(-total - 4, total + 5)),
                                        int(rng.integers(-3, 4)), int(rng.integers(-3, 4)))
        aps = {}
        for role in ("src0", "src1", "dst"):
            mem = int(rng.choice([SBUF, PSUM]))
            shape = nums
            fixed = {gv.OP_TENSOR_REDUCE: 1, gv.OP_MAX8: gv.MAX8_K, gv.OP_BN_STATS: gv.BN_STATS_N,
                     gv.OP_BN_AGGR: gv.BN_AGGR_N, gv.OP_FIND_INDEX8: gv.MAX8_K}
            if role == "dst" and op in fixed:
                shape = [fixed[op]]
            if role == "src1" and op == gv.OP_FIND_INDEX8:
                shape = [gv.MAX8_K]                   # the 8 values
            if role == "src1" and rng.random() < 0.3:
                ap = _fit_ap(rng, cfg, mem, role, gv.elem_bytes_of(cfg, dt[role]), shape,
                             start, count)
                if ap is not None:            # a per-partition scalar: zero steps
                    ap = dataclasses.replace(ap, dims=tuple((0, n) for _, n in ap.dims))
            else:
                ap = _fit_ap(rng, cfg, mem, role, gv.elem_bytes_of(cfg, dt[role]), shape,
                             start, count)
            aps[role] = ap
        if any(a is None for a in aps.values()):
            continue
        if op == gv.OP_FIND_INDEX8 and rng.random() < 0.6:
            aps["src1"] = _values_among(rng, cfg, aps["src0"], gv.elem_bytes_of(cfg, dt["src0"]))
            kw["src1_dtype"] = dt["src0"]
        ins = gv.VecInstr(dst=aps["dst"], src0=aps["src0"], src1=aps["src1"], **kw)
        if gv.check(cfg, ins) == 0:
            return ins
    raise RuntimeError("random_instr: no legal instruction in 100 draws")


def max8_find_pair(rng, cfg):
    """``[max8, find_index8]``, to run in that order: MAX8 writes the 8 largest of a random
    source in the source's own format (so the values survive the round trip exactly), and
    FIND_INDEX8 looks for them in the same source, its destination in the src1 zone (it reads
    the dst zone). Every value is then found (at or before MAX8's index for it)."""
    for _ in range(100):
        top = random_instr(rng, cfg, opcodes=[gv.OP_MAX8])
        top = dataclasses.replace(top, op0=gv.ALU_BYPASS, op1=0, sel0=0, rev0=0,
                                  dst_dtype=top.src0_dtype)
        d = top.dst
        out = _fit_ap(rng, cfg, int(rng.choice([SBUF, PSUM])), "src1",
                      gv.elem_bytes_of(cfg, top.dst_dtype), [gv.MAX8_K], d.start_partition,
                      d.num_partitions)
        if out is None or d.dims[0][0] == 0 or gv.check(cfg, top) != 0:
            continue                        # (step 0: the 8 values on one element)
        fi = gv.VecInstr(opcode=gv.OP_FIND_INDEX8, src0=top.src0, src0_dtype=top.src0_dtype,
                         src1=d, src1_dtype=top.dst_dtype, dst=out,
                         dst_dtype=int(rng.choice(gv.vector_formats(cfg))),
                         sr=int(rng.random() < 0.3))
        if gv.check(cfg, fi) == 0:
            return [top, fi]
    raise RuntimeError("max8_find_pair: no legal pair in 100 draws")


def _values_among(rng, cfg, src0, w):
    """FIND_INDEX8's values AP (8 elements of ``w`` bytes) read from among src0's elements
    (from a random one of them, step 0, +-1 or src0's innermost step, kept inside src0's span),
    so that on random memory some values are found, some more than once."""
    a = addresses(dataclasses.replace(src0, elem_bytes=w))
    lo, hi = int(a.min()), int(a.max()) + w
    start = int(rng.choice(a))
    for d in rng.permutation([1, -1, src0.dims[0][0], 0]):
        ap = dataclasses.replace(src0, offset=start, elem_bytes=w, dims=((int(d), gv.MAX8_K),))
        b = addresses(ap)
        if lo <= b.min() and b.max() + w <= hi:
            return ap
    raise AssertionError("step 0 always fits")


def _imm(rng):
    r = rng.random()
    if r < 0.15:
        return int(rng.choice([0, 0x80000000, 0x3F800000, 0x7F800000, 0x7FC00000, 1]))
    return int(np.float32(rng.standard_normal() * 4).view(np.uint32))


def bad_instrs(rng, cfg):
    """``[(name, instr, code)]``: one or more bad instructions per status the engine reports,
    each built from a legal tensor_tensor on SBUF/PSUM."""
    base = None
    while base is None or base.dst.count < 2:
        base = random_instr(rng, cfg, opcodes=[gv.OP_TENSOR_TENSOR], sr=False)
    rep = dataclasses.replace

    def ap_with(ap, **kw):
        return rep(ap, **kw)
    P = cfg.partitions
    z = zones(cfg)
    fi = rep(base, opcode=gv.OP_FIND_INDEX8, src1_dtype=0,
             src1=ap_with(base.src1, memory=SBUF, offset=z[SBUF, "src1"][0],
                          dims=((1, gv.MAX8_K),)),
             dst=ap_with(base.dst, memory=SBUF, offset=z[SBUF, "dst"][0],
                         dims=((1, gv.MAX8_K),)))
    out = [
        ("opcode 0x2F", rep(base, opcode=0x2F), gv.E_OPCODE),
        ("opcode 0x10 (tensor)", rep(base, opcode=0x10), gv.E_OPCODE),
        ("reduce op multiply", rep(base, opcode=gv.OP_TENSOR_REDUCE, op1=gv.ALU_MUL),
         gv.E_OPCODE),
        ("max8 op1 2", rep(base, opcode=gv.OP_MAX8, op1=2), gv.E_OPCODE),
        ("src0 dtype fp4", rep(base, src0_dtype=8), gv.E_FORMAT),
        ("src1 dtype e8m0", rep(base, src1_dtype=9), gv.E_FORMAT),
        ("dst dtype 13", rep(base, dst_dtype=13), gv.E_FORMAT),
        ("src1 num differs", rep(base, src1=ap_with(base.src1, dims=base.src1.dims[:-1] + (
            (base.src1.dims[-1][0], base.src1.dims[-1][1] + 1),))), gv.E_SHAPE),
        ("dst partitions differ", rep(base, dst=ap_with(
            base.dst, num_partitions=base.dst.num_partitions % P + 1)), gv.E_SHAPE),
        ("reduce dst of two", rep(base, opcode=gv.OP_TENSOR_REDUCE, op1=gv.ALU_ADD),
         gv.E_SHAPE),
        ("max8 dst not 8", rep(base, opcode=gv.OP_MAX8, op1=0,
                               dst=ap_with(base.dst, dims=((1, 7),))), gv.E_SHAPE),
        ("affine_select op0 add", rep(base, opcode=gv.OP_AFFINE_SELECT, op0=gv.ALU_ADD),
         gv.E_OPCODE),
        ("bn_stats dst of two", rep(base, opcode=gv.OP_BN_STATS,
                                    dst=ap_with(base.dst, dims=((1, 2),))), gv.E_SHAPE),
        ("bn_aggr src0 not triples", rep(base, opcode=gv.OP_BN_AGGR,
                                         src0=ap_with(base.src0, dims=((1, 4),)),
                                         dst=ap_with(base.dst, dims=((1, 2),))), gv.E_SHAPE),
        ("transpose not a B x B block", rep(
            base, opcode=gv.OP_TRANSPOSE,
            src0=ap_with(base.src0, dims=((1, gv.transpose_block(cfg) + 1),)),
            dst=ap_with(base.dst, dims=((1, gv.transpose_block(cfg) + 1),))), gv.E_SHAPE),
        ("find_index8 values not 8", rep(fi, src1=ap_with(fi.src1, dims=((1, 7),))),
         gv.E_SHAPE),
        ("find_index8 values 8 x 2", rep(fi, src1=ap_with(fi.src1, dims=((1, 8), (8, 2)))),
         gv.E_SHAPE),
        ("find_index8 dst partitions differ", rep(fi, dst=ap_with(
            fi.dst, num_partitions=fi.dst.num_partitions % P + 1)), gv.E_SHAPE),
        ("find_index8 values dtype 12", rep(fi, src1_dtype=12), gv.E_FORMAT),
        ("find_index8 values out of range", rep(fi, src1=ap_with(
            fi.src1, offset=cfg.sbuf_bytes_per_partition - 4)), 0x04),
        ("find_index8 data memory 0", rep(fi, src0=ap_with(fi.src0, memory=0)), 0x0F),
        ("src0 memory 0", rep(base, src0=ap_with(base.src0, memory=0)), 0x0F),
        ("src1 memory 3", rep(base, src1=ap_with(base.src1, memory=3)), 0x0F),
        ("dst out of range", rep(base, dst=ap_with(base.dst, memory=SBUF,
                                                   offset=cfg.sbuf_bytes_per_partition)), 0x04),
        ("src1 misaligned", rep(base, src1_dtype=0, src1=ap_with(base.src1, offset=base.src1.offset | 1)),
         0x0E),
    ]
    if P > 1:
        bad_part = [ap_with(a, start_partition=P - 1, num_partitions=2) for a in
                    (base.src0, base.src1, base.dst)]
        out.append(("partitions beyond P", rep(base, src0=bad_part[0], src1=bad_part[1],
                                               dst=bad_part[2]), 0x03))
    for name, ins, code in out:
        got = gv.check(cfg, ins)
        assert got == code, f"bad_instrs {name}: golden says {got:#x}, not {code:#x}"
    return out
