# SPDX-License-Identifier: Apache-2.0
"""The word image of an activation table: ``{address: word}`` (:func:`table_image`, what the
function unit's table write port takes) and the word stream ``ACT_TABLE_LOAD`` reads from SBUF
(:func:`table_words`); address map in :mod:`rtl.config` (``docs/scalar.md`` §Table)."""

from __future__ import annotations

import numpy as np

from golden.activation.table_format import NCOEF
from rtl.config import (ACT_BINADES, ACT_HEADER_WORDS as TABLE_HEADER_WORDS, ACT_MAP_BASE,
                        ACT_SEG_BASE, ACT_SEG_STRIDE)

__all__ = ["TABLE_HEADER_WORDS", "table_image", "table_words", "stream_addresses",
           "table_size_ok"]

def table_image(tab, cfg=None):
    """The table as ``{word address: 32-bit word}`` (what ``ACT_TABLE_LOAD`` / the unit's table
    write port takes; address map in ``rtl.config``: header, binade map, segments).

    Header words: 0 ``sym | pre << 2 | exp_en << 4 | log_add << 5 | neg_nan << 6 |
    tiny_odd << 7 | (q2 & 7) << 8 | bmin << 16 | bmax << 24``; 1 ``tiny0 | tiny1 << 16``; 2
    ``big0 | big1 << 16``; 3 ``exp_base | (kmin & 0xFFFF) << 16``; 4 ``kmax & 0xFFFF``; 5..8 the specials for +Inf,
    -Inf, +0, -0; 9 the function id (the engine runs ACTIVATION only for the loaded id). Map
    entry: ``mb | base << 16``. Segment flags: ``var_r | scale << 1 |
    mulx << 2``. Raises ValueError when the table does not fit ``cfg.act_segments``.
    """
    if cfg is not None and tab.segments > cfg.act_segments:
        raise ValueError(f"table {tab.name!r} has {tab.segments} segments; CoreConfig field "
                         f"'act_segments' is {cfg.act_segments}")
    nb = tab.bmax - tab.bmin
    if nb > ACT_BINADES:
        raise ValueError(f"table {tab.name!r} spans {nb} binades, more than {ACT_BINADES}")
    img = {
        0: (tab.sym | tab.pre << 2 | int(tab.exp_en) << 4 | int(tab.log_add) << 5
            | int(tab.neg_nan) << 6 | int(tab.tiny_odd) << 7 | (tab.q2 & 7) << 8 | (tab.bmin & 0xFF) << 16
            | (tab.bmax & 0xFF) << 24),
        1: tab.tiny[0] | tab.tiny[1] << 16,
        2: tab.big[0] | tab.big[1] << 16,
        3: tab.exp_base | (tab.kmin & 0xFFFF) << 16,
        4: tab.kmax & 0xFFFF,
        5: tab.spec["+inf"], 6: tab.spec["-inf"], 7: tab.spec["+0"], 8: tab.spec["-0"],
        9: tab.fid,
    }
    for h in range(2):
        for b in range(nb):
            img[ACT_MAP_BASE + h * ACT_BINADES + b] = tab.mb[h][b] | tab.base[h][b] << 16
    for s_ in range(tab.segments):
        a = ACT_SEG_BASE + s_ * ACT_SEG_STRIDE
        img[a] = int(tab.centre[s_])
        for j in range(NCOEF):
            img[a + 1 + j] = int(tab.coef[s_, j])
        img[a + 8] = int(tab.var_r[s_]) | int(tab.scale[s_]) << 1 | int(tab.mulx[s_]) << 2
    return img


def table_words(tab, cfg=None):
    """The table as the word stream ``ACT_TABLE_LOAD`` reads from SBUF (uint32, FP32 container):
    the 10 header words (addresses 0..9), the ``2 * ACT_BINADES`` binade-map words (addresses
    ``ACT_MAP_BASE`` .., unused entries 0), then per segment its 9 words (centre, c0..c6,
    flags at ``ACT_SEG_BASE + 16 s + j``): ``10 + 128 + 9 * segments`` words."""
    img = table_image(tab, cfg)
    addrs = stream_addresses(tab.segments)
    return np.array([img.get(a, 0) for a in addrs], np.uint32)


def stream_addresses(segments):
    """Word addresses of the ``ACT_TABLE_LOAD`` stream order for ``segments`` segments."""
    return (list(range(TABLE_HEADER_WORDS))
            + list(range(ACT_MAP_BASE, ACT_MAP_BASE + 2 * ACT_BINADES))
            + [ACT_SEG_BASE + s_ * ACT_SEG_STRIDE + j for s_ in range(segments)
               for j in range(NCOEF + 2)])


def table_size_ok(cfg, n):
    """Whether ``n`` words are a table image's size: ``10 + 128 + 9 k`` with
    ``1 <= k <= cfg.act_segments`` (the header, the binade map, whole segments)."""
    head, seg = TABLE_HEADER_WORDS + 2 * ACT_BINADES, NCOEF + 2
    return head + seg <= n <= head + seg * cfg.act_segments and (n - head) % seg == 0
