# SPDX-License-Identifier: Apache-2.0
"""Random multi-requester traffic on an :class:`rtl.mem.sbuf.SBUF` in amaranth.sim, checked
against :class:`tb.mem.model.SbufModel` cycle by cycle.

Every port offers random requests (reads and writes, a *hot* bank chosen often so that ports
collide), holds each one until it is granted (stream rule) and drops ``valid`` at random between
requests. The checker applies each granted request to the model, expects the read data exactly
``latency`` cycles after the grant with ``rsp.valid`` (and ``rsp.valid`` low otherwise: no
duplicated or invented response), and measures every request's wait against the documented
bound :meth:`SBUF.Signature.wait_bound`.
"""

from __future__ import annotations

from collections import deque

import numpy as np
from amaranth.hdl import Value

from tb.mem.model import SbufModel

__all__ = ["random_request", "run_traffic"]


def random_request(rng, cfg, row, hot_bank, p_hot, p_write):
    """One random request of a row (``row=True``) or partition port, as a dict of its fields."""
    bank = hot_bank if rng.random() < p_hot else int(rng.integers(cfg.sbuf_banks))
    base = bank * cfg.sbuf_bank_bytes
    P = cfg.partitions
    we = int(rng.random() < p_write)
    if row:
        addr = base + 4 * int(rng.integers(cfg.sbuf_bank_bytes // 4)) + int(rng.integers(4))
        return {"addr": addr, "mask": int(rng.integers(1, 1 << P)), "we": we,
                "be": int(rng.integers(16)),
                "wdata": [int(x) for x in rng.integers(0, 1 << 32, P, dtype=np.uint64)]}
    WB = cfg.sbuf_word_bytes
    return {"part": int(rng.integers(P)),
            "addr": base + WB * int(rng.integers(cfg.sbuf_bank_bytes // WB)), "we": we,
            "be": int(rng.integers(1 << WB)), "wdata": int.from_bytes(rng.bytes(WB), "little")}


def run_traffic(bench, *, seed, n_requests, p_valid=0.8, p_hot=0.7, p_write=0.5,
                active=None, limit=None):
    """Drive ``n_requests`` per active port through ``bench.dut`` (an SBUF in a
    :class:`tb.amsim.SimBench`). Returns statistics: ``waits`` (port -> list of waits, grant cycle
    included), ``reads``/``writes`` counted, ``cycles``, ``max_parallel`` (most grants in one
    cycle). Raises ``AssertionError`` naming the seed on any mismatch, a wait above the bound or
    a hang (no progress within ``limit`` cycles)."""
    dut = bench.dut
    cfg, sig = dut.cfg, dut.signature
    names = list(sig.row_ports) + list(sig.part_ports)
    active = names if active is None else list(active)
    rng = np.random.default_rng(seed)
    hot = int(rng.integers(cfg.sbuf_banks))
    model = SbufModel(cfg)
    ports = {n: getattr(dut, n) for n in names}
    row = {n: n in sig.row_ports for n in names}
    bound = {n: sig.wait_bound(n) for n in names}
    limit = limit or 20 * n_requests * len(active) + 100
    stats = {"waits": {n: [] for n in active}, "reads": 0, "writes": 0, "cycles": 0,
             "max_parallel": 0}

    async def job(ctx):
        left = {n: n_requests for n in active}
        cur = {n: None for n in names}            # (request, raised cycle)
        due = {n: deque() for n in names}         # (cycle, expected data)
        for n in names:
            ctx.set(ports[n].req.valid, 0)
        t = 0
        while any(left.values()) or any(cur[n] for n in names) or any(due.values()):
            # responses of grants `latency` cycles ago
            for n in names:
                exp = due[n][0] if due[n] and due[n][0][0] == t else None
                v = ctx.get(ports[n].rsp.valid)
                assert v == (exp is not None), \
                    f"seed {seed}: port {n} rsp.valid={v} at cycle {t}, expected {exp is not None}"
                if exp is None:
                    continue
                due[n].popleft()
                got = ctx.get(Value.cast(ports[n].rsp.payload))
                if row[n]:
                    mask, want = exp[1]
                    for p in range(cfg.partitions):
                        if mask >> p & 1:
                            g = (got >> (32 * p)) & 0xFFFFFFFF
                            assert g == want[p], (f"seed {seed}: port {n} cycle {t} partition {p}:"
                                                  f" read {g:#x}, model {want[p]:#x}")
                else:
                    assert got == exp[1], f"seed {seed}: port {n} cycle {t}: read {got:#x}, " \
                                          f"model {exp[1]:#x}"
            # offer requests
            for n in names:
                if cur[n] is None and left.get(n, 0) and rng.random() < p_valid:
                    r = random_request(rng, cfg, row[n], hot, p_hot, p_write)
                    cur[n] = (r, t)
                    left[n] -= 1
                    lay = ports[n].req.payload.shape()
                    ctx.set(ports[n].req.payload, lay.const(r))
                ctx.set(ports[n].req.valid, int(cur[n] is not None))
            granted = 0
            for n in names:
                if cur[n] is None or not ctx.get(ports[n].req.ready):
                    if cur[n] is not None:
                        assert t - cur[n][1] + 1 < bound[n], \
                            f"seed {seed}: port {n} waited {t - cur[n][1] + 1} cycles, bound " \
                            f"{bound[n]}"
                    continue
                granted += 1
                r, t0 = cur[n]
                stats["waits"][n].append(t - t0 + 1)
                cur[n] = None
                if row[n]:
                    if r["we"]:
                        model.row_write(r["addr"], r["mask"], r["be"], r["wdata"])
                    else:
                        due[n].append((t + sig.latency, (r["mask"], model.row_read(r["addr"]))))
                else:
                    if r["we"]:
                        model.part_write(r["part"], r["addr"], r["be"], r["wdata"])
                    else:
                        due[n].append((t + sig.latency, model.part_read(r["part"], r["addr"])))
                stats["writes" if r["we"] else "reads"] += 1
            stats["max_parallel"] = max(stats["max_parallel"], granted)
            await ctx.tick()
            t += 1
            assert t < limit, f"seed {seed}: traffic not finished within {limit} cycles (hang)"
        stats["cycles"] = t
    bench.run(job)
    return stats
