# SPDX-License-Identifier: Apache-2.0
"""The structured-sparsity decoder of the tensor engine: the group bus and the PE's tag mux.

N:M sparsity (``cfg.sparsity``): a compressed stationary tile keeps ``n`` weights of every
group of ``m`` consecutive K elements, each with a position tag in ``[0, m)``; physical PE row
``k`` holds a kept weight of group ``g = k // n``. A sparse moving beat carries, in row k's
32-bit lane, the ``CR = m / n`` logical elements ``g * m + (k % n) * CR + i`` at bits
``[i * w, (i + 1) * w)`` (``w`` the element width). The decoder has two halves:

* :func:`group_bus` (once per row, in the engine's beat handling): the ``n`` lanes of row k's
  group, repacked into the *group bus*, the group's ``m`` elements contiguous (element ``e`` at
  bits ``[e * w, (e + 1) * w)``), zero-padded to ``bus_width``. Every row of a group sees the
  same bus, delayed by its own row skew.
* :func:`tag_select` (in every PE): the ``m:1`` mux driven by the PE's stationary tag, element
  ``tag`` of the bus at the beat's element width.

Together they give element ``lane[tag // CR] >> ((tag % CR) * w)`` of the group, which is what
the formal check in ``tests/test_tensor_sparse_units.py`` proves for one group.
"""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Mux

__all__ = ["group_bus", "tag_select"]


def group_bus(tl, lanes, k, sp, wsel):
    """The group bus of physical row ``k`` (a ``tl.bus_width``-bit Value, combinational).

    Parameters
    ----------
    tl : TensorLayouts
    lanes : sequence of Value
        Every row's moving lane (at least 32 bits each; lane ``r`` = partition ``r``).
    k : int
        The physical row.
    sp : Value
        Pattern index (``patterns[sp]``, i.e. the command's ``sp - 1``).
    wsel : Value
        Index of the element width in ``tl.sparse_widths``.
    """
    out = Const(0, tl.bus_width)
    for pi, w in tl.sparse_combos:
        n, m = tl.patterns[pi]
        cr = m // n
        g = k // n
        elems = [lanes[g * n + e // cr][(e % cr) * w:(e % cr + 1) * w] for e in range(m)]
        bus = Cat(*elems)
        hit = (sp == pi) & (wsel == tl.sparse_widths.index(w))
        out = Mux(hit, bus, out)
    return out


def tag_select(tl, bus, tag, wsel, width):
    """Element ``tag`` of the group bus at width ``tl.sparse_widths[wsel]``, zero-extended to
    ``width`` bits (combinational; a tag beyond the bus selects zeros)."""
    out = Const(0, width)
    for wi, w in enumerate(tl.sparse_widths):
        padded = Cat(bus, Const(0, (1 << tl.tag_bits) * w))
        sel = padded.word_select(tag, w)
        out = Mux(wsel == wi, sel, out) if len(tl.sparse_widths) > 1 else sel
    return out
