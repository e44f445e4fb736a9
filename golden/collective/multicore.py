# SPDX-License-Identifier: Apache-2.0
"""The multi-core golden simulator: ``n`` golden ISA simulators (one per rank, each with its
own DRAM window, SBUF, PSUM, semaphores and programs) joined by a ring (docs/collectives.md
§12).

Each rank runs its programs in :class:`golden.isasim.IsaSim` (in its own thread, so a rank
that reaches a collective waits there while the others run on). A collective instruction of
the CC queue (:mod:`golden.isasim.collective_engine`) is matched across ranks by its
``stream`` and its position on that stream: the ``k``-th collective of stream ``s`` on every
rank is one collective. When every rank's instruction of a collective has issued, the ring:

1. checks that the ranks agree, against rank 0, in this order: the opcode and the reduce op
   (``E_OPCODE``), the source and destination dtypes (``E_FORMAT``), the source's element
   count and ``send_recv``'s ``d`` (``E_SHAPE``); a disagreement is reported by **every** rank
   (ERR_INFO: the first rank that disagrees), nothing is written;
2. checks the waits: the collective starts at the latest rank's ready cycle (its issue, after
   the collective before it on that rank); a rank that waited longer than ``watchdog``
   cycles (docs/collectives.md §5, ``silent``) makes every rank report ``E_LINK`` with ERR_INFO
   ``LINK_FAULTS["silent"]`` (the early rank's link went silent; the others then wait for a
   rank that stopped), nothing is written;
3. runs it with :mod:`golden.collective.algos` (bit-exact; every rank's output from one
   computation) and charges ``done = start + estimate.cycles + sync_cycles`` on every rank
   (:func:`golden.collective.perf.estimate`, default link settings of ``cfg``).

A collective that can never complete (a rank ends, fails or waits on another collective while
others wait on this one: a missing or mismatched-order instruction, a rank that rejected its
own instruction) ends, once every rank has stopped or waits, with ``E_LINK`` (``silent``) on
every rank still waiting: the watchdog's verdict, reached without simulating its cycles, so a
run never hangs (with ``watchdog`` 0, off, as well).

``n`` is the number of ranks of the software model (1..64 and beyond); ``cfg.ring_size`` is
the ring the hardware builds and is not consulted.
"""

from __future__ import annotations

import threading

from golden.collective.perf import estimate
from golden.isasim import IsaSim
from golden.isasim.collective_engine import COLLECTIVE_OF, run_local
from golden.isasim.errors import E_FORMAT, E_LINK, E_OPCODE, E_SHAPE, Fault
from rtl.config import LINK_FAULTS, CoreConfig, check_config

__all__ = ["MultiCoreSim", "MAX_WALL_SECONDS"]

#: Wall-clock seconds a rank waits for the others before the model itself is declared broken
#: (a ``RuntimeError``; the modelled waits end by the rule above long before).
MAX_WALL_SECONDS = 600.0


