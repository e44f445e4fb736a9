# SPDX-License-Identifier: Apache-2.0
"""Bit-exact numpy model of the Vector engine (``docs/vector.md``).

One decoded instruction (:class:`VecInstr`) runs over an SBUF/PSUM byte model
(:class:`VecMemory`). Every element is decoded to FP32 on read (exact), computed in FP32 with
one RNE rounding per arithmetic operation, and encoded into the destination format on write
(RNE, or stochastic rounding with the per-lane XORWOW of ``docs/number-formats.md`` §4, lane =
partition, one draw per element of the instruction in every lane).

FP32 values are ``np.uint32`` bit patterns throughout; NaN results of arithmetic, ``max`` and
``min`` are the canonical ``0x7FC00000``.

Datapath of every instruction (two chained ALU stages, ``docs/vector.md``)::

    x0 = src0 (MEMSET: imm0; IOTA: the element index i)
    y0 = src1 if sel0 else imm0     (IOTA: src1 is the partition index p)
    r0 = alu(op0, x0, y0, imm0)     (rev0 swaps x0 and y0)
    x1 = r0                         y1 = src1 if sel1 else imm1
    r1 = alu(op1, x1, y1, imm1)     (rev1 swaps x1 and y1)
    dst = encode(r1)                (TENSOR_REDUCE: dst = encode(reduce(op1, r0 over the AP)))

TENSOR_TENSOR_SCAN runs the elements in pattern order with stage 0's ``x`` the previous result
(``imm0`` before the first) and ``y`` = src0, stage 1's ``y`` = src1:
``r_i = (r_{i-1} op0 src0_i) op1 src1_i``, ``dst_i = encode(r_i)``.

MAX8 keeps, per partition, the 8 largest stage-0 results ``r0`` in IEEE 754 totalOrder
(``-NaN < -Inf < ... < -0 < +0 < ... < +Inf < +NaN``), largest first, equal keys in element
order; with ``op1`` = 1 it writes their element indices (pattern order, as FP32) instead.
Fewer than 8 elements: the missing slots hold ``0xFFFFFFFF`` (values) / ``-1.0`` (indices).

FIND_INDEX8 (the public ``nc_find_index8``): per partition, for each of the 8 values of src1
(its first slot ``num = 8``), the index (pattern order, as FP32, modulo ``2**24`` as IOTA's) of
the first src0 element whose widened FP32 pattern equals the value's widened pattern bit for bit
(so ``-0 != +0`` and a NaN finds the same NaN pattern: whatever MAX8 returned is found);
``-1.0`` where no element matches (MAX8's missing-slot index).

BN_STATS / BN_AGGR (layer-norm statistics, ``docs/vector.md`` §1.7): BN_STATS writes per
partition ``[n, S, Q]`` (the element count as FP32, ``S = sum x`` and ``Q = sum x*x``, each in
``K`` interleaved partials like TENSOR_REDUCE, ``Q``'s partials with one fused multiply-add per
element); BN_AGGR reads triples ``[n, S, Q]`` (innermost dimension of 3), sums them in ``3K``
interleaved partials and writes ``[mean, var]`` with a Newton reciprocal of the total count.

AFFINE_SELECT: ``dst = src0 if (off + cp*p + ci*i) cmp 0 else imm0`` (integers: ``p`` the
absolute partition, ``i`` the element index in pattern order; ``imm1`` packs ``off``, ``ci``,
``cp``; ``op0`` is the comparison). TRANSPOSE: a ``B x B`` block (``B = min(32, partitions)``),
``dst[s + j, i] = src0[s + i, j]`` in pattern order.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from golden.ap import AP, E_OK, PSUM, addresses, error_code
from golden.arith import fma_fp32
from golden.formats import FP32_QNAN, convert_rne_bits, convert_sr_bits, decode_bits
from golden.prng import XorWowLanes
from rtl.config import FP32, CoreConfig, check_config
from rtl.isa import (ALU_ADD, ALU_AND, ALU_BYPASS, ALU_EQ, ALU_GE, ALU_GT, ALU_LE, ALU_LT,
                     ALU_MAX, ALU_MIN, ALU_MUL, ALU_NAMES, ALU_NE, ALU_OR, ALU_SEL, ALU_SUB,
                     ALU_XOR, BN_AGGR_N, BN_NEWTON_STEPS, BN_RCP_MAGIC, BN_STATS_N, IOTA_BITS,
                     MAX8_K, REDUCE_OPS, DTYPE_CODES, DTYPES, E_FORMAT, E_OPCODE, E_SHAPE,
                     OP_AFFINE_SELECT,
                     OP_BLOCK_TRANSPOSE as OP_TRANSPOSE, OP_BN_AGGR, OP_BN_STATS, OP_FIND_INDEX8,
                     OP_IOTA, OP_MAX8, OP_MEMSET, OP_SELECT, OP_TENSOR_COPY, OP_TENSOR_REDUCE,
                     OP_TENSOR_SCALAR, OP_TENSOR_TENSOR, OP_TENSOR_TENSOR_SCAN, OPS_BY_CODE,
                     VECTOR_OPCODES)

__all__ = [
    "OP_TENSOR_TENSOR", "OP_TENSOR_SCALAR", "OP_TENSOR_REDUCE", "OP_TENSOR_COPY", "OP_MEMSET",
    "OP_SELECT", "OP_IOTA", "OP_TENSOR_TENSOR_SCAN", "OP_MAX8", "MAX8_K", "IOTA_MOD",
    "total_order_key", "top8", "OPCODES", "ALU_BYPASS", "ALU_ADD", "ALU_SUB", "ALU_MUL", "ALU_MAX", "ALU_MIN",
    "ALU_EQ", "ALU_NE", "ALU_LT", "ALU_LE", "ALU_GT", "ALU_GE", "ALU_AND", "ALU_OR", "ALU_XOR",
    "ALU_SEL", "ALU_NAMES", "REDUCE_OPS", "DTYPE_CODES", "DTYPE_NAMES", "E_OPCODE", "E_FORMAT",
    "E_SHAPE", "FP32_ONE", "VecInstr", "VecMemory", "alu", "reduce_ways", "reduce_lanes",
    "vector_formats", "elem_bytes_of", "check", "run",
    "OP_BN_STATS", "OP_BN_AGGR", "OP_AFFINE_SELECT", "OP_TRANSPOSE", "BN_STATS_N",
    "BN_AGGR_N", "BN_RCP_MAGIC", "BN_NEWTON_STEPS", "bn_stats_lanes", "bn_aggr_lanes",
    "affine_fields", "affine_imm1", "transpose_block", "fma", "AFFINE_CMPS",
    "OP_FIND_INDEX8", "find_index8_lanes",
]

#: Opcodes (rtl.isa, docs/architecture.md §8.4, the vector range 0x20-0x2F): code -> mnemonic.
OPCODES = {code: OPS_BY_CODE[code].name for code in VECTOR_OPCODES}
# BN_STATS_N / BN_AGGR_N, BN_RCP_MAGIC / BN_NEWTON_STEPS, MAX8_K, the ALU operations and their
# names, REDUCE_OPS: rtl.isa's (the vector engine's immediates).
#: IOTA's element index is taken modulo this (exact in FP32).
IOTA_MOD = 1 << IOTA_BITS

#: dtype codes of an AP (rtl.isa.DTYPES, docs/architecture.md §8.3): code -> name
#: (``DTYPE_CODES``, the inverse, is rtl.isa's). The engine's error codes E_OPCODE, E_FORMAT,
#: E_SHAPE come from rtl.isa, the AP codes from :mod:`golden.ap`.
DTYPE_NAMES = dict(enumerate(DTYPES))

FP32_ONE = 0x3F800000
_SIGN = np.uint32(0x80000000)
_NEG_INF, _POS_INF = 0xFF800000, 0x7F800000
#: Identity of each reduce op: -0 for add (x + -0 == x exactly, signed zeros included).
_IDENTITY = {ALU_ADD: 0x80000000, ALU_MAX: _NEG_INF, ALU_MIN: _POS_INF}


def vector_formats(cfg: CoreConfig):
    """The dtype codes the engine accepts: fp32 always (PSUM and the datapath are FP32), plus
    every enabled dense format (``cfg.formats``) with 1-, 2- or 4-byte elements; fp4_e2m1 and
    e8m0 (MX-only codes) and 10-15 are E_FORMAT."""
    names = {"fp32"} | {f.name for f in check_config(cfg, "vector_formats").dense_formats}
    return tuple(sorted(DTYPE_CODES[n] for n in names if DTYPE_CODES[n] < 8))


def elem_bytes_of(cfg: CoreConfig, dtype: int):
    """Bytes per element in memory of dtype code ``dtype`` (tf32: its 19-bit code in 4 bytes)."""
    w = cfg.fmt(DTYPE_NAMES[dtype]).width
    return 1 if w <= 8 else 2 if w <= 16 else 4


def reduce_ways(cfg: CoreConfig):
    """Interleaved partial results of TENSOR_REDUCE: the ALU latency
    (``mul_stages + add_stages``) + 1, so one element per cycle needs no forwarding."""
    check_config(cfg, "reduce_ways")
    return cfg.mul_stages + cfg.add_stages + 1


@dataclass(frozen=True, kw_only=True)
class VecInstr:
    """One decoded Vector-engine instruction (the fields of ``rtl/vector/isa.py``).

    ``dst``, ``src0``, ``src1`` are :class:`golden.ap.AP`; their ``elem_bytes`` is ignored (the
    engine derives it from the dtype). ``imm0``/``imm1`` are FP32 bit patterns.
    """

    opcode: int = OP_TENSOR_COPY
    dst: AP = AP()
    src0: AP = AP()
    src1: AP = AP()
    dst_dtype: int = 0
    src0_dtype: int = 0
    src1_dtype: int = 0
    sr: int = 0
    op0: int = ALU_BYPASS
    op1: int = ALU_BYPASS
    rev0: int = 0
    rev1: int = 0
    sel0: int = 0
    sel1: int = 0
    imm0: int = 0
    imm1: int = 0


class VecMemory:
    """SBUF (``partitions x sbuf_bytes_per_partition``) and PSUM
    (``partitions x psum_bytes_per_partition``) byte arrays."""

    def __init__(self, cfg: CoreConfig, *, sbuf=None, psum=None):
        P = cfg.partitions
        self._cfg = cfg
        self.sbuf = (np.zeros((P, cfg.sbuf_bytes_per_partition), np.uint8) if sbuf is None
                     else np.array(sbuf, dtype=np.uint8))
        self.psum = (np.zeros((P, cfg.psum_bytes_per_partition), np.uint8) if psum is None
                     else np.array(psum, dtype=np.uint8))

    def copy(self):
        return VecMemory(self._cfg, sbuf=self.sbuf, psum=self.psum)

    def buf(self, memory):
        return self.psum if memory == PSUM else self.sbuf


# --- the ALU ------------------------------------------------------------------------------------

def _canon(f32):
    bits = np.asarray(f32, dtype=np.float32).view(np.uint32)
    return np.where(np.isnan(f32), np.uint32(FP32_QNAN), bits).astype(np.uint32)


def _minmax(x, y, want_max):
    fx, fy = x.view(np.float32), y.view(np.float32)
    with np.errstate(invalid="ignore"):
        if want_max:
            r = np.where(fx == fy, np.where(np.signbit(fx), y, x),
                         np.where(fx > fy, x, y))
        else:
            r = np.where(fx == fy, np.where(np.signbit(fx), x, y),
                         np.where(fx < fy, x, y))
    nan = np.isnan(fx) | np.isnan(fy)
    return np.where(nan, np.uint32(FP32_QNAN), r).astype(np.uint32)


def alu(op, x, y, c):
    """One ALU operation on FP32 bit patterns (``np.uint32`` arrays, broadcast).

    add/subtract/multiply: ``RNE_fp32`` of the exact result (IEEE 754 with subnormals, canonical
    NaN); max/min: NaN if either is NaN, ``-0 < +0``; comparisons: ``1.0`` or ``0.0`` (IEEE:
    false with a NaN, except not_equal; ``-0 == +0``); bitwise: on the 32-bit patterns;
    select: ``y`` where ``x`` is nonzero (any bit but the sign; NaN counts), else ``c``;
    bypass: ``x`` unchanged.
    """
    x = np.asarray(x, dtype=np.uint32)
    y = np.asarray(y, dtype=np.uint32)
    c = np.asarray(c, dtype=np.uint32)
    x, y, c = np.broadcast_arrays(x, y, c)
    fx, fy = x.view(np.float32), y.view(np.float32)
    with np.errstate(invalid="ignore", over="ignore", under="ignore"):
        if op == ALU_BYPASS:
            return x.copy()
        if op == ALU_ADD:
            return _canon(fx + fy)
        if op == ALU_SUB:
            return _canon(fx - fy)
        if op == ALU_MUL:
            return _canon(fx * fy)
        if op in (ALU_MAX, ALU_MIN):
            return _minmax(x, y, op == ALU_MAX)
        cmp = {ALU_EQ: np.equal, ALU_NE: np.not_equal, ALU_LT: np.less,
               ALU_LE: np.less_equal, ALU_GT: np.greater, ALU_GE: np.greater_equal}
        if op in cmp:
            return np.where(cmp[op](fx, fy), np.uint32(FP32_ONE), np.uint32(0)).astype(np.uint32)
    if op == ALU_AND:
        return x & y
    if op == ALU_OR:
        return x | y
    if op == ALU_XOR:
        return x ^ y
    if op == ALU_SEL:
        return np.where((x & np.uint32(0x7FFFFFFF)) != 0, y, c).astype(np.uint32)
    raise ValueError(f"alu op must be in [0, 15], not {op!r}")


def total_order_key(bits):
    """uint32 keys whose unsigned order is IEEE 754 totalOrder of the FP32 patterns."""
    b = np.asarray(bits, dtype=np.uint32)
    return np.where(b >> 31 != 0, ~b, b | np.uint32(0x80000000)).astype(np.uint32)


def top8(x):
    """``(values, indices)``: per lane (column of ``(n, lanes)`` FP32 bits) the 8 largest in
    totalOrder, largest first, ties in element order; missing slots ``0xFFFFFFFF`` / -1."""
    n, lanes = x.shape
    vals = np.full((MAX8_K, lanes), 0xFFFFFFFF, np.uint32)
    idx = np.full((MAX8_K, lanes), -1, np.int64)
    keys = total_order_key(x)
    for p in range(lanes):
        order = sorted(range(n), key=lambda i: (-int(keys[i, p]), i))[:MAX8_K]
        vals[:len(order), p] = x[order, p]
        idx[:len(order), p] = order
    return vals, idx


def find_index8_lanes(x, vals):
    """FIND_INDEX8: ``(8, lanes)`` int64, per lane (column of ``x``, ``(n, lanes)`` FP32 bits)
    and value (row of ``vals``, ``(8, lanes)`` FP32 bits) the first element index ``i`` (modulo
    ``IOTA_MOD``) with ``x[i] == value`` bit for bit; -1 where none matches."""
    x = np.asarray(x, dtype=np.uint32)
    vals = np.asarray(vals, dtype=np.uint32)
    n, lanes = x.shape
    out = np.full((MAX8_K, lanes), -1, np.int64)
    hit = x[None, :, :] == vals[:, None, :]              # (8, n, lanes)
    found = hit.any(axis=1)
    first = hit.argmax(axis=1)
    out[found] = first[found] % IOTA_MOD
    return out


def reduce_lanes(op, x, ways):
    """Reduce ``x`` (``(n, lanes)`` FP32 bits) along axis 0 in the engine's order: element i
    goes into partial ``i % ways`` (each partial starts at the op's identity: -0, -Inf, +Inf)
    and the partials are then combined left to right, ``((p0 op p1) op p2) ...``. One RNE
    rounding per addition."""
    n, lanes = x.shape
    parts = np.full((ways, lanes), _IDENTITY[op], dtype=np.uint32)
    for i in range(n):
        parts[i % ways] = alu(op, parts[i % ways], x[i], 0)
    r = parts[0]
    for j in range(1, ways):
        r = alu(op, r, parts[j], 0)
    return r


def fma(a, b, c):
    """``RNE_fp32(a * b + c)`` with one rounding (the FMA of ``rtl/fp``; canonical NaN)."""
    a, b, c = np.broadcast_arrays(np.asarray(a, np.uint32), np.asarray(b, np.uint32),
                                  np.asarray(c, np.uint32))
    return np.asarray(fma_fp32(c, a, FP32, b, FP32), dtype=np.uint32)


def _fold(parts, op):
    r = parts[0]
    for j in range(1, len(parts)):
        r = alu(op, r, parts[j], 0)
    return r


def bn_stats_lanes(x, ways):
    """BN_STATS of ``x`` (``(n, lanes)`` FP32 bits, n >= 1): ``(3, lanes)`` rows ``n`` (FP32 of
    ``n mod 2**24``), ``S`` and ``Q``. ``S``: element i added into partial ``i % ways`` (each
    starting at -0), the partials then added left to right (TENSOR_REDUCE's order). ``Q``:
    partial ``q_j = fma(x_i, x_i, q_j)`` (one rounding per element), the partials added left
    to right."""
    n, lanes = x.shape
    q = np.full((ways, lanes), 0x80000000, np.uint32)
    for i in range(n):
        q[i % ways] = fma(x[i], x[i], q[i % ways])
    cnt = np.float32(n % IOTA_MOD).view(np.uint32)
    return np.stack([np.full(lanes, cnt, np.uint32), reduce_lanes(ALU_ADD, x, ways),
                     _fold(q, ALU_ADD)]).astype(np.uint32)


def bn_aggr_lanes(x, ways):
    """BN_AGGR of ``x`` (``(3k, lanes)``: k triples ``n, S, Q`` in pattern order):
    ``(2, lanes)`` rows ``mean``, ``var``.

    1. element i added into partial ``i % (3 * ways)`` (each starting at -0); then for t = 0,
       1, 2: ``A_t = ((p_t + p_{t+3}) + p_{t+6}) ... + p_{t+3(ways-1)}``: ``N, S, Q = A``.
    2. ``r = bits(BN_RCP_MAGIC - bits(N))``; ``BN_NEWTON_STEPS`` times: ``e = fma(-N, r, 1)``,
       ``r = fma(r, e, r)``.
    3. ``mean = RNE(S * r)``, ``var = max(fma(-mean, mean, RNE(Q * r)), +0)``.
    """
    n, lanes = x.shape
    W = 3 * ways
    parts = np.full((W, lanes), 0x80000000, np.uint32)
    for i in range(n):
        parts[i % W] = alu(ALU_ADD, parts[i % W], x[i], 0)
    N, S, Q = (_fold(parts[t::3], ALU_ADD) for t in range(3))
    neg_n = N ^ _SIGN
    r = (np.uint32(BN_RCP_MAGIC) - N).astype(np.uint32)
    for _ in range(BN_NEWTON_STEPS):
        e = fma(neg_n, r, FP32_ONE)
        r = fma(r, e, r)
    mean = alu(ALU_MUL, S, r, 0)
    ex2 = alu(ALU_MUL, Q, r, 0)
    var = alu(ALU_MAX, fma(mean ^ _SIGN, mean, ex2), 0, 0)
    return np.stack([mean, var]).astype(np.uint32)


def affine_fields(imm1):
    """``(off, ci, cp)`` of AFFINE_SELECT's ``imm1``: bits 15:0 ``off`` (int16), 23:16 ``ci``
    (int8, per element index), 31:24 ``cp`` (int8, per partition index)."""
    v = int(imm1) & 0xFFFFFFFF

    def sx(x, w):
        return x - (1 << w) if x >> (w - 1) & 1 else x
    return sx(v & 0xFFFF, 16), sx(v >> 16 & 0xFF, 8), sx(v >> 24, 8)


def affine_imm1(off, ci, cp):
    """The ``imm1`` of AFFINE_SELECT for ``off`` in [-32768, 32767], ``ci`` and ``cp`` in
    [-128, 127] (ValueError otherwise)."""
    for name, v, w in (("off", off, 16), ("ci", ci, 8), ("cp", cp, 8)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) \
                or not -(1 << (w - 1)) <= v < 1 << (w - 1):
            raise ValueError(f"affine_imm1 field '{name}' must be in "
                             f"[{-(1 << (w - 1))}, {(1 << (w - 1)) - 1}], not {v!r}")
    return (off & 0xFFFF) | (ci & 0xFF) << 16 | (cp & 0xFF) << 24


def transpose_block(cfg: CoreConfig):
    """TRANSPOSE's block size ``B = min(32, partitions)``."""
    return min(32, check_config(cfg, "transpose_block").partitions)


# --- check and run -----------------------------------------------------------------------------

def uses_src1(ins):
    """Whether instruction ``ins`` reads its ``src1`` AP."""
    if ins.opcode in (OP_TENSOR_TENSOR, OP_SELECT, OP_TENSOR_TENSOR_SCAN, OP_FIND_INDEX8):
        return True
    if ins.opcode == OP_TENSOR_SCALAR:
        return bool(ins.sel0 or ins.sel1)
    if ins.opcode in (OP_TENSOR_REDUCE, OP_MAX8):
        return bool(ins.sel0)
    return False


def uses_src0(ins):
    """Whether instruction ``ins`` reads its ``src0`` AP (every opcode but MEMSET and IOTA)."""
    return ins.opcode not in (OP_MEMSET, OP_IOTA)


#: AFFINE_SELECT's comparisons (``op0``).
AFFINE_CMPS = (ALU_EQ, ALU_NE, ALU_LT, ALU_LE, ALU_GT, ALU_GE)
#: Destination elements (first slot ``num``) of the ops writing a fixed count per partition.
_FIXED_DST = {OP_TENSOR_REDUCE: None, OP_MAX8: MAX8_K, OP_BN_STATS: BN_STATS_N,
              OP_BN_AGGR: BN_AGGR_N, OP_FIND_INDEX8: MAX8_K}


def _effective(ins):
    """``(op0, op1, sel0, sel1, rev0, rev1)`` as the datapath runs them."""
    o = ins.opcode
    if o == OP_TENSOR_TENSOR:
        return ins.op0, ALU_BYPASS, 1, 0, ins.rev0, 0
    if o == OP_SELECT:
        return ALU_SEL, ALU_BYPASS, 1, 0, 0, 0
    if o in (OP_TENSOR_COPY, OP_MEMSET):
        return ALU_BYPASS, ALU_BYPASS, 0, 0, 0, 0
    if o == OP_TENSOR_REDUCE:
        return ins.op0, ins.op1, ins.sel0, 0, ins.rev0, 0
    if o == OP_TENSOR_TENSOR_SCAN:
        return ins.op0, ins.op1, 0, 1, ins.rev0, ins.rev1
    if o == OP_MAX8:
        return ins.op0, ALU_BYPASS, ins.sel0, 0, ins.rev0, 0
    if o in (OP_BN_STATS, OP_BN_AGGR, OP_TRANSPOSE, OP_AFFINE_SELECT, OP_FIND_INDEX8):
        return ALU_BYPASS, ALU_BYPASS, 0, 0, 0, 0
    return ins.op0, ins.op1, ins.sel0, ins.sel1, ins.rev0, ins.rev1


def _with_dtype(cfg, ap, dtype):
    return dataclasses.replace(ap, elem_bytes=elem_bytes_of(cfg, dtype))


def _shape(ap):
    return (ap.start_partition, ap.num_partitions, tuple(n for _, n in ap.slots()))


def check(cfg: CoreConfig, ins: VecInstr):
    """The status the engine reports for ``ins`` (0 = runs), in priority order: E_OPCODE
    (unknown opcode; an ALU op the opcode does not allow), E_FORMAT (a used AP's dtype not in
    :func:`vector_formats`), E_SHAPE (used APs with different start partition, partition count
    or ``num`` in any slot; TENSOR_REDUCE: a destination of more than one element), then the AP
    checks of :mod:`golden.ap` in the order src0, src1, dst. (MAX8: ``op1`` not 0/1 is
    E_OPCODE; a destination other than ``num = 8`` in the first slot and <= 1 in the others is
    E_SHAPE. BN_STATS / BN_AGGR: likewise with 3 / 2 destination elements; BN_AGGR's src0
    first ``num`` must be 3. AFFINE_SELECT: ``op0`` not a comparison is E_OPCODE.
    TRANSPOSE: partition count ``B``, start a multiple of ``B``, first ``num`` ``B`` and the
    others <= 1, else E_SHAPE. FIND_INDEX8: the destination and src1 (the 8 values) both
    ``num = 8`` first and <= 1 after, on src0's partitions; src0 any shape.)"""
    check_config(cfg, "vector check")
    if ins.opcode not in OPCODES:
        return E_OPCODE
    if ins.opcode in (OP_TENSOR_TENSOR, OP_TENSOR_SCALAR, OP_TENSOR_REDUCE,
                      OP_TENSOR_TENSOR_SCAN, OP_IOTA):
        if not 0 <= ins.op0 <= 15 or not 0 <= ins.op1 <= 15:
            return E_OPCODE
        if ins.opcode == OP_TENSOR_REDUCE and ins.op1 not in REDUCE_OPS:
            return E_OPCODE
    if ins.opcode == OP_MAX8 and ins.op1 not in (0, 1):
        return E_OPCODE
    if ins.opcode == OP_AFFINE_SELECT and ins.op0 not in AFFINE_CMPS:
        return E_OPCODE
    ok = vector_formats(cfg)
    used = [("dst", ins.dst, ins.dst_dtype)]
    if uses_src0(ins):
        used.append(("src0", ins.src0, ins.src0_dtype))
    if uses_src1(ins):
        used.append(("src1", ins.src1, ins.src1_dtype))
    if any(dt not in ok for _, _, dt in used):
        return E_FORMAT
    shapes = {n: _shape(ap) for n, ap, _ in used}
    if ins.opcode in _FIXED_DST:
        d = shapes.pop("dst")
        want = _FIXED_DST[ins.opcode]
        first_ok = d[2][0] <= 1 if want is None else d[2][0] == want
        if (not first_ok or any(n > 1 for n in d[2][1:])
                or any(s[:2] != d[:2] for s in shapes.values())):
            return E_SHAPE
        if ins.opcode == OP_BN_AGGR and shapes["src0"][2][0] != BN_STATS_N:
            return E_SHAPE
        if ins.opcode == OP_FIND_INDEX8:
            v = shapes.pop("src1")                 # the values: not src0's shape
            if v[2][0] != MAX8_K or any(n > 1 for n in v[2][1:]):
                return E_SHAPE
    if ins.opcode == OP_TRANSPOSE:
        B = transpose_block(cfg)
        s0 = shapes["src0"]
        if s0[1] != B or s0[0] % B or s0[2][0] != B or any(n > 1 for n in s0[2][1:]):
            return E_SHAPE
    if len(set(shapes.values())) > 1:
        return E_SHAPE
    for name in ("src0", "src1", "dst"):
        for n, ap, dt in used:
            if n == name:
                code = error_code(cfg, _with_dtype(cfg, ap, dt))
                if code != E_OK:
                    return code
    return E_OK


def _read(cfg, mem, ap, dtype):
    """FP32 bits ``(n, P)`` of the AP's elements (lanes outside the AP: 0)."""
    ap = _with_dtype(cfg, ap, dtype)
    buf = mem.buf(ap.memory)
    a = addresses(ap)
    w = ap.elem_bytes
    P = cfg.partitions
    raw = np.zeros((len(a), P), np.uint32)
    for p in range(ap.start_partition, ap.start_partition + ap.num_partitions):
        b = buf[p][a[:, None] + np.arange(w)].astype(np.uint32)
        raw[:, p] = np.bitwise_or.reduce(b << (8 * np.arange(w, dtype=np.uint32)), axis=1)
    if dtype == DTYPE_CODES["fp32"]:
        return raw
    return decode_bits(raw & np.uint32((1 << cfg.fmt(DTYPE_NAMES[dtype]).width) - 1),
                       cfg.fmt(DTYPE_NAMES[dtype])).astype(np.uint32)


def _write(cfg, mem, ap, dtype, codes):
    ap = _with_dtype(cfg, ap, dtype)
    buf = mem.buf(ap.memory)
    a = addresses(ap)
    w = ap.elem_bytes
    for p in range(ap.start_partition, ap.start_partition + ap.num_partitions):
        c = codes[:, p].astype(np.uint32)
        buf[p][a[:, None] + np.arange(w)] = ((c[:, None] >> (8 * np.arange(w, dtype=np.uint32)))
                                             & 0xFF).astype(np.uint8)


def run(cfg: CoreConfig, ins: VecInstr, mem: VecMemory, prng: XorWowLanes | None = None):
    """Apply ``ins`` to ``mem`` in place and return its status (nothing changes on an error).

    ``prng`` is the engine's per-partition generator (``XorWowLanes(cfg.sr_seed,
    cfg.partitions)``), stepped once per output element in every lane when ``ins.sr`` is set
    and the destination is not fp32 (whose write needs no rounding). Sources are read in full
    before the destination is written (overlapping source and destination: undefined).
    """
    code = check(cfg, ins)
    if code != E_OK:
        return code
    op0, op1, sel0, sel1, rev0, rev1 = _effective(ins)
    n, P = ins.dst.count, cfg.partitions
    s1 = _read(cfg, mem, ins.src1, ins.src1_dtype) if uses_src1(ins) else None
    if ins.opcode == OP_MEMSET:
        x0 = np.full((n, P), ins.imm0, np.uint32)
    elif ins.opcode == OP_IOTA:
        i = (np.arange(n, dtype=np.int64) % IOTA_MOD).astype(np.float32)
        x0 = np.repeat(i.view(np.uint32)[:, None], P, axis=1)
        s1 = np.repeat(np.arange(P, dtype=np.float32).view(np.uint32)[None, :], n, axis=0)
    else:
        x0 = _read(cfg, mem, ins.src0, ins.src0_dtype)
    y0 = s1 if sel0 else np.uint32(ins.imm0)
    r0 = alu(op0, y0, x0, ins.imm0) if rev0 else alu(op0, x0, y0, ins.imm0)
    if ins.opcode == OP_MAX8:
        vals, idx = top8(np.ascontiguousarray(np.broadcast_to(r0, x0.shape), dtype=np.uint32))
        r = idx.astype(np.float32).view(np.uint32) if ins.op1 == 1 else vals
    elif ins.opcode == OP_FIND_INDEX8:
        r = find_index8_lanes(x0, s1).astype(np.float32).view(np.uint32)
    elif ins.opcode == OP_TENSOR_TENSOR_SCAN:
        r = np.empty_like(x0)
        prev = np.full(P, ins.imm0, np.uint32)
        for i in range(n):
            a, b = (x0[i], prev) if rev0 else (prev, x0[i])
            t = alu(op0, a, b, ins.imm0)
            a, b = (s1[i], t) if rev1 else (t, s1[i])
            prev = r[i] = alu(op1, a, b, ins.imm1)
    elif ins.opcode == OP_TENSOR_REDUCE:
        r = reduce_lanes(op1, np.broadcast_to(r0, x0.shape), reduce_ways(cfg))[None, :]
    elif ins.opcode == OP_BN_STATS:
        r = bn_stats_lanes(x0, reduce_ways(cfg))
    elif ins.opcode == OP_BN_AGGR:
        r = bn_aggr_lanes(x0, reduce_ways(cfg))
    elif ins.opcode == OP_AFFINE_SELECT:
        off, ci, cp = affine_fields(ins.imm1)
        i = np.arange(n, dtype=np.int64)[:, None] % IOTA_MOD
        e = off + cp * np.arange(P, dtype=np.int64)[None, :] + ci * i
        cmp = {ALU_EQ: np.equal, ALU_NE: np.not_equal, ALU_LT: np.less, ALU_LE: np.less_equal,
               ALU_GT: np.greater, ALU_GE: np.greater_equal}[ins.op0]
        r = np.where(cmp(e, 0), x0, np.uint32(ins.imm0))
    elif ins.opcode == OP_TRANSPOSE:
        B, s0 = transpose_block(cfg), ins.src0.start_partition
        r = np.zeros_like(x0)
        r[:, s0:s0 + B] = x0[:, s0:s0 + B].T
    else:
        y1 = s1 if sel1 else np.uint32(ins.imm1)
        r = alu(op1, y1, r0, ins.imm1) if rev1 else alu(op1, r0, y1, ins.imm1)
        r = np.broadcast_to(r, x0.shape)
    r = np.ascontiguousarray(r, dtype=np.uint32)
    if ins.dst_dtype == DTYPE_CODES["fp32"]:
        codes = r
    else:
        fmt = cfg.fmt(DTYPE_NAMES[ins.dst_dtype])
        if ins.sr:
            if prng is None:
                raise ValueError("run field 'prng' is needed for stochastic rounding")
            rand = prng.next_n(r.shape[0])
            codes = convert_sr_bits(r, fmt, rand)
        else:
            codes = convert_rne_bits(r, fmt)
    _write(cfg, mem, ins.dst, ins.dst_dtype, np.asarray(codes))
    return E_OK
