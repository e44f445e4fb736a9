# SPDX-License-Identifier: Apache-2.0
"""The kernel builder's collective operations (the CC queue, docs/collectives.md §12 and §16),
with NKI's names: :meth:`CCOps.all_reduce`, :meth:`CCOps.reduce_scatter`,
:meth:`CCOps.all_gather`, :meth:`CCOps.all_to_all`, :meth:`CCOps.send` / :meth:`CCOps.recv`
(the pair is one ``send_recv``) and :meth:`CCOps.send_recv`.

A kernel that uses them is one :class:`golden.kernel.Kernel` per rank (``Kernel(cfg,
rank=r, ranks=n)``; :class:`golden.kernel.multi.MultiKernel` builds the ``n`` of them and runs
them on :class:`golden.collective.multicore.MultiCoreSim`). Every operation is checked when it
is recorded, against this rank and the ring size (``ValueError``/``TypeError`` prefixed with the
operation's label, naming the operand and the rule):

- ``src`` and ``dst`` are SBUF or PSUM tiles (DRAM data is loaded first);
- a reduction (``all_reduce``, ``reduce_scatter``) takes ``fp32``, ``bf16`` or ``fp16`` in and
  out (the sum runs in FP32 and is rounded once into ``dst``'s format); a move
  (``all_gather``, ``all_to_all``, ``send_recv``) those or an FP8 format, ``dst`` in ``src``'s
  format; integer data (and ``e8m0`` scales) is rejected;
- ``op`` is ``"add"``, ``"max"`` or ``"min"`` (or their ALU codes);
- sizes (elements, partition-major): ``all_reduce``/``send_recv``/``all_to_all`` ``dst`` has
  ``src``'s count (``all_to_all``: a multiple of the ring size); ``reduce_scatter`` ``dst`` has
  this rank's chunk (:func:`golden.collective.schedule.chunk_bounds`); ``all_gather`` ``dst``
  has ``ranks`` times ``src``;
- ``stream`` in ``[0, 15]``; ``send``'s ``to`` and ``recv``'s ``frm`` ranks of the ring whose
  offsets agree (``to - rank == rank - frm`` modulo ``ranks``).

The semaphores come from the data, like every other engine's: the collective waits for the
producers of ``src`` (and for the readers and writer of ``dst``), and a later operation that
reads ``dst`` waits for the collective. Each rank's collectives are also logged
(:attr:`cc_log`) so that :meth:`golden.kernel.multi.MultiKernel.build` can check, before
anything runs, that the ranks agree.
"""

from __future__ import annotations

from typing import NamedTuple

from golden.collective.algos import MOVE_DTYPES, REDUCE_DTYPES
from golden.collective.schedule import chunk_bounds
from golden.kernel.checks import operation
from golden.kernel.types import Tile
from rtl.isa import ALU_ADD, ALU_MAX, ALU_MIN, Instr

__all__ = ["CCOps", "CCRecord", "CC_OPS", "STREAMS"]

#: Reduce operations by name -> the ALU code the instruction carries.
CC_OPS = {"add": ALU_ADD, "max": ALU_MAX, "min": ALU_MIN}
#: Collective streams (the 4-bit ``stream`` immediate).
STREAMS = 16


class CCRecord(NamedTuple):
    """One collective of a rank as :meth:`MultiKernel.build` compares them: ``label``
    (``"all_reduce #1"``), ``op`` (the opcode), ``reduce`` (name or ``None``), ``stream``,
    ``src_dtype``, ``dst_dtype``, ``src_elems``, ``d`` (send_recv's offset, else 0)."""

    label: str
    op: str
    reduce: str | None
    stream: int
    src_dtype: str
    dst_dtype: str
    src_elems: int
    d: int


def _elems(t):
    return t.parts * t.elems


