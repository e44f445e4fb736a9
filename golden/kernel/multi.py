# SPDX-License-Identifier: Apache-2.0
"""Multi-core kernels: one :class:`golden.kernel.Kernel` per rank, built together and run on
the multi-core golden simulator (docs/collectives.md §16).

A multi-core kernel is written as a **rank body**: a function ``body(k)`` that fills the
kernel ``k`` of one rank (``k.rank``, ``k.ranks``: each rank may load its own data and
branch on its rank), the way a single-core kernel is written, with the collectives of
:mod:`golden.kernel.cc_ops` among its operations::

    def body(k):
        x = k.dram_tensor("x", data=shard[k.rank])
        t = k.sbuf_tile(P, E, "fp32"); k.load(t, x)
        s = k.sbuf_tile(P, E, "fp32"); k.all_reduce(s, t, "add")
        y = k.dram_tensor("y", (P, E), "fp32"); k.store(y, s); k.output("y", y)

    mk = MultiKernel.from_body(cfg, 4, body)
    run = run_multi(mk)            # run.outputs[r]["y"]: rank r's codes

:meth:`MultiKernel.build` builds every rank and checks, before anything runs, that the ranks
issue their collectives in the same order of streams and agree stream by stream (the same
sequence of opcodes, reduce ops, formats, sizes and send_recv offsets: what the ring would
otherwise report at run time as ``E_LINK``, ``E_OPCODE``, ``E_FORMAT`` or ``E_SHAPE`` on every
rank). :func:`run_multi` runs the built programs on
:class:`golden.collective.multicore.MultiCoreSim` and reads every rank's outputs.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from golden.kernel.builder import Kernel
from golden.kernel.types import KernelProgram

__all__ = ["MultiKernel", "MultiRun", "run_multi", "check_agreement"]


def check_agreement(logs):
    """``ValueError`` unless every rank's collectives (``logs[r]``: a list of
    :class:`golden.kernel.cc_ops.CCRecord`) agree with rank 0's, stream by stream, and come in
    the same order of streams: the CC queue runs one collective at a time, in program order,
    so two ranks that interleave two streams differently wait for each other for ever (the
    ring's ``E_LINK``)."""
    order0 = [rec.stream for rec in logs[0]] if logs else []
    for r, log in enumerate(logs[1:], 1):
        order = [rec.stream for rec in log]
        for k, (a, b) in enumerate(zip(order0, order)):
            if a != b:
                raise ValueError(f"rank {r} {log[k].label} (its collective {k}) is on stream "
                                 f"{b}, rank 0's collective {k} ({logs[0][k].label}) on stream "
                                 f"{a}: every rank must issue its collectives in the same "
                                 f"order (the CC queue runs one at a time, in order)")
    by_stream = []
    for log in logs:
        s = {}
        for rec in log:
            s.setdefault(rec.stream, []).append(rec)
        by_stream.append(s)
    fields = (("op", "opcode"), ("reduce", "reduce op"), ("src_dtype", "src dtype"),
              ("dst_dtype", "dst dtype"), ("src_elems", "src elements"), ("d", "send_recv d"))
    streams = sorted({k for s in by_stream for k in s})
    for st in streams:
        ref = by_stream[0].get(st, [])
        for r, s in enumerate(by_stream[1:], 1):
            mine = s.get(st, [])
            if len(mine) != len(ref):
                raise ValueError(f"rank {r} issues {len(mine)} collectives on stream {st}, "
                                 f"rank 0 {len(ref)}: every rank must issue the same "
                                 f"collectives on a stream (else the ring waits: E_LINK)")
            for k, (a, b) in enumerate(zip(ref, mine)):
                for f, what in fields:
                    if getattr(a, f) != getattr(b, f):
                        raise ValueError(f"rank {r} {b.label} (collective {k} of stream {st}) "
                                         f"{what} {getattr(b, f)!r} must equal rank 0's "
                                         f"{a.label} {getattr(a, f)!r}: the ranks of a "
                                         f"collective agree on opcode, op, formats and size")


class MultiKernel:
    """``ranks`` kernels, one per rank, of one multi-core program.

    Parameters
    ----------
    cfg : CoreConfig
        Every core's configuration.
    ranks : int
        Cores on the ring (any ``n >= 1`` in the golden simulator; the hardware builds
        ``cfg.ring_size``).
    dram_bytes, dram_base :
        Each rank's DRAM image, as :class:`golden.kernel.Kernel`.

    ``mk[r]`` (or ``mk.kernels[r]``) is rank ``r``'s kernel.
    """

    def __init__(self, cfg, ranks, *, dram_bytes=1 << 20, dram_base=0):
        if isinstance(ranks, bool) or not isinstance(ranks, int) or ranks < 1:
            raise ValueError(f"MultiKernel ranks must be an int >= 1, not {ranks!r}")
        self.cfg, self.ranks = cfg, ranks
        self.kernels = [Kernel(cfg, dram_bytes=dram_bytes, dram_base=dram_base, rank=r,
                               ranks=ranks) for r in range(ranks)]

    @classmethod
    def from_body(cls, cfg, ranks, body, **kw):
        """A :class:`MultiKernel` whose rank ``r`` is filled by ``body(kernel of rank r)``."""
        mk = cls(cfg, ranks, **kw)
        for k in mk.kernels:
            body(k)
        return mk

    def __getitem__(self, r):
        return self.kernels[r]

    def __len__(self):
        return self.ranks

    def __iter__(self):
        return iter(self.kernels)

    def build(self):
        """Every rank's :class:`KernelProgram` (a list), after :func:`check_agreement`."""
        check_agreement([k.cc_log for k in self.kernels])
        return [k.build() for k in self.kernels]


@dataclass
class MultiRun:
    """What :func:`run_multi` returns: ``errors[r]`` (rank ``r``'s first error, its ``op``
    the kernel operation's label, or ``None``), ``outputs[r]`` (output name -> codes, or
    values with ``codes=False``; empty after an error), ``cycles[r]`` (rank ``r``'s last
    completion), ``collectives`` (:attr:`MultiCoreSim.collectives`), ``sim`` (the
    :class:`MultiCoreSim`), ``programs`` (the built programs)."""

    errors: list
    outputs: list
    cycles: list
    collectives: list
    sim: object = None
    programs: list = field(default_factory=list)


def run_multi(kernel, *, policies=None, watchdog=None, codes=True):
    """Run a multi-core kernel on :class:`golden.collective.multicore.MultiCoreSim`:
    ``kernel`` is a :class:`MultiKernel` (built here), or a list of built
    :class:`KernelProgram` (one per rank, all of one config: pass ``cfg`` through the
    ``MultiKernel``), or a pair ``(cfg, [KernelProgram])``. ``policies``/``watchdog`` as
    :meth:`MultiCoreSim.run`. Returns a :class:`MultiRun` with every rank's outputs."""
    from golden.collective.multicore import MultiCoreSim
    if isinstance(kernel, MultiKernel):
        cfg, kps = kernel.cfg, kernel.build()
    elif isinstance(kernel, tuple) and len(kernel) == 2:
        cfg, kps = kernel
    else:
        raise TypeError(f"run_multi kernel must be a MultiKernel or (cfg, [KernelProgram]), "
                        f"not {type(kernel).__name__}")
    kps = list(kps)
    if not kps or not all(isinstance(p, KernelProgram) for p in kps):
        raise TypeError("run_multi needs one built KernelProgram per rank")
    if len({p.dram_base for p in kps}) != 1:
        raise ValueError("run_multi: every rank's program must have the same dram_base")
    mc = MultiCoreSim(cfg, len(kps), dram_bytes=[bytes(p.dram) for p in kps],
                      dram_base=kps[0].dram_base)
    errs = mc.run([p.programs for p in kps], policies=policies, watchdog=watchdog)
    errors = [p.locate(e) for p, e in zip(kps, errs)]
    outputs = [{} if errors[r] else p.read_outputs(mc.cores[r], codes=codes)
               for r, p in enumerate(kps)]
    cycles = [c.stats()["cycles"] for c in mc.cores]
    return MultiRun(errors, outputs, cycles, list(mc.collectives), mc, kps)
