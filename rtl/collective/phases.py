# SPDX-License-Identifier: Apache-2.0
"""The ring schedule of the collective engine as a walk over element phases
(docs/collectives.md §14).

A collective on ``n`` ranks is cut into **segments** of at most ``seg`` elements of every
chunk; each segment runs the same list of **phases**, one per ring step, and each phase moves
the segment's elements of one chunk (:func:`golden.collective.schedule.chunk_bounds`). Rank
``i`` of an all-reduce runs, per segment,

* phase 0: its own chunk ``i - 1``, widened to FP32, to the link (reduce-scatter step 0);
* phase ``k`` = 1 .. n-2: chunk ``i - k - 1``: ``op(received, own)`` to the link;
* phase ``n - 1``: chunk ``i``: ``op(received, own)``, rounded once into the destination
  format, written to the destination and sent (all-gather step 0);
* phase ``n - 1 + t``, t = 1 .. n-1: chunk ``i - t`` received, written, and forwarded while
  ``t < n - 1``.

Reduce-scatter is the first ``n`` phases (phase ``n - 1`` writes and does not send); all-gather
is phase 0 (its own buffer to the link and to the destination) and the receive phases. Per
element this is the schedule of :mod:`golden.collective.schedule` (the same sum order), only
interleaved in time.

Positions count **flits**: a flit carries ``K = link_bits / 32`` elements of K partitions at one
free index when every chunk is whole source partitions (always for a gather; partitions
``2**x`` apart for a gather into rows ``2**x`` times the source's), else one element (the
engine's ``packed``); a segment is ``seg = link_credits - 1`` flits of every chunk.

**The tail.** All-reduce's last phase (``2n - 2``: chunk ``i + 1`` received and written, not
sent) sends nothing, so the engine walks it with a second walker (``filt``) beside the next
segment: the tail writes its flits to the destination while the elements walk (which runs
``2n - 2`` phases a segment, ``count``) runs phase 0 of segment ``s + 1`` (own data to the link:
no RX, no write). RX is one queue in the upstream's send order, so the tail of segment ``s``
takes flits only once the elements walk has left segment ``s``, and the elements walk takes
flits of segment ``s + 1`` only once the tail of segment ``s`` has taken all of its flits. The
tail takes a flit from RX into a queue of its own (the engine's ``tailq``) and writes it from
there whenever the elements' flit at the head of the pipeline does not hold the write port
(the head holds it only while it writes; a written flit waits for TX with the port free).

**No deadlock** (credit accounting). A flit waiting in rank ``i + 1``'s RX is taken either by
the tail or by rank ``i + 1``'s elements walk in the phase after the one that sent it. The
tail's queue drains through the write port, which the elements hold only while they write, a
bounded number of cycles for each flit that then goes on, so when nothing moves the port is
the tail's: the tail's flits leave RX whatever any TX does. Without them a rank leads its
upstream by at most one phase of one segment, ``seg <= link_credits - 1`` flits, so the flits a
rank has sent and its downstream has not taken stay below ``link_credits``: the ring cannot run
out of credits everywhere at once, whatever the message size (a chunk sent whole would
deadlock any ring once it exceeds the credits).

**Rate.** A phase of ``seg`` flits outlasts the wait for the upstream's result of the previous
phase (pipeline latency plus a hop, about 20 cycles on ``default``), so it streams a flit a
cycle once started; a rank's downstream takes a flit about one phase after it was sent, so
``seg = link_credits - 1`` keeps the flits in flight within the credits (docs/collectives.md
§14.4 has the measured stall profile).
"""

from __future__ import annotations

from amaranth.hdl import Const, Mux, Signal

__all__ = ["KIND_AR", "KIND_RS", "KIND_AG", "MODE_OWN_W", "MODE_RED", "MODE_OWN_RAW",
           "MODE_RX_RAW", "phase_attrs", "PhaseWalker"]

#: Collective kinds the engine runs.
KIND_AR, KIND_RS, KIND_AG = 0, 1, 2
#: Element modes: own element widened to FP32; ``op(received, own)``; own code unchanged;
#: received code unchanged.
MODE_OWN_W, MODE_RED, MODE_OWN_RAW, MODE_RX_RAW = 0, 1, 2, 3
#: Width of element counts and positions (n * 2**8 partitions * 2**16 elements).
_W = 28


