# SPDX-License-Identifier: Apache-2.0
"""Pack and unpack payload words with the RTL's own ``data`` layouts (numpy, no cocotb).

Every testbench family (FP units, tensor engine, ...) converts between per-field numpy arrays
and the integer words of a ``StructLayout`` / ``ArrayLayout`` here, by the layout's field
offsets; the first words are cross-checked against ``layout.const(...)`` so a packing error can
never hide behind a matching golden bug.
"""

from __future__ import annotations

import numpy as np
from amaranth.hdl import Shape

__all__ = ["pack", "unpack", "unpack_field", "pack_one", "pack_array", "unpack_array"]


def pack(layout, **fields):
    """Pack integer arrays (one per field of the ``StructLayout``, same length) into words
    (Python ints). Every field must be given; bits above a field's width are dropped."""
    names = {name for name, _ in layout}
    if set(fields) != names:
        raise ValueError(f"pack: fields must be {sorted(names)}, not {sorted(fields)}")
    n = len(next(iter(fields.values()))) if fields else 0
    acc = np.zeros(n, dtype=object)
    for name, field in layout:
        if field.width == 0:
            continue
        v = np.asarray(fields[name]).astype(np.uint64) & np.uint64((1 << field.width) - 1)
        acc = acc + (v.astype(object) << field.offset)
    words = [int(a) for a in acc]
    for j in range(min(4, n)):
        ref = pack_one(layout, **{k: int(np.asarray(v)[j]) for k, v in fields.items()})
        if words[j] != ref:
            raise AssertionError(f"pack mismatch at {j}: {words[j]:#x} != {ref:#x}")
    return words


def pack_one(layout, **fields):
    """One word of ``layout`` from field values (missing fields zero), via ``layout.const``."""
    return layout.const({k: v for k, v in fields.items()
                         if Shape.cast(layout[k].shape).width}).as_bits()


def unpack(layout, words):
    """Every field of the packed ``words`` as ``np.int64`` arrays (signed fields
    sign-extended)."""
    w = np.array([int(x) for x in words], dtype=object)
    return {name: unpack_field(layout, w, name) for name, _ in layout}


def unpack_field(layout, words, name):
    """Field ``name`` of every packed word, as ``np.int64`` (sign-extended if signed)."""
    field = layout[name]
    w = words if isinstance(words, np.ndarray) and words.dtype == object else \
        np.array([int(x) for x in words], dtype=object)
    v = ((w >> field.offset) & ((1 << field.width) - 1)).astype(np.int64)
    if Shape.cast(field.shape).signed:
        v = np.where(v >= (1 << (field.width - 1)), v - (1 << field.width), v)
    return v


def pack_array(width, values):
    """Elements of an ``ArrayLayout(width, n)`` (element 0 in the low bits) as one int."""
    word = 0
    for i, x in enumerate(values):
        x = int(x)
        if not 0 <= x < (1 << width):
            raise ValueError(f"element {i} must be in [0, {(1 << width) - 1}], not {x}")
        word |= x << (i * width)
    return word


def unpack_array(width, n, word):
    """The ``n`` elements of an ``ArrayLayout(width, n)`` word, element 0 first."""
    word = int(word)
    mask = (1 << width) - 1
    return [(word >> (i * width)) & mask for i in range(n)]