class MultiCoreSim:
    """``n`` ranks of :class:`golden.isasim.IsaSim` on one ring.

    Parameters
    ----------
    cfg : CoreConfig
        Every core's configuration.
    n : int
        Ranks (>= 1).
    dram_bytes : int or bytes or list
        Each rank's DRAM window (a size or its contents), or one per rank.
    dram_base : int
    timing : golden.isasim.Timing or None

    Members
    -------
    cores : list of IsaSim
        Rank ``r`` is ``cores[r]`` (``cores[r].rank == r``, ``cores[r].ring is self``).
    errors : list of SimError or None
        Each rank's first error of the last :meth:`run`.
    collectives : list of dict
        Every collective the last run completed, in completion order: ``op``, ``stream``,
        ``seq``, ``start``, ``done``, ``cycles``.
    """

    def __init__(self, cfg: CoreConfig, n, *, dram_bytes=1 << 16, dram_base=0, timing=None):
        check_config(cfg, "MultiCoreSim")
        if isinstance(n, bool) or not isinstance(n, int):
            raise TypeError(f"MultiCoreSim n must be an int, not {n!r}")
        if n < 1:
            raise ValueError(f"MultiCoreSim n must be in [1, inf), not {n!r}")
        if isinstance(dram_bytes, list):
            if len(dram_bytes) != n:
                raise ValueError(f"MultiCoreSim dram_bytes must have {n} entries (one per "
                                 f"rank), not {len(dram_bytes)}")
            drams = dram_bytes
        else:
            drams = [dram_bytes] * n
        self.cfg, self.n = cfg, n
        self.cores = []
        for r in range(n):
            sim = IsaSim(cfg, dram_bytes=drams[r], dram_base=dram_base, timing=timing)
            sim.ring, sim.rank = self, r
            self.cores.append(sim)
        self.errors = [None] * n
        self.collectives = []
        self._cv = threading.Condition()

    # --- the ring, called from each rank's thread ----------------------------------------
    def join(self, req):
        """Rank ``req.rank`` arrives at a collective (:class:`CCRequest`); blocks until the
        collective is resolved; returns ``(output codes, start, done)`` or raises the
        :class:`Fault` of this rank."""
        r = req.rank
        with self._cv:
            seq = self._seq[r].get(req.stream, 0)
            self._seq[r][req.stream] = seq + 1
            key = (req.stream, seq)
            self._pending.setdefault(key, {})[r] = req
            self._state[r] = "wait"
            if len(self._pending[key]) == self.n:
                self._resolve(key)
            else:
                self._check_stuck()
            while (key, r) not in self._results:
                if not self._cv.wait(timeout=MAX_WALL_SECONDS):
                    raise RuntimeError(f"MultiCoreSim: rank {r} waited {MAX_WALL_SECONDS} s "
                                       f"for collective {key}")
            res = self._results.pop((key, r))
        if isinstance(res, Fault):
            raise Fault(res.code, res.info, res.msg)
        return res

    def _fail_all(self, key, ranks, code, info, msg):
        for r in ranks:
            self._results[(key, r)] = Fault(code, info, msg)
            self._state[r] = "run"
        self._cv.notify_all()

    def _resolve(self, key):
        reqs = [self._pending[key][r] for r in range(self.n)]
        del self._pending[key]
        ranks = range(self.n)
        r0 = reqs[0]
        what = f"collective {key[1]} of stream {key[0]}"
        for q in reqs[1:]:
            for code, field, a, b in (
                    (E_OPCODE, "opcode", r0.op, q.op), (E_OPCODE, "reduce op", r0.reduce, q.reduce),
                    (E_FORMAT, "ap1 dtype", r0.src_dtype, q.src_dtype),
                    (E_FORMAT, "ap0 dtype", r0.dst_dtype, q.dst_dtype),
                    (E_SHAPE, "ap1 elements", r0.src_elems, q.src_elems),
                    (E_SHAPE, "send_recv d", r0.d, q.d)):
                if a != b:
                    self._fail_all(key, ranks, code, q.rank,
                                   f"{what}: rank {q.rank} {field} {b!r} disagrees with rank "
                                   f"0's {a!r}")
                    return
        start = max(q.ready for q in reqs)
        wd = self._watchdog
        late = [q.rank for q in reqs if wd and start - q.ready > wd]
        if late:
            self._fail_all(key, ranks, E_LINK, LINK_FAULTS["silent"],
                           f"{what}: rank {late[0]} waited {start - reqs[late[0]].ready} > "
                           f"watchdog {wd} cycles for the others (silent link)")
            return
        outs = run_local(reqs, self.n)
        perm = [(r + r0.d) % self.n for r in ranks] if r0.op == "send_recv" else None
        red = r0.op in ("all_reduce", "reduce_scatter")
        est = estimate(COLLECTIVE_OF[r0.op], self.n, r0.src_elems, r0.src_dtype, self.cfg,
                       out_dtype=r0.dst_dtype if red else None, perm=perm)
        done = start + est.cycles + self.cores[0].timing.sync_cycles
        self.collectives.append({"op": r0.op, "stream": key[0], "seq": key[1],
                                 "start": start, "done": done, "cycles": est.cycles})
        for r in ranks:
            self._results[(key, r)] = (outs[r], start, done)
            self._state[r] = "run"
        self._cv.notify_all()

    def _check_stuck(self):
        """Every rank stopped or waiting (none can arrive any more): fail every wait."""
        if any(s == "run" for s in self._state):
            return
        for key in sorted(self._pending):
            waiting = sorted(self._pending.pop(key))
            missing = sorted(set(range(self.n)) - set(waiting))
            self._fail_all(key, waiting, E_LINK, LINK_FAULTS["silent"],
                           f"collective {key[1]} of stream {key[0]}: rank {missing[0]} never "
                           f"issues it (silent link, watchdog)")

    # --- running --------------------------------------------------------------------------
    def run(self, programs, *, policies=None, watchdog=None):
        """Run ``programs`` (one per rank: engine name -> program, as :meth:`IsaSim.run`) to
        the end of every rank. ``policies``: ``None`` (every rank ``"timed"``) or one policy
        per rank (``"timed"`` or a :class:`random.Random`). ``watchdog``: cycles (``None``:
        ``cfg.watchdog_reset``; 0: off), for the collectives and each rank's semaphore waits.
        Returns :attr:`errors`."""
        n = self.n
        if not isinstance(programs, (list, tuple)) or len(programs) != n:
            raise ValueError(f"programs must be a list of {n} programs (one per rank), not "
                             f"{type(programs).__name__} of "
                             f"{len(programs) if hasattr(programs, '__len__') else '?'}")
        policies = ["timed"] * n if policies is None else list(policies)
        if len(policies) != n:
            raise ValueError(f"policies must have {n} entries (one per rank), not "
                             f"{len(policies)}")
        wd = self.cfg.watchdog_reset if watchdog is None else watchdog
        if isinstance(wd, bool) or not isinstance(wd, int) or not 0 <= wd < 1 << 32:
            raise ValueError(f"watchdog must be None or in [0, 2**32 - 1], not {wd!r}")
        self._watchdog = wd
        self._state = ["run"] * n
        self._seq = [{} for _ in range(n)]
        self._pending, self._results = {}, {}
        self.collectives = []
        crashes = [None] * n

        def rank_main(r):
            try:
                self.cores[r].run(programs[r], policy=policies[r], watchdog=wd or None)
            except BaseException as e:      # noqa: BLE001 - re-raised by run() below
                crashes[r] = e
            finally:
                with self._cv:
                    self._state[r] = "done"
                    self._check_stuck()
                    self._cv.notify_all()

        threads = [threading.Thread(target=rank_main, args=(r,), name=f"rank{r}", daemon=True)
                   for r in range(n)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for e in crashes:
            if e is not None:
                raise e
        self.errors = [c.error for c in self.cores]
        return self.errors
