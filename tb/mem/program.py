# SPDX-License-Identifier: Apache-2.0
"""Programs of the SBUF-fed tensor engine (:class:`tb.mem.rig.FedSystem`): :func:`fed_program`
lays a :class:`tb.tensor.program.Program`'s stationary and moving beats out in SBUF behind random
access patterns (contiguous, reversed, strided, two-dimensional) and turns its commands into fed
commands. Expected results stay the program's golden ones (``golden/tensor.py``)."""

from __future__ import annotations

import numpy as np
from amaranth.lib import data

from golden.ap import AP, ELEM_BYTES, addresses, check
from rtl.tensor.layouts import OP_LOAD, OP_MATMUL, TensorLayouts
from rtl.tensor.sbuf_fed import SbufTensorEngine
from tb.ap.program import pack_ap

__all__ = ["fed_program", "FedProgram"]


class FedProgram:
    """Fed command words and the SBUF image of a :class:`~tb.tensor.program.Program`.

    Attributes
    ----------
    cmds : list of int
        Fed commands (``SbufTensorEngine.Signature(cfg).cmd_layout``).
    image : ndarray (partitions, sbuf_bytes_per_partition) uint8
    aps : list of AP or None
        The AP of each command (None for transpose / read).
    """

    def __init__(self, cmds, image, aps):
        self.cmds, self.image, self.aps = cmds, image, aps


def _pattern(rng, count, w, base, style):
    """An AP (dims, offset) walking ``count`` distinct elements of ``w`` bytes in
    ``[base, base + span)``; returns ``(AP, bytes used)``."""
    if style == "reversed":
        dims, off, used = ((-1, count),), base + (count - 1) * w, count * w
    elif style == "strided":
        s = int(rng.integers(2, 4))
        dims, off, used = ((s, count),), base, ((count - 1) * s + 1) * w
    elif style == "2d" and count % 2 == 0 and count >= 4:
        h = count // 2          # two rows of h, the second row first (negative outer step)
        dims, off, used = ((1, h), (-(h + 1), 2)), base + (h + 1) * w, (2 * h + 1) * w
    else:
        dims, off, used = ((1, count),), base, count * w
    return dims, off, used


def fed_program(cfg, prog, rng, *, st_bank=0, mv_bank=1):
    """Lay ``prog``'s beats out in SBUF (stationary operands in bank ``st_bank``, moving ones in
    ``mv_bank``, one region after the other, wrapping) behind random patterns; return a
    :class:`FedProgram`. Every AP is checked legal with :func:`golden.ap.check`."""
    tl = TensorLayouts(cfg)
    sig = SbufTensorEngine.Signature(cfg)
    lay = sig.cmd_layout
    P = cfg.partitions
    image = rng.integers(0, 256, (P, cfg.sbuf_bytes_per_partition), np.uint8)
    st_it, mv_it = iter(prog.st), iter(prog.mv)
    cur = {st_bank: 0, mv_bank: 0}
    cmds, aps = [], []
    W = tl.code_width
    for word in prog.cmds:
        c = data.Const(tl.cmd, word)
        op = int(c.op)
        if op in (OP_LOAD, OP_MATMUL):
            count = int(c.m) if op == OP_LOAD else int(c.n)
            w = ELEM_BYTES[tl.pe_formats[int(c.fmt)].name]
            sp = int(c.sp) if tl.sparse else 0
            fw = w                      # a format's element bytes (pair half of a sparse load)
            if sp:                      # sparse: (value, tag) pairs / 32-bit packed lanes
                w = 2 * w if op == OP_LOAD else 4
            bank = st_bank if op == OP_LOAD else mv_bank
            style = str(rng.choice(["contiguous", "reversed", "strided", "2d"]))
            dims, off0, used = _pattern(rng, count, w, 0, style)
            if cur[bank] + used > cfg.sbuf_bank_bytes:
                cur[bank] = 0
            base = bank * cfg.sbuf_bank_bytes + cur[bank]
            cur[bank] += -(-used // 4) * 4
            ap = AP(offset=base + off0, elem_bytes=w, dims=dims, num_partitions=P)
            assert check(cfg, ap) is None, (ap, check(cfg, ap))
            beats = [next(st_it if op == OP_LOAD else mv_it) for _ in range(count)]
            for a, beat in zip(addresses(ap).tolist(), beats):
                for k in range(cfg.pe_rows):
                    code = (beat >> (k * W)) & ((1 << W) - 1)
                    if sp and op == OP_LOAD:
                        tb_ = tl.tag_bits
                        tag = (beat >> (tl.lanes_in.size + k * tb_)) & ((1 << tb_) - 1)
                        code |= tag << (8 * fw)
                    image[k, a:a + w] = np.frombuffer(int(code).to_bytes(w, "little"), np.uint8)
        else:
            ap = None
        aps.append(ap)
        apw = pack_ap(lay["ap"].shape, ap, cfg.ap_dims) if ap is not None else 0
        # cmd_layout = {"cmd", "ap"}: the command word in the low bits, the AP above
        assert lay["ap"].offset == tl.cmd.size
        cmds.append(int(word) | (apw << tl.cmd.size))
    return FedProgram(cmds, image, aps)
