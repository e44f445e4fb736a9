# SPDX-License-Identifier: Apache-2.0
"""Golden model of the DMA engine: the 64-byte descriptor (pack, unpack, closed-form check) and
the byte-for-byte effect of one descriptor on a DRAM window and the SBUF.

Specification: ``docs/dma.md`` (descriptor §2, checks and error codes §3, semantics §4). This
module is written from that text, not from the RTL (``rtl/dma/engine.py``).

Address spaces: :data:`DRAM` (through the AXI4 master; byte addresses, checked against the
window ``[dram_base, dram_limit)``) and :data:`SBUF` (partition-major local address
``partition * sbuf_bytes_per_partition + byte``, architecture §4.1). :data:`RING` (2) is
reserved for the collective engine and rejected today.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

import numpy as np

from golden.ap import ELEM_BYTES
from golden.formats import FP32_QNAN, convert_rne_bits, convert_sr_bits, decode_bits
from golden.prng import XorWow
from rtl import isa
from rtl.config import CoreConfig
from rtl.isa import (DESC_BYTES, DESC_DIMS as DIMS, DMA_DRAM as DRAM,
                     DMA_F_ADDR_ALIGN as F_ADDR_ALIGN, DMA_F_BRESP as F_BRESP, DMA_F_DIM0 as F_DIM0, DMA_F_DTYPE as F_DTYPE,
                     DMA_F_ELEMWISE as F_ELEMWISE, DMA_F_LANE as F_LANE, DMA_F_NUM as F_NUM,
                     DMA_F_OP as F_OP, DMA_F_RANGE as F_RANGE, DMA_F_RESERVED as F_RESERVED,
                     DMA_F_RRESP as F_RRESP, DMA_F_SEM as F_SEM, DMA_F_SPACE as F_SPACE,
                     DMA_F_STRIDE_ALIGN as F_STRIDE_ALIGN, DMA_F_TIMEOUT as F_TIMEOUT,
                     DMA_OP_ADD as OP_ADD, DMA_OP_COPY as OP_COPY, DMA_OP_MAX as OP_MAX,
                     DMA_OP_MIN as OP_MIN, DMA_OP_NAMES as OP_NAMES, DMA_RING as RING,
                     DMA_RND_RNE as RND_RNE, DMA_RND_SR as RND_SR, DMA_SBUF as SBUF,
                     DMA_SR_LANE_BASE as SR_LANE_BASE, E_AP_ALIGN,
                     E_AP_RANGE, E_AXI, E_DESC, E_OK, E_SEM, E_TIMEOUT, ERROR_NAMES)

__all__ = [
    "DRAM", "SBUF", "RING", "OP_COPY", "OP_ADD", "OP_MAX", "OP_MIN", "OP_NAMES", "RND_RNE",
    "RND_SR", "DTYPES", "DTYPE_CODES", "ELEM_BYTES", "DESC_BYTES", "DIMS", "E_OK", "E_SEM",
    "E_TIMEOUT", "E_AXI", "E_DESC", "E_AP_RANGE", "E_AP_ALIGN", "ERROR_NAMES", "F_RESERVED",
    "F_OP", "F_SPACE", "F_DTYPE", "F_NUM", "F_DIM0", "F_SEM", "F_ELEMWISE", "F_ADDR_ALIGN",
    "F_STRIDE_ALIGN", "F_LANE", "F_RANGE", "F_RRESP", "F_BRESP", "F_TIMEOUT", "Descriptor",
    "info_word", "check", "extent", "elementwise", "Memory", "run", "SR_LANE_BASE", "sr_lane",
    "sr_stream", "sr_draws",
]

# Address spaces (DRAM, SBUF, RING), descriptor ops and rounding, descriptor size and
# dimension slots, error codes (E_TIMEOUT: the engine's AXI watchdog only, a run-time condition
# that :func:`check` never returns) and the error detail's field ids are rtl.isa's (its DMA_*
# names), as is the stochastic-rounding lane base: DMA engine ``e`` draws from XORWOW lane
# ``SR_LANE_BASE + e`` of ``cfg.sr_seed`` (number-formats §4), one word per element of every
# element descriptor with ``rounding`` = SR, in element order, descriptor after descriptor in
# the order the engine runs them (all its queues share the stream); reset restores the seed
# state (docs/dma.md §2).

#: dtype codes (architecture §8.3) a descriptor may name: code -> name; fp4_e2m1 (packed,
#: [later]) and the reserved codes are rejected.
DTYPES = {code: name for code, name in enumerate(isa.DTYPES) if name in ELEM_BYTES}
DTYPE_CODES = {name: code for code, name in DTYPES.items()}

_U16, _U64 = (1 << 16) - 1, (1 << 64) - 1
_I32_LO, _I32_HI = -(1 << 31), (1 << 31) - 1


def info_word(field, side=0, dim=0, resp=0):
    """The 32-bit error detail: ``[7:0]`` field id, ``[8]`` side (0 source, 1 destination),
    ``[11:10]`` dimension, ``[13:12]`` AXI response."""
    return field | (side << 8) | (dim << 10) | (resp << 12)


def _int(name, value, lo, hi):
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"Descriptor field '{name}' must be an integer, not {value!r}")
    if not lo <= value <= hi:
        raise ValueError(f"Descriptor field '{name}' must be in [{lo}, {hi}], not {value!r}")
    return int(value)


@dataclass(frozen=True, kw_only=True)
class Descriptor:
    """One DMA descriptor, as encoded (every *encodable* value is accepted; whether it is legal
    is :func:`check`'s job).

    Parameters
    ----------
    src, dst : int
        Byte addresses (u64) in ``src_space`` / ``dst_space``.
    src_space, dst_space : int
        :data:`DRAM`, :data:`SBUF` (2 bits; :data:`RING` and 3 are encodable, illegal).
    dims : tuple of (num, src_stride, dst_stride)
        Up to 4 triples, innermost first (missing ones are ``(1, 0, 0)``): ``num`` u16,
        strides int32 in **bytes**. ``dims[0]`` is the contiguous run: its strides must equal
        the element sizes.
    op : int
        :data:`OP_COPY` .. :data:`OP_MIN` (u8; others illegal).
    src_dtype, dst_dtype : int
        dtype codes (4 bits, :data:`DTYPES`).
    rounding : int
        :data:`RND_RNE` or :data:`RND_SR` (1 bit).
    post : bool
        Increment semaphore ``sem`` by ``inc`` at completion.
    sem : int
        Semaphore index (u8). ``inc`` : u16.
    reserved : int
        The reserved bits (flags [7:6], bytes 62..63), must be 0.
    """

    src: int = 0
    dst: int = 0
    src_space: int = DRAM
    dst_space: int = SBUF
    dims: tuple = ((1, 4, 4),)
    op: int = OP_COPY
    src_dtype: int = 0
    dst_dtype: int = 0
    rounding: int = RND_RNE
    post: bool = False
    sem: int = 0
    inc: int = 1
    reserved: int = 0

    def __post_init__(self):
        _int("src", self.src, 0, _U64)
        _int("dst", self.dst, 0, _U64)
        _int("src_space", self.src_space, 0, 3)
        _int("dst_space", self.dst_space, 0, 3)
        if not isinstance(self.dims, tuple) or not 1 <= len(self.dims) <= DIMS:
            raise ValueError(f"Descriptor field 'dims' must be a tuple of 1 to {DIMS} "
                             f"(num, src_stride, dst_stride), not {self.dims!r}")
        for k, d in enumerate(self.dims):
            if not isinstance(d, tuple) or len(d) != 3:
                raise ValueError(f"Descriptor field 'dims[{k}]' must be a (num, src_stride, "
                                 f"dst_stride) tuple, not {d!r}")
            _int(f"dims[{k}].num", d[0], 0, _U16)
            _int(f"dims[{k}].src_stride", d[1], _I32_LO, _I32_HI)
            _int(f"dims[{k}].dst_stride", d[2], _I32_LO, _I32_HI)
        _int("op", self.op, 0, 255)
        _int("src_dtype", self.src_dtype, 0, 15)
        _int("dst_dtype", self.dst_dtype, 0, 15)
        _int("rounding", self.rounding, 0, 1)
        _int("post", int(self.post), 0, 1)
        _int("sem", self.sem, 0, 255)
        _int("inc", self.inc, 0, _U16)
        _int("reserved", self.reserved, 0, (1 << 18) - 1)

    @property
    def slots(self):
        """The 4 dimension triples (unused ones ``(1, 0, 0)``)."""
        return tuple(self.dims) + ((1, 0, 0),) * (DIMS - len(self.dims))

    @property
    def count(self):
        """Elements moved: the product of the ``num`` fields."""
        n = 1
        for d in self.slots:
            n *= d[0]
        return n

    def pack(self) -> bytes:
        """The 64-byte little-endian encoding (docs/dma.md §2)."""
        b = struct.pack("<QQ", self.src, self.dst)
        for num, ss, ds in self.slots:
            b += struct.pack("<Hii", num, ss, ds)
        flags = (self.src_space | (self.dst_space << 2) | (self.rounding << 4)
                 | (int(self.post) << 5) | ((self.reserved & 3) << 6))
        b += struct.pack("<BBBBHH", self.op, flags, self.src_dtype | (self.dst_dtype << 4),
                         self.sem, self.inc, self.reserved >> 2)
        assert len(b) == DESC_BYTES
        return b

    def to_int(self) -> int:
        """The encoding as one 512-bit integer (byte 0 in bits [7:0])."""
        return int.from_bytes(self.pack(), "little")

    @classmethod
    def unpack(cls, raw):
        """The descriptor encoded in ``raw`` (64 bytes, or a 512-bit integer)."""
        if isinstance(raw, int):
            raw = raw.to_bytes(DESC_BYTES, "little")
        if len(raw) != DESC_BYTES:
            raise ValueError(f"Descriptor encoding must be {DESC_BYTES} bytes, not {len(raw)}")
        src, dst = struct.unpack_from("<QQ", raw, 0)
        dims = tuple(struct.unpack_from("<Hii", raw, 16 + 10 * k) for k in range(DIMS))
        op, flags, dt, sem, inc, res = struct.unpack_from("<BBBBHH", raw, 56)
        return cls(src=src, dst=dst, src_space=flags & 3, dst_space=(flags >> 2) & 3,
                   rounding=(flags >> 4) & 1, post=bool((flags >> 5) & 1), op=op,
                   src_dtype=dt & 15, dst_dtype=dt >> 4, sem=sem, inc=inc,
                   reserved=((flags >> 6) & 3) | (res << 2), dims=dims)


def elementwise(d: Descriptor):
    """True when ``d`` needs the element path (an op other than copy, or a cast)."""
    return d.op != OP_COPY or d.src_dtype != d.dst_dtype


def sr_lane(engine=0):
    """The XORWOW lane of DMA engine ``engine``."""
    return SR_LANE_BASE + engine


def sr_stream(cfg: CoreConfig, engine=0):
    """A fresh :class:`golden.prng.XorWow` for DMA engine ``engine`` (its state after reset);
    pass it as ``run(..., rand=...)`` for every descriptor in the order the engine runs them."""
    return XorWow(cfg.sr_seed, sr_lane(engine))


def sr_draws(d: Descriptor):
    """Random words descriptor ``d`` draws from its engine's stream: ``d.count`` for an element
    descriptor with stochastic rounding, else 0 (a rejected descriptor draws nothing)."""
    return d.count if elementwise(d) and d.rounding == RND_SR else 0


def _esize(code):
    return ELEM_BYTES[DTYPES[code]]


def extent(d: Descriptor, side):
    """``(lo, hi)``: the lowest and highest byte of side ``side`` (0 source, 1 destination)
    the descriptor touches, in closed form."""
    base = d.src if side == 0 else d.dst
    slots = d.slots
    run = slots[0][0] * _esize(d.src_dtype if side == 0 else d.dst_dtype)
    lo, hi = base, base + run - 1
    for num, ss, ds in slots[1:]:
        span = (ss if side == 0 else ds) * (num - 1)
        if span < 0:
            lo += span
        else:
            hi += span
    return lo, hi


def check(cfg: CoreConfig, d: Descriptor, *, dram_base=0, dram_limit=1 << 64, element_ops=False):
    """The closed-form check of docs/dma.md §3: ``(code, info, message)``, ``code`` = 0 when the
    descriptor may start. ``element_ops``: whether the engine has the element path (the RTL
    engine reports it as ``DMAEngine.Signature(cfg).element_ops``)."""
    def bad(code, field, msg, side=0, dim=0):
        return code, info_word(field, side, dim), msg

    # 1. form (E_DESC)
    if d.reserved:
        return bad(E_DESC, F_RESERVED, f"reserved bits must be 0, not {d.reserved:#x}")
    if d.op not in OP_NAMES:
        return bad(E_DESC, F_OP, f"op must be in [0, 3], not {d.op}")
    for side, sp in enumerate((d.src_space, d.dst_space)):
        if sp not in (DRAM, SBUF):
            return bad(E_DESC, F_SPACE, f"space must be DRAM (0) or SBUF (1), not {sp}", side)
    for side, dt in enumerate((d.src_dtype, d.dst_dtype)):
        if dt not in DTYPES:
            return bad(E_DESC, F_DTYPE, f"dtype must be one of {sorted(DTYPES)}, not {dt}", side)
    for k, (num, _, _) in enumerate(d.slots):
        if num == 0:
            return bad(E_DESC, F_NUM, f"dims[{k}].num must be in [1, {_U16}], not 0", dim=k)
    es = (_esize(d.src_dtype), _esize(d.dst_dtype))
    for side in (0, 1):
        if d.slots[0][1 + side] != es[side]:
            return bad(E_DESC, F_DIM0, f"dims[0] stride must equal the element size {es[side]}, "
                                       f"not {d.slots[0][1 + side]}", side)
    if d.post and d.sem >= cfg.semaphores:
        return bad(E_DESC, F_SEM, f"sem must be in [0, {cfg.semaphores - 1}], not {d.sem}")
    if elementwise(d):
        if not element_ops:
            return bad(E_DESC, F_ELEMWISE, "ops and casts need the element path, which this "
                                           "engine does not have")
        for side, dt in enumerate((d.src_dtype, d.dst_dtype)):
            if DTYPES[dt] == "e8m0" or DTYPES[dt] not in cfg.formats:
                return bad(E_DESC, F_DTYPE, f"an op or cast needs an enabled dense format, not "
                                            f"{DTYPES[dt]}", side)
    # 2. alignment (E_AP_ALIGN)
    W = cfg.sbuf_word_bytes
    for side, base in enumerate((d.src, d.dst)):
        if base % es[side]:
            return bad(E_AP_ALIGN, F_ADDR_ALIGN, f"address {base:#x} must be a multiple of "
                                                 f"the element size {es[side]}", side)
    for k, (num, ss, ds) in enumerate(d.slots[1:], start=1):
        for side, st in enumerate((ss, ds)):
            if num > 1 and st % es[side]:
                return bad(E_AP_ALIGN, F_STRIDE_ALIGN, f"dims[{k}] stride {st} must be a "
                                                       f"multiple of {es[side]}", side, k)
    if not elementwise(d):
        if (d.src - d.dst) % W:
            return bad(E_AP_ALIGN, F_LANE, f"a copy needs src = dst modulo the word size {W}, "
                                           f"not {d.src % W} and {d.dst % W}")
        for k, (num, ss, ds) in enumerate(d.slots[1:], start=1):
            if num > 1 and (ss - ds) % W:
                return bad(E_AP_ALIGN, F_LANE, f"a copy needs dims[{k}] strides equal modulo "
                                               f"{W}, not {ss} and {ds}", dim=k)
    # 3. range (E_AP_RANGE for SBUF, E_AXI for DRAM)
    for side, sp in enumerate((d.src_space, d.dst_space)):
        lo, hi = extent(d, side)
        if sp == SBUF:
            size = cfg.partitions * cfg.sbuf_bytes_per_partition
            if lo < 0 or hi >= size:
                return bad(E_AP_RANGE, F_RANGE, f"bytes must lie in SBUF [0, {size - 1}], not "
                                                f"[{lo}, {hi}]", side)
        elif lo < dram_base or hi >= dram_limit:
            return bad(E_AXI, F_RANGE, f"bytes must lie in the DRAM window [{dram_base:#x}, "
                                       f"{dram_limit:#x}), not [{lo:#x}, {hi:#x}]", side)
    return E_OK, 0, "ok"


class Memory:
    """The DMA's view of memory: a DRAM window (``bytearray`` of ``dram_bytes`` from
    ``dram_base``) and the SBUF (``partitions x sbuf_bytes_per_partition`` bytes, flat,
    partition-major)."""

    def __init__(self, cfg: CoreConfig, *, dram_base=0, dram_bytes=1 << 16, dram=None, sbuf=None):
        self.cfg = cfg
        self.dram_base = dram_base
        self.dram = bytearray(dram_bytes) if dram is None else bytearray(dram)
        n = cfg.partitions * cfg.sbuf_bytes_per_partition
        self.sbuf = bytearray(n) if sbuf is None else bytearray(sbuf)
        if len(self.sbuf) != n:
            raise ValueError(f"Memory field 'sbuf' must be {n} bytes, not {len(self.sbuf)}")

    @property
    def dram_limit(self):
        return self.dram_base + len(self.dram)

    def copy(self):
        return Memory(self.cfg, dram_base=self.dram_base, dram=self.dram, sbuf=self.sbuf)

    def _buf(self, space):
        return (self.dram, self.dram_base) if space == DRAM else (self.sbuf, 0)


def element_offsets(d, side):
    """Byte address of every element of side ``side``, innermost dimension fastest."""
    base = d.src if side == 0 else d.dst
    sl = d.slots
    idx = np.indices(tuple(s[0] for s in reversed(sl)), dtype=np.int64)   # i3, i2, i1, i0
    addr = np.full(idx.shape[1:], base, dtype=np.int64)
    for k in range(DIMS):
        addr += idx[DIMS - 1 - k] * sl[k][1 + side]
    return addr.reshape(-1)


def _fp32_op(op, a, b):
    """FP32 bits of ``a op b`` (``a`` destination, ``b`` source), NaN canonical, RNE."""
    fa, fb = a.view(np.float32), b.view(np.float32)
    with np.errstate(invalid="ignore", over="ignore"):
        if op == OP_ADD:
            r = fa + fb
        elif op == OP_MAX:
            r = np.where(fa == fb, np.where(np.signbit(fa), fb, fa), np.maximum(fa, fb))
        else:
            r = np.where(fa == fb, np.where(np.signbit(fa), fa, fb), np.minimum(fa, fb))
    r = np.asarray(r, dtype=np.float32)
    return np.where(np.isnan(r), np.uint32(FP32_QNAN), r.view(np.uint32)).astype(np.uint32)


def run(cfg: CoreConfig, d: Descriptor, mem: Memory, *, element_ops=False, rand=None):
    """Apply ``d`` to ``mem`` in place; return ``(code, info)``. On an error nothing changes.

    Copies move bytes; the element path decodes the source (and, for an op, the destination)
    to FP32, applies the op, and encodes into the destination format with RNE or, for
    :data:`RND_SR`, stochastic rounding with one word of ``rand`` (uint32 array of
    ``d.count`` words, element order) per element, or drawn from ``rand`` when it is a
    :class:`golden.prng.XorWow` (:func:`sr_stream`; it advances by :func:`sr_draws` only when
    the descriptor runs). Source and destination must not overlap, and an element descriptor
    with an op must not name one destination element twice (the result of either is
    undefined; this model reads every source and old destination element first). A 4-byte
    TF32 element is its 19-bit code: the bits above are ignored when read, written 0.
    """
    code, info, _ = check(cfg, d, dram_base=mem.dram_base, dram_limit=mem.dram_limit,
                          element_ops=element_ops)
    if code:
        return code, info
    es = (_esize(d.src_dtype), _esize(d.dst_dtype))
    (sbuf_, sbase), (dbuf, dbase) = mem._buf(d.src_space), mem._buf(d.dst_space)
    sa = element_offsets(d, 0) - sbase
    da = element_offsets(d, 1) - dbase
    src = np.frombuffer(bytes(sbuf_), dtype=np.uint8)
    sbytes = src[sa[:, None] + np.arange(es[0])]                  # (n, es) little-endian
    if not elementwise(d):
        out = sbytes
    else:
        sfmt, dfmt = cfg.fmt(DTYPES[d.src_dtype]), cfg.fmt(DTYPES[d.dst_dtype])
        w = sbytes.astype(np.uint32) << (8 * np.arange(es[0], dtype=np.uint32))
        smask = np.uint32((1 << sfmt.width) - 1)
        a = decode_bits(np.bitwise_or.reduce(w, axis=1) & smask, sfmt)
        if d.op != OP_COPY:
            dst = np.frombuffer(bytes(dbuf), dtype=np.uint8)
            dw = dst[da[:, None] + np.arange(es[1])].astype(np.uint32) \
                << (8 * np.arange(es[1], dtype=np.uint32))
            dmask = np.uint32((1 << dfmt.width) - 1)
            old = decode_bits(np.bitwise_or.reduce(dw, axis=1) & dmask, dfmt)
            a = _fp32_op(d.op, old, a)
        if d.rounding == RND_SR:
            if isinstance(rand, XorWow):
                rand = rand.next_n(d.count)
            if rand is None or len(rand) != d.count:
                raise ValueError(f"run field 'rand' must hold {d.count} uint32 words for "
                                 f"stochastic rounding")
            codes = convert_sr_bits(a, dfmt, np.asarray(rand, dtype=np.uint32))
        else:
            codes = convert_rne_bits(a, dfmt)
        codes = np.asarray(codes).astype(np.uint32)
        out = ((codes[:, None] >> (8 * np.arange(es[1], dtype=np.uint32))) & 0xFF).astype(np.uint8)
    tgt = np.frombuffer(dbuf, dtype=np.uint8)
    tgt[da[:, None] + np.arange(es[1])] = out
    return E_OK, 0