def phase_attrs(m, n, kind, rank, k, name):
    """Attributes of phase ``k`` (a signal) of collective ``kind`` on rank ``rank`` of a ring of
    ``n`` (a power of two): a dict of signals ``chunk``, ``own``, ``rx``, ``tx``, ``wr``,
    ``mode``, ``round``, and the phase count ``count``."""
    cb = max(1, (n - 1).bit_length())
    a = {x: Signal(w, name=f"{name}_{x}") for x, w in
         (("chunk", cb), ("own", 1), ("rx", 1), ("tx", 1), ("wr", 1), ("mode", 2),
          ("round", 1), ("count", 5))}
    mask = n - 1
    is_ar, is_ag = kind == KIND_AR, kind == KIND_AG
    with m.If(is_ag):
        m.d.comb += a["count"].eq(n)
        with m.If(k == 0):
            m.d.comb += [a["chunk"].eq(rank), a["own"].eq(1), a["tx"].eq(n > 1), a["wr"].eq(1),
                         a["mode"].eq(MODE_OWN_RAW)]
        with m.Else():
            m.d.comb += [a["chunk"].eq((rank - k) & mask), a["rx"].eq(1), a["wr"].eq(1),
                         a["tx"].eq(k < n - 1), a["mode"].eq(MODE_RX_RAW)]
    with m.Else():
        m.d.comb += a["count"].eq(Mux(is_ar, 2 * n - 1, n))
        with m.If(k < n):
            m.d.comb += [a["chunk"].eq((rank - k - 1) & mask), a["own"].eq(1),
                         a["rx"].eq(k != 0),
                         a["tx"].eq((k < n - 1) | (is_ar & Const(int(n > 1), 1))),
                         a["wr"].eq(k == n - 1), a["round"].eq(k == n - 1),
                         a["mode"].eq(Mux(k == 0, MODE_OWN_W, MODE_RED))]
        with m.Else():
            t = k - (n - 1)
            m.d.comb += [a["chunk"].eq((rank - t) & mask), a["rx"].eq(1), a["wr"].eq(1),
                         a["tx"].eq(t < n - 1), a["mode"].eq(MODE_RX_RAW)]
    return a


class PhaseWalker:
    """Walks segments, phases and elements of one collective (built inline by
    :meth:`build`; the engine has two: one issues the source reads, one the elements).

    After :meth:`build`, ``attrs`` are the current phase's attributes, ``valid`` is high while
    the walker stands on an element (``chunk``'s element ``pos`` of the source chunk, for
    ``filter`` phases only), ``last`` marks a segment's last element in its phase, ``done``
    once every segment ran; ``step`` (a signal the caller drives) takes the element.
    """

    def __init__(self, name):
        self.name = name
        self.step = Signal(name=f"{name}_step")
        self.valid = Signal(name=f"{name}_valid")
        self.last = Signal(name=f"{name}_last")
        self.done = Signal(name=f"{name}_done")

    def build(self, m, n, kind, rank, start, seg, chunk_len, max_len, filt=None, count=None):
        """Logic of the walk. ``start`` (a strobe) restarts it; ``seg`` the longest segment
        (a constant; the last two segments share what is left evenly); ``chunk_len(c)`` the
        length of chunk ``c`` (a signal); ``max_len`` the longest chunk; ``filt(attrs)``, when
        given, the phases the walk stands on (the others are skipped, a cycle each);
        ``count(attrs)``, when given, the phases of a segment the walk runs (the first ones;
        default all: ``attrs["count"]``)."""
        nm = self.name
        base = Signal(_W, name=f"{nm}_base")            # segment start inside a chunk
        k = Signal(5, name=f"{nm}_k")
        e = Signal(_W, name=f"{nm}_e")
        run = Signal(name=f"{nm}_run")
        a = phase_attrs(m, n, kind, rank, k, nm)
        a["k"] = k
        self.attrs = a
        self.base = base
        cl = Signal(_W, name=f"{nm}_clen")
        m.d.comb += cl.eq(chunk_len(a["chunk"]))
        # segment length: seg, but the last two segments share what is left evenly (a short
        # last segment would expose a wait for the upstream rank in each of its phases)
        left = Signal(_W, name=f"{nm}_left")
        sl = Signal(_W, name=f"{nm}_seglen")
        m.d.comb += [left.eq(max_len - base),
                     sl.eq(Mux(left <= seg, left, Mux(left < 2 * seg, (left + 1) >> 1, seg)))]
        ln = Signal(_W, name=f"{nm}_len")
        rest = cl - base
        m.d.comb += ln.eq(Mux(cl <= base, 0, Mux(rest > sl, sl, rest)))
        use = Signal(name=f"{nm}_use")
        m.d.comb += use.eq(1 if filt is None else filt(a))
        self.pos = Signal(_W, name=f"{nm}_pos")
        m.d.comb += [self.pos.eq(base + e), self.valid.eq(run & use & (e < ln)),
                     self.last.eq(e + 1 == ln), self.done.eq(~run)]
        next_phase = run & (~use | (e >= ln) | (self.step & (e + 1 >= ln)))
        with m.If(start):
            m.d.sync += [base.eq(0), k.eq(0), e.eq(0), run.eq(max_len != 0)]
        with m.Elif(next_phase):
            m.d.sync += e.eq(0)
            with m.If(k + 1 == (a["count"] if count is None else count(a))):
                m.d.sync += k.eq(0)
                m.d.sync += base.eq(base + sl)
                with m.If(base + sl >= max_len):
                    m.d.sync += run.eq(0)
            with m.Else():
                m.d.sync += k.eq(k + 1)
        with m.Elif(self.step):
            m.d.sync += e.eq(e + 1)
        return self