class CCOps:
    """Collective operations of :class:`golden.kernel.Kernel` (see the module docstring)."""

    # --- checks ------------------------------------------------------------------------------
    def _cc_tiles(self, **tiles):
        for role, t in tiles.items():
            if not isinstance(t, Tile):
                raise TypeError(f"{role} must be an SBUF or PSUM tile (DRAM data is loaded "
                                f"into a tile first), not {type(t).__name__}")

    @staticmethod
    def _cc_dtype(role, t, allowed, what):
        if t.dtype not in allowed:
            kind = "integer data is not supported: " if t.dtype.startswith(("int", "uint",
                                                                            "e8m0")) else ""
            raise ValueError(f"{role} {t.name} dtype must be one of {list(allowed)} ({kind}"
                             f"{what}), not {t.dtype!r}")

    @staticmethod
    def _cc_op(op):
        if isinstance(op, str) and op in CC_OPS:
            return op
        codes = {v: k for k, v in CC_OPS.items()}
        if not isinstance(op, bool) and isinstance(op, int) and op in codes:
            return codes[op]
        raise ValueError(f"op must be one of {list(CC_OPS)} (or their ALU codes "
                         f"{sorted(codes)}): collectives reduce by FP32 add, max or min, "
                         f"not {op!r}")

    @staticmethod
    def _cc_stream(stream):
        if isinstance(stream, bool) or not isinstance(stream, int) or \
                not 0 <= stream < STREAMS:
            raise ValueError(f"stream must be in [0, {STREAMS - 1}], not {stream!r}")
        return stream

    def _cc_size(self, dst, want, rule):
        if _elems(dst) != want:
            raise ValueError(f"dst {dst.name} [{dst.parts} x {dst.elems}] must hold {want} "
                             f"elements ({rule}), not {_elems(dst)}")

    def _cc_rank(self, role, r):
        n = self.ranks
        if isinstance(r, bool) or not isinstance(r, int) or not 0 <= r < n:
            raise ValueError(f"{role} must be a rank in [0, {n - 1}], not {r!r}")
        return r

    # --- emission ----------------------------------------------------------------------------
    def _cc(self, opname, dst, src, *, reduce=None, stream=0, d=0):
        imm = {"stream": stream}
        if reduce is not None:
            imm["op"] = CC_OPS[reduce]
        if opname == "send_recv":
            imm["d"] = d
        aps = {"ap0": dst.ap(), "ap1": src.ap()}
        self.cc_log.append(CCRecord(self._op_label, opname, reduce, stream, src.dtype,
                                    dst.dtype, _elems(src), d))
        self._emit("cc", "cc", [src], [dst],
                   lambda w, p: Instr(op=opname, wait=w, post=p, aps=aps,
                                      imm={k: v for k, v in imm.items() if v}))

    def _reduction(self, name, dst, src, op, stream):
        self._cc_tiles(dst=dst, src=src)
        red = self._cc_op(op)
        for role, t in (("src", src), ("dst", dst)):
            self._cc_dtype(role, t, REDUCE_DTYPES, "reductions sum in FP32 and round once "
                                                   "into dst's float format")
        return red, self._cc_stream(stream)

    def _move(self, dst, src, stream):
        self._cc_tiles(dst=dst, src=src)
        self._cc_dtype("src", src, MOVE_DTYPES, "collectives move float codes")
        if dst.dtype != src.dtype:
            raise ValueError(f"dst {dst.name} dtype must be src {src.name}'s {src.dtype!r} "
                             f"(a move copies codes unchanged), not {dst.dtype!r}")
        return self._cc_stream(stream)

    @operation("all_reduce")
    def all_reduce(self, dst, src, op="add", stream=0):
        """``dst`` = the ``op``-reduction (``"add"``, ``"max"``, ``"min"``) of every rank's
        ``src``, element-wise (FP32 partial sums in the ring order of docs/collectives.md §9,
        rounded once into ``dst``'s format): every rank gets the same bytes."""
        red, stream = self._reduction("all_reduce", dst, src, op, stream)
        self._cc_size(dst, _elems(src), "all_reduce: as many as src")
        self._cc("all_reduce", dst, src, reduce=red, stream=stream)

    @operation("reduce_scatter")
    def reduce_scatter(self, dst, src, op="add", stream=0):
        """``dst`` = chunk ``rank`` of the ``op``-reduction of every rank's ``src`` (flattened
        partition-major, cut by :func:`golden.collective.schedule.chunk_bounds`)."""
        red, stream = self._reduction("reduce_scatter", dst, src, op, stream)
        lo, hi = chunk_bounds(_elems(src), self.ranks)[self.rank]
        self._cc_size(dst, hi - lo, f"reduce_scatter: chunk {self.rank} of {_elems(src)} "
                                    f"elements on {self.ranks} ranks")
        self._cc("reduce_scatter", dst, src, reduce=red, stream=stream)

    @operation("all_gather")
    def all_gather(self, dst, src, stream=0):
        """``dst`` = every rank's ``src`` in rank order (``ranks`` times ``src``'s elements,
        partition-major)."""
        stream = self._move(dst, src, stream)
        self._cc_size(dst, self.ranks * _elems(src), f"all_gather: {self.ranks} ranks x "
                                                     f"{_elems(src)}")
        self._cc("all_gather", dst, src, stream=stream)

    @operation("all_to_all")
    def all_to_all(self, dst, src, stream=0):
        """``src`` is ``ranks`` equal blocks (partition-major), block ``j`` for rank ``j``;
        ``dst`` = the blocks every rank sent to this one, in order of the sender."""
        stream = self._move(dst, src, stream)
        n = _elems(src)
        if n % self.ranks:
            raise ValueError(f"src {src.name} must hold a multiple of the ring size "
                             f"{self.ranks} elements (one equal block per rank), not {n}")
        self._cc_size(dst, n, "all_to_all: as many as src")
        self._cc("all_to_all", dst, src, stream=stream)

    @operation("send_recv")
    def send_recv(self, dst, src, d, stream=0):
        """Every rank sends ``src`` to rank ``rank + d`` and receives ``dst`` from rank
        ``rank - d`` (modulo ``ranks``; ``d`` the same on every rank)."""
        self._send_recv(dst, src, d, stream)

    def _send_recv(self, dst, src, d, stream):
        stream = self._move(dst, src, stream)
        if isinstance(d, bool) or not isinstance(d, int) or not 0 <= d < self.ranks:
            raise ValueError(f"d must be in [0, {self.ranks - 1}], not {d!r}")
        self._cc_size(dst, _elems(src), "send_recv: as many as src")
        self._cc("send_recv", dst, src, stream=stream, d=d)

    @operation("send")
    def send(self, src, to, stream=0):
        """Send ``src`` to rank ``to``; the :meth:`recv` that follows on the same ``stream``
        completes the pair (one ``send_recv``: every rank sends ``to - rank`` ranks ahead)."""
        self._cc_tiles(src=src)
        stream = self._cc_stream(stream)
        to = self._cc_rank("to", to)
        if stream in self._cc_sends:
            raise ValueError(f"send on stream {stream} must be followed by its recv before "
                             f"the next send (one send_recv at a time per stream)")
        self._cc_sends[stream] = (src, to)

    @operation("recv")
    def recv(self, dst, frm, stream=0):
        """Receive ``dst`` from rank ``frm``: completes the :meth:`send` of this ``stream``;
        ``frm`` must be as far behind as ``to`` is ahead (``to - rank == rank - frm`` modulo
        ``ranks``)."""
        self._cc_tiles(dst=dst)
        stream = self._cc_stream(stream)
        frm = self._cc_rank("frm", frm)
        if stream not in self._cc_sends:
            raise ValueError(f"recv on stream {stream} needs a send before it on that stream "
                             f"(the pair is one send_recv)")
        src, to = self._cc_sends[stream]
        n, r = self.ranks, self.rank
        d = (to - r) % n
        if (r - frm) % n != d:
            raise ValueError(f"frm must be rank {(r - d) % n} (the send goes {d} ranks ahead, "
                             f"so the recv comes from {d} ranks behind), not {frm!r}")
        del self._cc_sends[stream]
        self._send_recv(dst, src, d, stream)

    def build(self):
        """:meth:`golden.kernel.deps.Dependencies.build`, after checking that every
        :meth:`send` has its :meth:`recv` (``ValueError`` otherwise)."""
        if self._cc_sends:
            s = sorted(self._cc_sends)
            raise ValueError(f"send on stream(s) {s} of rank {self.rank} has no recv: a send "
                             f"and its recv are one send_recv")
        return super().build()
