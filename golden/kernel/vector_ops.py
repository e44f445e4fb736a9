# SPDX-License-Identifier: Apache-2.0
"""The kernel builder's vector engine operations (docs/vector.md; ALU operations by name or
code), and :meth:`VectorOps.op`, any engine opcode through its APs."""

from __future__ import annotations

from golden.kernel.types import ENGINE_OF, Tile, alu_code, nonzero_imm
from rtl.isa import Instr

from golden.kernel.checks import (check_formats, check_parts, check_reduce_op,
                                   check_same_shape, check_slots, operation)

__all__ = ["VectorOps"]


class VectorOps:
    """Vector engine operations of :class:`golden.kernel.Kernel`."""

    @operation("op")
    def op(self, opname, dst, srcs=(), flags=(), imm=None):
        """Any engine opcode through its APs: ``dst`` in ``ap0``, ``srcs`` in ``ap1``,
        ``ap2``: the path of the vector and scalar engines' operations (``tensor_copy``,
        ``activation``, ...), which the simulator runs once their hooks are registered."""
        eng = ENGINE_OF.get(opname)
        if eng is None:
            raise ValueError(f"op name must be an engine opcode of rtl.isa, not {opname!r}")
        aps = {"ap0": dst.ap()}
        for slot, s in zip(("ap1", "ap2"), srcs):
            aps[slot] = s.ap()
        self._emit(eng, eng, list(srcs), [dst],
                   lambda w, p: Instr(op=opname, wait=w, post=p, flags=frozenset(flags),
                                      aps=aps, imm=dict(imm or {})))

    @operation("block_transpose")
    def block_transpose(self, dst, src, sr=False):
        """``dst[j, i] = src[i, j]`` across partitions on the vector engine
        (``block_transpose``: one ``B x B`` block, ``B = min(32, partitions)``, both tiles from
        partition 0), with the formats' cast."""
        B = min(32, self.cfg.partitions)
        if (src.parts, src.elems, dst.parts, dst.elems) != (B, B, B, B):
            raise ValueError(f"block_transpose tiles must be {B} x {B} (B = min(32, "
                             f"partitions)), not {src.parts} x {src.elems} -> "
                             f"{dst.parts} x {dst.elems}")
        self._vec("block_transpose", dst, src, sr=sr)

    @operation("copy")
    def copy(self, dst, src, sr=False):
        """``dst = src`` with the formats' cast (vector engine ``tensor_copy``): how a PSUM
        result reaches the SBUF, and then DRAM."""
        check_same_shape(dst=dst, src=src)
        self._vec("tensor_copy", dst, src, sr=sr)

    def _vec(self, opname, dst, src0=None, src1=None, *, src1_ap=None, op0=0, op1=0, imm0=0.0,
             imm1=0.0, rev0=False, rev1=False, sel0=False, sel1=False, sr=False,
             names=("src", "src1")):
        check_slots(opname, ap1=(names[0], src0), ap2=(names[1], src1))
        check_formats(self.cfg, "vector", dst=dst, **{names[0]: src0, names[1]: src1})
        aps, reads = {"ap0": dst.ap()}, []
        if src0 is not None:
            aps["ap1"] = src0.ap()
            reads.append(src0)
        if src1 is not None:
            aps["ap2"] = src1_ap or src1.ap()
            reads.append(src1)
        imm = {"op0": alu_code(op0), "op1": alu_code(op1),
               "ctl": int(rev0) | int(rev1) << 1 | int(sel0) << 2 | int(sel1) << 3,
               "imm0": imm0, "imm1": imm1}
        imm = {k: v for k, v in imm.items() if nonzero_imm(v)}
        self._emit("dve", "dve", reads, [dst],
                   lambda w, p: Instr(op=opname, wait=w, post=p, aps=aps, imm=imm,
                                      flags=frozenset({"sr"} if sr else ())))

    def _operand(self, x, n):
        """``(imm, src1 tile, src1 AP, sel)`` of a stage operand: a number (the immediate) or a
        per-partition ``[parts, 1]`` tile (the src1 AP with step 0)."""
        if isinstance(x, Tile):
            return 0.0, x, x.bcast(n), True
        return x, None, None, False

    @operation("tensor_tensor")
    def tensor_tensor(self, dst, a, b, op, sr=False):
        """``dst = a op b`` element-wise (``op`` an ALU operation name of
        ``golden.vector.ALU_NAMES`` or its code)."""
        check_same_shape(dst=dst, a=a, b=b)
        self._vec("tensor_tensor", dst, a, b, op0=op, sr=sr, names=("a", "b"))

    @operation("tensor_scalar")
    def tensor_scalar(self, dst, src, op0, operand0=0.0, op1="bypass", operand1=0.0,
                      reverse0=False, reverse1=False, sr=False):
        """``dst = (src op0 operand0) op1 operand1``; an operand is a number (an FP32
        immediate) or a per-partition ``[parts, 1]`` tile (both tiles, if two: the same one).
        ``reverse``: the operand comes first (``operand - x``)."""
        n = src.elems
        i0, t0, a0, s0 = self._operand(operand0, n)
        i1, t1, a1, s1 = self._operand(operand1, n)
        if t0 is not None and t1 is not None and t0 != t1:
            raise ValueError("tensor_scalar: both operands from tiles must be the same tile "
                             "(one src1 AP)")
        t, a = (t0, a0) if t0 is not None else (t1, a1)
        check_same_shape(dst=dst, src=src)
        check_parts("src", src, operand=t)
        self._vec("tensor_scalar", dst, src, t, src1_ap=a, op0=op0, op1=op1, imm0=i0, imm1=i1,
                  rev0=reverse0, rev1=reverse1, sel0=s0, sel1=s1, sr=sr,
                  names=("src", "operand"))

    @operation("tensor_reduce")
    def tensor_reduce(self, dst, src, op="add", pre_op="bypass", pre_operand=0.0, sr=False):
        """``dst[p, 0] = op-reduction of (src pre_op pre_operand)[p, :]`` (``op`` add, max or
        min; the engine's interleaved order, docs/vector.md §1.5)."""
        check_reduce_op(op)
        i0, t0, a0, s0 = self._operand(pre_operand, src.elems)
        check_parts("src", src, dst=dst, pre_operand=t0)
        if dst.elems != 1:
            raise ValueError(f"dst {dst.name} must have 1 element per partition (the "
                             f"reduction's result), not {dst.elems}")
        self._vec("tensor_reduce", dst, src, t0, src1_ap=a0, op0=pre_op, op1=op, imm0=i0,
                  sel0=s0, sr=sr, names=("src", "pre_operand"))

    @operation("memset")
    def memset(self, dst, value, sr=False):
        """``dst = value`` (FP32, encoded to the tile's format)."""
        self._vec("memset", dst, imm0=value, sr=sr)

    @operation("iota")
    def iota(self, dst, op0="bypass", imm0=0.0, op1="bypass", imm1=0.0, sel0=False,
             sel1=False):
        """``dst[p, i] = (i op0 y0) op1 y1`` with ``y`` the immediate or, with ``sel``, the
        partition index ``p`` (e.g. ``op1="add", sel1=True``: ``i + p``)."""
        self._vec("iota", dst, op0=op0, op1=op1, imm0=imm0, imm1=imm1, sel0=sel0, sel1=sel1)

    @operation("select")
    def select(self, dst, mask, on_true, otherwise=0.0, sr=False):
        """``dst = on_true if mask != 0 else otherwise`` (an immediate)."""
        check_same_shape(dst=dst, mask=mask, on_true=on_true)
        self._vec("select", dst, mask, on_true, imm0=otherwise, sr=sr,
                  names=("mask", "on_true"))

    @operation("max8")
    def max8(self, dst, src, indices=False):
        """``dst[p, :8]`` = the 8 largest of ``src[p, :]`` (or their indices), largest first."""
        if dst.elems != 8:
            raise ValueError(f"dst {dst.name} must have 8 elements per partition, not "
                             f"{dst.elems}")
        check_parts("src", src, dst=dst)
        self._vec("max8", dst, src, op1=int(indices))

    @operation("find_index8")
    def find_index8(self, dst, data, vals, sr=False):
        """``dst[p, j]`` = the index of the first ``data[p, :]`` element equal to ``vals[p, j]``
        (``j < 8``; the widened FP32 patterns bit for bit: ``-0 != +0``, a NaN finds its own
        pattern), ``-1`` where none (``find_index8``; e.g. ``vals`` from :meth:`max8`)."""
        if vals.elems != 8 or dst.elems != 8:
            raise ValueError(f"find_index8 vals and dst must have 8 elements per partition, "
                             f"not {vals.elems} and {dst.elems}")
        check_parts("data", data, dst=dst, vals=vals)
        self._vec("find_index8", dst, data, vals, sr=sr, names=("data", "vals"))

