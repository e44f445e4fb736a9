# SPDX-License-Identifier: Apache-2.0
"""Access-pattern (AP) descriptors: the fields, the closed-form check, the golden address list.

The normative text is ``docs/memory.md`` (summarised in ``docs/architecture.md`` §4.3); this
module is written from it, never from the RTL (``rtl/mem/ap.py``).

An AP addresses the same free-dimension pattern on a contiguous run of partitions of SBUF or
PSUM:

* ``memory``: :data:`SBUF` (1) or :data:`PSUM` (2), the codes of the §8.3 encoding (0 "none" and
  3 are encodable and rejected with :data:`E_AP_FORM`).
* ``start_partition``, ``num_partitions``: partitions ``[start, start + num)``.
* ``offset``: **bytes** from the start of the partition's memory (PSUM: ``bank *
  psum_bank_bytes + byte``), a multiple of ``elem_bytes``.
* ``elem_bytes``: element size in bytes, 1, 2 or 4 (8 is encodable and rejected).
* ``dims``: up to 4 ``(step, num)`` pairs, ``step`` a signed int16 **in elements**, ``num`` a
  uint16 count. ``dims[0]`` is the **innermost** dimension (it varies fastest); a pair with
  ``num == 0`` ends the list (the encoding's unused slots); a pair with ``num != 0`` after one
  with ``num == 0``, or no pair with ``num != 0`` at all, is malformed.

Element ``(i0, i1, i2, i3)`` (``0 <= i_d < num_d``) sits at byte
``offset + elem_bytes * sum_d step_d * i_d``; :func:`addresses` lists them with ``i0`` fastest.

The closed-form check (:func:`extent`) needs no enumeration: with ``w = elem_bytes`` and
``span_d = step_d * (num_d - 1)``, the lowest byte touched is ``offset + w * sum(span_d < 0)``
and the highest ``offset + w * sum(span_d > 0) + w - 1``. Both must lie in the partition (SBUF:
``[0, sbuf_bytes_per_partition)``) or in the PSUM bank that holds ``offset``.

Error codes (``docs/architecture.md`` §11.2), checked in this order, first failure reported:

=========== ====== ==============================================================================
name        code   condition
=========== ====== ==============================================================================
E_AP_FORM   0x0F   memory not SBUF/PSUM, ``elem_bytes`` 8, no free dimension, a dimension after
                   one with ``num == 0``, more active dimensions than ``cfg.ap_dims``
E_AP_PART   0x03   ``num_partitions`` 0, ``start + num > P``, start not aligned (count > P/2:
                   start 0; P/4 < count <= P/2: 0 or P/2; count <= P/4: a multiple of
                   ``max(1, P/4)``)
E_AP_ALIGN  0x0E   ``offset`` not a multiple of ``elem_bytes``
E_AP_RANGE  0x04   a byte outside the partition (SBUF) or the bank of ``offset`` (PSUM; a bank
                   index >= ``psum_banks`` included)
=========== ====== ==============================================================================
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from rtl.config import (AP_MAX_DIMS, AP_NUM_BITS, AP_OFFSET_BITS, AP_PART_BITS, AP_STEP_BITS,
                        CoreConfig)
from rtl.isa import (E_AP_ALIGN, E_AP_FORM, E_AP_PART, E_AP_RANGE, E_OK, ERROR_NAMES, MEM_NONE,
                     MEM_PSUM as PSUM, MEM_RESERVED, MEM_SBUF as SBUF)

__all__ = [
    "MEM_NONE", "SBUF", "PSUM", "MEM_RESERVED", "MEMORY_NAMES", "ELEM_BYTES",
    "E_OK", "E_AP_PART", "E_AP_RANGE", "E_AP_ALIGN", "E_AP_FORM", "ERROR_NAMES",
    "AP", "active_dims", "extent", "addresses", "partition_mask", "memory_bytes", "check",
    "error_code", "validate",
]

MEMORY_NAMES = {MEM_NONE: "none", SBUF: "SBUF", PSUM: "PSUM", MEM_RESERVED: "reserved"}

#: Element size in bytes of each dense format an AP may address (docs/architecture.md §8.3
#: dtype codes; FP4 packing is [later]).
ELEM_BYTES = {"fp32": 4, "tf32": 4, "bf16": 2, "fp16": 2, "fp8_e5m2": 1, "fp8_e4m3": 1,
              "fp8_e4m3fn": 1, "cfp8": 1, "e8m0": 1}


_STEP_LO, _STEP_HI = -(1 << (AP_STEP_BITS - 1)), (1 << (AP_STEP_BITS - 1)) - 1
_NUM_HI = (1 << AP_NUM_BITS) - 1


def _int(name, value, lo, hi):
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"AP field '{name}' must be an integer, not {value!r}")
    if not lo <= value <= hi:
        raise ValueError(f"AP field '{name}' must be in [{lo}, {hi}], not {value!r}")
    return int(value)


@dataclass(frozen=True, kw_only=True)
class AP:
    """One access-pattern descriptor, as encoded (every *encodable* value is accepted; whether
    it is legal for a config is :func:`check`'s job).

    Parameters
    ----------
    memory : int
        :data:`SBUF` or :data:`PSUM` (0 and 3 are encodable, illegal).
    start_partition, num_partitions : int
        First partition and partition count, each a u8.
    offset : int
        Byte offset in the partition (u32); PSUM: ``bank * psum_bank_bytes + byte``.
    elem_bytes : int
        1, 2, 4 (or the illegal 8): the element size; steps count in elements.
    dims : tuple of (step, num)
        Up to 4 pairs, innermost (fastest) first; ``step`` int16 in elements, ``num`` u16,
        ``num == 0`` ends the list.

    Raises
    ------
    TypeError, ValueError
        A field that the encoding (docs/architecture.md §8.3) cannot hold, named.
    """

    memory: int = SBUF
    start_partition: int = 0
    num_partitions: int = 1
    offset: int = 0
    elem_bytes: int = 4
    dims: tuple = ((1, 1),)

    def __post_init__(self):
        _int("memory", self.memory, 0, 3)
        _int("start_partition", self.start_partition, 0, (1 << AP_PART_BITS) - 1)
        _int("num_partitions", self.num_partitions, 0, (1 << AP_PART_BITS) - 1)
        _int("offset", self.offset, 0, (1 << AP_OFFSET_BITS) - 1)
        if self.elem_bytes not in (1, 2, 4, 8) or isinstance(self.elem_bytes, bool):
            raise ValueError(f"AP field 'elem_bytes' must be one of 1, 2, 4, 8, "
                             f"not {self.elem_bytes!r}")
        try:
            dims = tuple((d[0], d[1]) for d in self.dims)
        except (TypeError, IndexError):
            raise TypeError(f"AP field 'dims' must be a tuple of (step, num) pairs, "
                            f"not {self.dims!r}") from None
        if len(dims) > AP_MAX_DIMS:
            raise ValueError(f"AP field 'dims' must have at most {AP_MAX_DIMS} (step, num) "
                             f"pairs, not {len(dims)}")
        dims = tuple((_int(f"dims[{k}].step", s, _STEP_LO, _STEP_HI),
                      _int(f"dims[{k}].num", n, 0, _NUM_HI)) for k, (s, n) in enumerate(dims))
        object.__setattr__(self, "dims", dims)
        for k in ("memory", "start_partition", "num_partitions", "offset", "elem_bytes"):
            object.__setattr__(self, k, int(getattr(self, k)))

    @property
    def esize(self):
        """log2 of ``elem_bytes`` (the 2-bit code of the RTL layout)."""
        return self.elem_bytes.bit_length() - 1

    def slots(self, n=AP_MAX_DIMS):
        """``dims`` padded to ``n`` pairs with ``(0, 0)`` (the encoding's empty slots)."""
        if len(self.dims) > n:
            raise ValueError(f"AP field 'dims' has {len(self.dims)} pairs, more than {n} slots")
        return self.dims + ((0, 0),) * (n - len(self.dims))

    @property
    def count(self):
        """Elements per partition (the product of the active ``num``)."""
        return int(np.prod([n for _, n in active_dims(self)], dtype=object))


def active_dims(ap):
    """The pairs before the first ``num == 0`` (the dimensions the pattern walks)."""
    out = []
    for s, n in ap.dims:
        if n == 0:
            break
        out.append((s, n))
    return tuple(out)


def extent(ap):
    """``(lo, hi)``: the lowest and the highest byte the pattern touches, in closed form (the
    steps' signs pick the end of each dimension), without enumerating. Unchecked: ``lo`` may be
    negative. ``None`` when there is no active dimension."""
    dims = active_dims(ap)
    if not dims:
        return None
    w = ap.elem_bytes
    spans = [s * (n - 1) for s, n in dims]
    lo = ap.offset + w * sum(x for x in spans if x < 0)
    hi = ap.offset + w * sum(x for x in spans if x > 0) + w - 1
    return lo, hi


def addresses(ap):
    """The golden address list: the byte address of every element of the pattern (the same on
    every partition), innermost dimension (``dims[0]``) fastest, as ``np.int64``."""
    dims = active_dims(ap)
    a = np.array([ap.offset], dtype=np.int64)
    for s, n in reversed(dims):          # outermost first; each new axis varies faster
        a = (a[:, None] + ap.elem_bytes * s * np.arange(n, dtype=np.int64)[None, :]).ravel()
    return a if dims else a[:0]


def partition_mask(ap):
    """The partitions the pattern covers, as an int with bit ``p`` for partition ``p``."""
    return ((1 << ap.num_partitions) - 1) << ap.start_partition


def memory_bytes(cfg, memory):
    """Bytes per partition of ``memory`` (:data:`SBUF` or :data:`PSUM`)."""
    return cfg.sbuf_bytes_per_partition if memory == SBUF else cfg.psum_bytes_per_partition


def _start_granule(P, count):
    """The start partition of ``count`` partitions must be a multiple of this (A18, scaled)."""
    if count > P // 2:
        return P
    if count > P // 4:
        return P // 2
    return max(1, P // 4)


def check(cfg: CoreConfig, ap: AP):
    """``None`` for a legal descriptor, else ``(code, field, message)``: the first failing rule
    in the order of the module's table."""
    if not isinstance(cfg, CoreConfig):
        raise TypeError(f"check cfg must be a CoreConfig, not {cfg!r}")
    if not isinstance(ap, AP):
        raise TypeError(f"check ap must be an AP, not {ap!r}")
    P = cfg.partitions
    # --- E_AP_FORM -------------------------------------------------------------------------
    if ap.memory not in (SBUF, PSUM):
        return (E_AP_FORM, "memory",
                f"AP field 'memory' must be {SBUF} (SBUF) or {PSUM} (PSUM), not {ap.memory}")
    if ap.elem_bytes not in (1, 2, 4):
        return (E_AP_FORM, "elem_bytes",
                f"AP field 'elem_bytes' must be one of 1, 2, 4, not {ap.elem_bytes}")
    nums = [n for _, n in ap.dims]
    act = active_dims(ap)
    if not act:
        return (E_AP_FORM, "dims", "AP field 'dims' must have at least one pair with num >= 1, "
                                   f"not {ap.dims}")
    if any(nums[len(act):]):
        return (E_AP_FORM, "dims", f"AP field 'dims' must not have a pair with num >= 1 after "
                                   f"one with num 0 (which ends the list), not {ap.dims}")
    if len(act) > cfg.ap_dims:
        return (E_AP_FORM, "dims", f"AP field 'dims' must have at most ap_dims = {cfg.ap_dims} "
                                   f"active pairs, not {len(act)}")
    # --- E_AP_PART --------------------------------------------------------------------------
    n, s = ap.num_partitions, ap.start_partition
    if not 1 <= n <= P:
        return (E_AP_PART, "num_partitions",
                f"AP field 'num_partitions' must be in [1, {P}], not {n}")
    if s + n > P:
        return (E_AP_PART, "start_partition",
                f"AP field 'start_partition' must be in [0, {P - n}] for {n} partitions, "
                f"not {s}")
    g = _start_granule(P, n)
    if s % g:
        return (E_AP_PART, "start_partition",
                f"AP field 'start_partition' must be a multiple of {g} for {n} of {P} "
                f"partitions, not {s}")
    # --- E_AP_ALIGN ---------------------------------------------------------------------------
    if ap.offset % ap.elem_bytes:
        return (E_AP_ALIGN, "offset", f"AP field 'offset' must be a multiple of elem_bytes = "
                                      f"{ap.elem_bytes}, not {ap.offset}")
    # --- E_AP_RANGE ---------------------------------------------------------------------------
    lo, hi = extent(ap)
    if ap.memory == SBUF:
        base, size, where = 0, cfg.sbuf_bytes_per_partition, "the SBUF partition"
    else:
        B = cfg.psum_bank_bytes
        bank = ap.offset // B
        if bank >= cfg.psum_banks:
            return (E_AP_RANGE, "offset",
                    f"AP field 'offset' must be in [0, {cfg.psum_bytes_per_partition - 1}] "
                    f"(PSUM bank < {cfg.psum_banks}), not {ap.offset}")
        base, size, where = bank * B, B, f"PSUM bank {bank}"
    if lo < base or hi >= base + size:
        return (E_AP_RANGE, "dims",
                f"AP field 'dims' must keep every byte in [{base}, {base + size - 1}] "
                f"({where}), not reach [{lo}, {hi}]")
    return None


def error_code(cfg, ap):
    """The §11.2 code of ``ap`` under ``cfg``: :data:`E_OK` (0) when legal."""
    r = check(cfg, ap)
    return E_OK if r is None else r[0]


def validate(cfg, ap):
    """``ap`` when legal under ``cfg``; otherwise ``ValueError`` naming the field, its allowed
    range and the error code."""
    r = check(cfg, ap)
    if r is not None:
        code, _field, msg = r
        raise ValueError(f"{msg} ({ERROR_NAMES[code]} = {code:#04x})")
    return ap
