# SPDX-License-Identifier: Apache-2.0
"""The AP checks the collective engines share (docs/collectives.md §14.3, §14.6): an
:class:`rtl.mem.ap.APGenerator` that checks the destination (``ap0``) and then the source
(``ap1``) descriptor of a CC instruction, reset once it has answered."""

from __future__ import annotations

from amaranth.hdl import Cat, ResetInserter, Signal

from rtl import isa

from rtl.mem.ap import APGenerator

__all__ = ["APCheck", "MOVE_DTYPES", "dtype_in"]

#: Dtypes a collective moves unchanged (gathers, all-to-all, send/recv).
MOVE_DTYPES = ("fp32", "bf16", "fp16") + tuple(d for d in isa.DTYPES if d.startswith("fp8"))


def dtype_in(code, names):
    """High when the dtype code ``code`` (a signal) is one of ``names``."""
    return Cat(*[code == isa.DTYPE_CODES[n] for n in names]).any()


class APCheck:
    """The AP check of a collective engine's FSM, built inline.

    :meth:`__init__` adds the checker (``m.submodules.chk``, reset by ``kill``);
    :meth:`states` adds, inside the caller's ``m.FSM``, the states ``CHK_DST``, ``ANS_DST``,
    ``CHK_SRC``, ``ANS_SRC``: each descriptor in turn, ``fail(code, info)`` on its error (ERR_INFO
    the slot: 0 destination, 1 source), then ``m.next = nxt``.
    """

    def __init__(self, m, cfg):
        self.kill = Signal()
        m.submodules.chk = self.chk = ResetInserter(self.kill)(APGenerator(cfg))
        m.d.comb += self.chk.o.ready.eq(1)

    def states(self, m, ins, busy, fail, nxt):
        chk = self.chk
        for slot, after in (("dst", "CHK_SRC"), ("src", nxt)):
            desc = getattr(ins, slot)
            with m.State(f"CHK_{slot.upper()}"):
                m.d.comb += [busy.eq(1), chk.i.valid.eq(1), chk.i.payload.eq(desc)]
                with m.If(chk.i.ready):
                    m.next = f"ANS_{slot.upper()}"
            with m.State(f"ANS_{slot.upper()}"):
                m.d.comb += busy.eq(1)
                with m.If(chk.err):
                    m.d.comb += self.kill.eq(1)
                    fail(chk.err_code, 0 if slot == "dst" else 1)
                with m.Elif(chk.ok):
                    m.d.comb += self.kill.eq(1)
                    m.next = after
