# SPDX-License-Identifier: Apache-2.0
"""Collective bandwidth and latency (docs/collectives.md §18): ``build/bench/collectives.json``.

Sources, named in the record itself (``sources``):

* **golden model**: the busbw table and ``allreduce_*``/``allgather_*``/``reducescatter_*``/
  ``alltoall_*`` fractions, ``allreduce_4kib_cycles``: :func:`golden.collective.perf.estimate`
  (the cycle estimate the multi-core golden simulator charges), with the preset's link
  settings; busbw as NCCL defines it, over the link peak ``link_bits / 8`` bytes a cycle times
  the TX links a core drives (one on the unidirectional ring, two for the bidirectional
  all-to-all);
* **RTL link ring**: ``hop_latency_cycles``, ``link_hop_cycles`` and
  ``rtl_link_flits_per_cycle``: amaranth.sim of :class:`tb.collective.rig.RingRig` (the RTL
  ``LinkTX``/``LinkRX``/``DelayLine`` of a ring of 4, checked cycle by cycle against the golden
  link model while it runs);
* **RTL engine ring, default, 4 ranks**: ``rtl_busbw_table`` (FP32 all-reduce,
  reduce-scatter, all-gather of 4, 16, 64 and 256 KiB per core: cycles and busbw fraction),
  ``rtl_allreduce_busbw_fraction_64k``/``_256k``, ``rtl_allgather_busbw_fraction``,
  ``rtl_reducescatter_busbw_fraction`` (64 KiB), ``rtl_allreduce_4kib_cycles``: the Verilator
  build of :class:`tb.multicore.harness.EngineRingHarness` (the rig of
  :class:`tb.multicore.rig.EngineRing`: four collective engines with their SBUFs and link
  ports, :func:`rtl_engine_table`), every rank's SBUF checked bit for bit against the
  multi-core golden simulator; the destination in other SBUF banks than the source
  (:data:`RTL_LAYOUT`); 256 KiB on a 32 KiB-a-partition SBUF (the default's 16 KiB holds no
  256 KiB source and destination). ``NC_BENCH_RTL_ENGINE=0`` skips them (``None``);
  ``NC_BENCH_RTL_ENGINE_RANKS=2,8`` adds ``rtl_busbw_table_r2``/``_r8``;
* **RTL permute-engine ring, default, 4 ranks**: ``rtl_busbw_table``'s ``all_to_all`` and
  ``send_recv`` (``d = 1``) rows (4, 16, 64, 256 KiB per core), ``rtl_alltoall_busbw_fraction``
  (64 KiB; ``_256k``), ``rtl_alltoall_of_ring_bound`` (that over the unidirectional ring's
  bound 2/n, :func:`alltoall_ring_bound`), ``rtl_sendrecv_busbw_fraction`` (64 KiB, algbw): the
  same harness of :class:`rtl.collective.permute.PermuteEngine` (:func:`rtl_permute_table`),
  checked the same way;
* ``dp_step_*``: the data-parallel step on the multi-core golden simulator;
* **RTL MultiCore, small, 2 cores**: ``rtl_allreduce`` (cycles and busbw fraction of FP32
  all-reduces of a few sizes that fit the small SBUF) and ``sem_to_first_flit_cycles``: the
  Verilator build of :class:`rtl.core.multicore.MultiCore` (2 small cores narrowed by
  :func:`tb.multicore.build.multicore_cfg`) running a load / all-reduce / store kernel per size
  through :func:`tb.multicore.run_kernel.run_rtl`, every result checked bit for bit against
  the multi-core golden simulator; the all-reduce's cycles are its cc instruction's issue to
  retire on the ``activity`` trace (the slowest core), the first flit the first cycle the
  core's ring TX valid is high after that issue. ``NC_BENCH_RTL=0`` skips them (``None``).
"""

from __future__ import annotations

import os

import numpy as np

from golden.collective.link import hop_latency
from golden.collective.perf import busbw_table, message_estimate
from rtl.config import DEFAULT, SMALL

NAME = "collectives"

def allreduce_cycles_formula(cfg, n=4, size=4 << 10):
    """``(cycles, formula text)`` of an FP32 all-reduce of ``size`` bytes on ``n`` ranks:
    ``(2(n - 1) - 1) max(D, L) + D + L``, ``D`` the flits of a chunk, ``L`` the hop."""
    D = -(-(size // n) * 8 // cfg.link_bits)
    L = hop_latency(cfg)
    steps = 2 * (n - 1)
    cycles = (steps - 1) * max(D, L) + D + L
    text = (f"(2(n-1) - 1) * max(D, L) + D + L with n = {n}, D = S / n * 8 / link_bits = {D} "
            f"flits, L = link_latency + 2 = {L}: {steps - 1} * {max(D, L)} + {D} + {L} = "
            f"{cycles}")
    return cycles, text


def rtl_ring(cfg, seed=0):
    """``(cycles for 1 hop, for 2 hops, flits a cycle of a 64-flit stream on one link)`` of
    the RTL link ring (amaranth.sim, ring of 4)."""
    from tb.amsim import SimBench
    from tb.collective.rig import RingRig, random_payload, run_ring
    c4 = cfg.replace(ring_size=4)
    rng = np.random.default_rng(seed)
    out = []
    for hops in (1, 2):
        rig = RingRig(c4)
        flows = [[], [(hops, random_payload(rng, c4))], [], []]
        delivered, cycles = run_ring(SimBench(rig), rig, flows, rng=rng, cycles=200)
        assert sum(map(len, delivered)) == 1, "the RTL ring lost the flit"
        out.append(cycles - 1)                     # the flit is injected in cycle 0
    nflits = 64
    rig = RingRig(c4)
    flows = [[(1, random_payload(rng, c4)) for _ in range(nflits)], [], [], []]
    delivered, cycles = run_ring(SimBench(rig), rig, flows, rng=rng, cycles=2000)
    assert sum(map(len, delivered)) == nflits, "the RTL ring lost flits"
    stream = cycles - 1 - out[0]                   # cycles after the first flit's arrival
    out.append(round((nflits - 1) / stream, 4) if stream else 1.0)
    return tuple(out)


def dp_step_figures(cfg):
    """``(cycles, overlap, bit mismatches)`` of the 4-rank data-parallel step on the multi-core
    golden simulator (:func:`golden.kernels.dp_step.run_golden_multi`)."""
    from golden.kernels.dp_step import dp_step_case, run_golden_multi
    res = run_golden_multi(dp_step_case(cfg, seed=0, ranks=4))
    if any(res["errors"]):
        raise RuntimeError(f"dp_step failed on the golden model: {res['errors']}")
    bad = sum(b for b, _ in res["check"].values())
    return res["cycles"], round(res["overlap"], 4), bad


#: Per-core FP32 all-reduce sizes (bytes) run on the RTL MultiCore: src and dst fit the small
#: preset's 16 KiB SBUF.
RTL_SIZES = (1 << 10, 2 << 10, 4 << 10)


def _allreduce_kernel(cfg, n, size, seed):
    """A load / all-reduce / store :class:`golden.kernel.multi.MultiKernel` of ``size`` bytes of
    FP32 per core (``cfg.partitions`` rows)."""
    from golden.kernel.multi import MultiKernel
    rows = cfg.partitions
    cols = size // 4 // rows
    rng = np.random.default_rng(seed)
    data = [(rng.standard_normal((rows, cols)) * 3).astype(np.float32) for _ in range(n)]

    def body(k):
        x = k.dram_tensor("x", dtype="fp32", data=data[k.rank])
        t = k.sbuf_tile(rows, cols, "fp32", "t")
        k.load(t, x)
        s = k.sbuf_tile(rows, cols, "fp32", "s")
        k.all_reduce(s, t, "add")
        y = k.dram_tensor("y", (rows, cols), "fp32")
        k.store(y, s)
        k.output("y", y)
    return MultiKernel.from_body(cfg, n, body, dram_bytes=1 << 16)


def rtl_allreduce(cfg, n=2, sizes=RTL_SIZES, seed=0):
    """``({size: {"cycles", "busbw_fraction", "golden_cycles", "golden_fraction"}},
    sem_to_first_flit_cycles)`` of FP32 all-reduces on the RTL MultiCore of ``n`` cores of
    ``cfg`` narrowed by :func:`tb.multicore.build.multicore_cfg`; every result bit for bit
    equal to the multi-core golden simulator's (``RuntimeError`` otherwise)."""
    from golden.kernel.multi import run_multi
    from tb.multicore.build import multicore_cfg
    from tb.multicore.run_kernel import rtl_timeline, run_rtl, sem_to_first_flit
    from tb.runner import ROOT
    from tb.multicore.build import multicore_sim
    mc = multicore_cfg(cfg, n)
    sim = multicore_sim(mc)
    out, s2f = {}, []
    for size in sizes:
        kps = _allreduce_kernel(mc, n, size, seed).build()
        g = run_multi((mc, kps))
        if any(g.errors):
            raise RuntimeError(f"all-reduce {size} B failed on the golden model: {g.errors}")
        rec, _ = run_rtl(mc, kps, f"allreduce_{size}", ROOT / "build" / "bench" / "cc_rtl"
                         / f"allreduce_{size}", estimate=max(g.cycles), sim=sim)
        spans = []
        for r, c in enumerate(rec["cores"]):
            if c["error"] or not np.array_equal(c["outputs"]["y"], g.outputs[r]["y"]):
                raise RuntimeError(f"all-reduce {size} B: RTL core {r} differs from golden "
                                   f"(error {c['error']})")
            tl = rtl_timeline(mc, c)
            a, b, _ = tl["engines"]["cc"]["exec"][0]
            spans.append(b - a)
            s2f.append(sem_to_first_flit(tl, c["tx_valid"]))
        cyc = max(spans)
        peak = mc.link_bits / 8
        busbw = size / cyc * 2 * (n - 1) / n
        est = message_estimate("all_reduce", n, size, "fp32", mc)
        out[str(size)] = {"cycles": cyc, "busbw_fraction": round(busbw / peak, 4),
                          "golden_cycles": g.collectives[0]["cycles"],
                          "golden_fraction": round(est.fraction, 4)}
    return out, (max(s2f) if s2f and None not in s2f else None)


#: The RTL engine ring's busbw table: operations and NCCL sizes S (bytes per core), FP32.
RTL_TABLE_OPS = ("all_reduce", "reduce_scatter", "all_gather")
RTL_TABLE_SIZES = (4 << 10, 16 << 10, 64 << 10, 256 << 10)
#: Where the table's cases put the destination (:data:`tb.multicore.program.RING_LAYOUTS`):
#: in other SBUF banks than the source, so that no size pays bank conflicts between the
#: engine's reads and writes that another does not (with the destination right after the
#: source, the 4 and 16 KiB cases share a bank and the 64 KiB one does not).
RTL_LAYOUT = "split"


def busbw_fraction(op, n, size, cycles, link_bits):
    """NCCL's busbw of ``op`` (``size`` bytes per core on ``n`` ranks in ``cycles``) over the
    link peak ``link_bits / 8`` bytes a cycle: algbw times ``2(n-1)/n`` for an all-reduce,
    ``(n-1)/n`` otherwise."""
    factor = 2 * (n - 1) / n if op == "all_reduce" else (n - 1) / n
    return round(size / cycles * factor / (link_bits / 8), 4)


def engine_ring_cfg(cfg, n, op, size, layout=RTL_LAYOUT):
    """``cfg`` on a ring of ``n``, its SBUF doubled until the case's source and destination
    fit (:func:`tb.multicore.program.engine_ring_case`; the link settings unchanged)."""
    from tb.multicore.program import engine_ring_case
    return _fit_sbuf(cfg.replace(ring_size=n),
                     lambda c: engine_ring_case(c, op, size, layout=layout))


def _fit_sbuf(c, case):
    """``c`` with its SBUF doubled until ``case(c)`` (a case builder) raises no
    ``ValueError`` (up to 1 MiB a partition)."""
    while True:
        try:
            case(c)
            return c
        except ValueError:
            if c.sbuf_bytes_per_partition >= 1 << 20:
                raise
            c = c.replace(sbuf_bytes_per_partition=2 * c.sbuf_bytes_per_partition)


def rtl_engine_table(cfg, n=4, ops=RTL_TABLE_OPS, sizes=RTL_TABLE_SIZES, seed=0,
                     layout=RTL_LAYOUT):
    """``({op: {size: {"cycles", "busbw_fraction", "sbuf_bytes_per_partition",
    "sim_seconds"}}}, {config label: {"build_seconds", "cached"}})`` of FP32 ``ops`` x
    ``sizes`` on the Verilator engine ring (:func:`tb.multicore.build.run_engine_ring`) of
    ``n`` ranks of ``cfg``, the destination placed by ``layout``, every rank's whole SBUF bit
    for bit equal to the multi-core golden simulator's (``AssertionError`` otherwise). A case
    whose source and destination do not fit the SBUF runs on a larger SBUF
    (:func:`engine_ring_cfg`); one build and one simulation per SBUF size."""
    from tb.multicore.build import engine_ring_sim, run_engine_ring
    groups = {}
    for op in ops:
        for size in sizes:
            c = engine_ring_cfg(cfg, n, op, size, layout)
            groups.setdefault(c.sbuf_bytes_per_partition, (c, []))[1].append(
                {"op": op, "size": size, "layout": layout})
    table, builds = {op: {} for op in ops}, {}
    for sb, (c, cases) in sorted(groups.items()):
        sim = engine_ring_sim(c)
        rows, secs = run_engine_ring(c, cases, seed=seed, sim=sim)
        builds[f"sbuf_bytes_per_partition={sb}"] = {"build_seconds": round(secs, 1),
                                                    "cached": sim.cached}
        for row in rows:
            op, size = row["op"], row["size"]
            table[op][str(size)] = {
                "cycles": row["cycles"],
                "busbw_fraction": busbw_fraction(op, n, size, row["cycles"], c.link_bits),
                "sbuf_bytes_per_partition": sb, "sim_seconds": row["sim_seconds"]}
    return table, builds


def rtl_engine_case(cfg, op, size, seed=0, layout=RTL_LAYOUT):
    """``(cycles, busbw fraction)`` of one FP32 ``op`` of NCCL size ``size`` bytes per core on
    the Verilator engine ring of ``cfg`` (``cfg.ring_size`` ranks; ``cfg`` as it is: a case that
    does not fit its SBUF raises ``ValueError``), every rank's whole SBUF checked bit for bit
    against :class:`golden.collective.multicore.MultiCoreSim` (``AssertionError``
    otherwise); the case: :func:`tb.multicore.program.engine_ring_case` (``layout``)."""
    from tb.multicore.build import run_engine_ring
    from tb.multicore.program import engine_ring_case
    engine_ring_case(cfg, op, size, layout=layout)   # the ValueError before a build
    rows, _ = run_engine_ring(cfg, [{"op": op, "size": size, "layout": layout}], seed=seed)
    cyc = rows[0]["cycles"]
    return cyc, busbw_fraction(op, cfg.ring_size, size, cyc, cfg.link_bits)


#: The permute engine's rows of the RTL busbw table (docs/collectives.md §14.6): FP32
#: all-to-all and send/recv with ``d = 1`` of these sizes per core.
RTL_PERMUTE_OPS = ("all_to_all", "send_recv")
RTL_PERMUTE_SIZES = (4 << 10, 16 << 10, 64 << 10, 256 << 10)


def alltoall_ring_bound(n):
    """The busbw fraction (NCCL's, over one link's peak) an all-to-all can reach on a
    unidirectional ring of ``n``: the busiest link carries ``n(n - 1)/2`` blocks of ``S/n``
    bytes and busbw counts ``(n - 1)/n S``, so ``2/n`` (docs/collectives.md §18)."""
    return 2 / n


def permute_ring_cfg(cfg, n, op, size, layout=RTL_LAYOUT):
    """As :func:`engine_ring_cfg` for the permute engine's cases
    (:func:`tb.multicore.build.permute_ring_case`)."""
    from tb.multicore.build import permute_ring_case
    return _fit_sbuf(cfg.replace(ring_size=n),
                     lambda c: permute_ring_case(c, op, size, layout=layout))


def rtl_permute_table(cfg, n=4, ops=RTL_PERMUTE_OPS, sizes=RTL_PERMUTE_SIZES, seed=0,
                      layout=RTL_LAYOUT):
    """``({op: {size: {"cycles", "busbw_fraction", "of_ring_bound",
    "sbuf_bytes_per_partition", "sim_seconds"}}}, builds)`` as :func:`rtl_engine_table` for the
    permute engine's ring (:func:`tb.multicore.build.engine_ring_sim` with ``engine="permute"``):
    FP32 all-to-all and send/recv (``d = 1``), source and destination ``partitions`` rows of
    the same free size (so packed, K elements a flit), every rank's whole SBUF bit for bit equal
    to the multi-core golden simulator's. busbw: all-to-all's NCCL ``(n - 1)/n`` algbw, and
    ``of_ring_bound`` that over :func:`alltoall_ring_bound`; send/recv's algbw (NCCL's busbw of
    a send/recv), both over ``link_bits / 8`` bytes a cycle."""
    from tb.multicore.build import engine_ring_sim, run_engine_ring
    groups = {}
    for op in ops:
        for size in sizes:
            c = permute_ring_cfg(cfg, n, op, size, layout)
            groups.setdefault(c.sbuf_bytes_per_partition, (c, []))[1].append(
                {"op": op, "size": size, "layout": layout, "d": 1})
    table, builds = {op: {} for op in ops}, {}
    for sb, (c, cases) in sorted(groups.items()):
        sim = engine_ring_sim(c, engine="permute")
        rows, secs = run_engine_ring(c, cases, seed=seed, sim=sim)
        builds[f"permute sbuf_bytes_per_partition={sb}"] = {"build_seconds": round(secs, 1),
                                                            "cached": sim.cached}
        for row in rows:
            op, size, cyc = row["op"], row["size"], row["cycles"]
            if op == "all_to_all":
                f = busbw_fraction(op, n, size, cyc, c.link_bits)
                extra = {"of_ring_bound": round(f / alltoall_ring_bound(n), 4)}
            else:
                f, extra = round(size / cyc / (c.link_bits / 8), 4), {"d": 1}
            table[op][str(size)] = {"cycles": cyc, "busbw_fraction": f, **extra,
                                    "sbuf_bytes_per_partition": sb,
                                    "sim_seconds": row["sim_seconds"]}
    return table, builds


#: The ``rtl_*`` engine-ring metrics without a measurement.
RTL_ENGINE_KEYS = ("rtl_allreduce_4kib_cycles", "rtl_allreduce_busbw_fraction_64k",
                   "rtl_allreduce_busbw_fraction_256k", "rtl_allgather_busbw_fraction",
                   "rtl_reducescatter_busbw_fraction", "rtl_busbw_table",
                   "rtl_engine_builds", "rtl_alltoall_busbw_fraction",
                   "rtl_alltoall_busbw_fraction_256k", "rtl_alltoall_of_ring_bound",
                   "rtl_sendrecv_busbw_fraction")


def rtl_engine_figures(cfg, n=4):
    """The ``rtl_*`` engine-ring metrics: :func:`rtl_engine_table` on ``n`` ranks of ``cfg``
    and the named figures taken from it (64 KiB for all-gather and reduce-scatter), and the
    permute engine's rows (:func:`rtl_permute_table`, 64 KiB for all-to-all and send/recv)."""
    table, builds = rtl_engine_table(cfg, n)
    ptable, pbuilds = rtl_permute_table(cfg, n)
    table.update(ptable)
    builds.update(pbuilds)
    k64, k256 = str(64 << 10), str(256 << 10)
    a2a = table["all_to_all"]
    return {"rtl_allreduce_4kib_cycles": table["all_reduce"][str(4 << 10)]["cycles"],
            "rtl_allreduce_busbw_fraction_64k": table["all_reduce"][k64]["busbw_fraction"],
            "rtl_allreduce_busbw_fraction_256k": table["all_reduce"][k256]["busbw_fraction"],
            "rtl_allgather_busbw_fraction": table["all_gather"][k64]["busbw_fraction"],
            "rtl_reducescatter_busbw_fraction": table["reduce_scatter"][k64]["busbw_fraction"],
            "rtl_alltoall_busbw_fraction": a2a[k64]["busbw_fraction"],
            "rtl_alltoall_busbw_fraction_256k": a2a[k256]["busbw_fraction"],
            "rtl_alltoall_of_ring_bound": a2a[k64]["of_ring_bound"],
            "rtl_sendrecv_busbw_fraction": table["send_recv"][k64]["busbw_fraction"],
            "rtl_busbw_table": table, "rtl_engine_builds": builds}


#: Where the ``rtl_*`` engine-ring metrics come from.
RTL_ENGINE_SOURCE = (
    "RTL engine ring, default, 4 ranks, Verilator (tb.multicore.harness.EngineRingHarness: "
    "tb.multicore.rig.EngineRing's four collective engines with their SBUFs, link ports and "
    "delay lines; cocotb tb.multicore.tb_multicore_engine_ring); FP32, add, NCCL S per core, "
    "seed 0, one run per case; source at byte 0 of every partition, destination at the "
    "middle (other SBUF banks), of the source's free size (a flit one row write: all-reduce "
    "P rows to P, reduce-scatter P to P/n, all-gather P/n to P); cycles: the issue cycle to "
    "the last rank's done (as "
    "run_engines); busbw as NCCL over link_bits / 8 bytes a cycle; every rank's whole SBUF bit "
    "for bit equal to MultiCoreSim's. 256 KiB (source and destination 16 KiB a partition each) "
    "runs on default with sbuf_bytes_per_partition = 32768 (the table's "
    "sbuf_bytes_per_partition; the SBUF size is not a link setting, and 64 KiB takes the same "
    "cycles on both sizes), the rest on default; rtl_allgather_busbw_fraction and "
    "rtl_reducescatter_busbw_fraction at 64 KiB")


#: Where the permute engine's ``rtl_*`` metrics come from.
RTL_PERMUTE_SOURCE = (
    "RTL permute-engine ring, default, 4 ranks, Verilator (tb.multicore.harness."
    "EngineRingHarness with engine='permute': four rtl.collective.permute.PermuteEngine with "
    "their SBUFs, link ports and delay lines); FP32, NCCL S per core, seed 0, one run per "
    "case; source P rows at byte 0, destination P rows of the same free size at the middle "
    "of the partition (packed: 4 elements of 4 rows a flit); cycles: the issue cycle to the "
    "last rank's done; every rank's whole SBUF bit for bit equal to MultiCoreSim's. "
    "all-to-all: busbw = algbw (n-1)/n over link_bits / 8 bytes a cycle (one TX link a core), "
    "of_ring_bound that over 2/n (the busiest link of a unidirectional ring carries "
    "n(n-1)/2 blocks); send_recv d = 1: algbw over the same peak. 256 KiB on "
    "sbuf_bytes_per_partition = 32768; rtl_alltoall_busbw_fraction, "
    "rtl_alltoall_of_ring_bound and rtl_sendrecv_busbw_fraction at 64 KiB")


def rtl_engine_metrics(rtl):
    """The ``rtl_*`` engine-ring metrics on the default preset, 4 ranks (a default ring of
    other sizes too, ``rtl_busbw_table_r<n>``, for each ``n`` in ``NC_BENCH_RTL_ENGINE_RANKS``,
    e.g. ``2,8``); ``None`` each without ``rtl`` or with ``NC_BENCH_RTL_ENGINE=0``."""
    if not rtl or os.environ.get("NC_BENCH_RTL_ENGINE", "1") in ("", "0"):
        return {k: None for k in RTL_ENGINE_KEYS}
    out = rtl_engine_figures(DEFAULT)
    for n in os.environ.get("NC_BENCH_RTL_ENGINE_RANKS", "").replace(",", " ").split():
        out[f"rtl_busbw_table_r{int(n)}"], b = rtl_engine_table(DEFAULT, int(n))
        out["rtl_engine_builds"].update({f"r{int(n)} {k}": v for k, v in b.items()})
    return out


def run(cfg):
    one, two, rate = rtl_ring(cfg)
    rtl = os.environ.get("NC_BENCH_RTL", "1") not in ("", "0")
    rtl_ar, s2f = rtl_allreduce(SMALL) if rtl else ({}, None)
    ovl = rtl_overlap(SMALL) if rtl else {"gemm_slowdown_with_allreduce": None,
                                          "allreduce_slowdown_with_gemm": None}
    rtl_eng = rtl_engine_metrics(rtl)
    dp_cycles, dp_overlap, dp_bad = dp_step_figures(cfg)
    c4k, formula = allreduce_cycles_formula(cfg)

    def f(op, n, size, dtype="fp32", d=1):
        return round(message_estimate(op, n, size, dtype, cfg, d).fraction, 4)

    return {
        "allreduce_busbw_fraction_64k": f("all_reduce", 4, 64 << 10),
        "allreduce_busbw_fraction_256k": f("all_reduce", 4, 256 << 10),
        "allgather_busbw_fraction": f("all_gather", 4, 256 << 10),
        "allgather_busbw_fraction_64k": f("all_gather", 4, 64 << 10),
        "reducescatter_busbw_fraction": f("reduce_scatter", 4, 256 << 10),
        "reducescatter_busbw_fraction_64k": f("reduce_scatter", 4, 64 << 10),
        "alltoall_busbw_fraction": f("all_to_all", 4, 256 << 10),
        "alltoall_busbw_fraction_bidir": f("all_to_all", 4, 256 << 10, d=2),
        "allreduce_bf16_busbw_fraction_256k": f("all_reduce", 4, 256 << 10, "bf16"),
        "allreduce_4kib_cycles": c4k,
        "allreduce_4kib_formula": formula,
        "hop_latency_cycles": two - one - cfg.link_latency,
        "link_hop_cycles": two - one,
        "rtl_link_flits_per_cycle": rate,
        "sem_to_first_flit_cycles": s2f,
        "rtl_allreduce": rtl_ar,
        **rtl_eng,
        "dp_step_cycles": dp_cycles,
        "dp_step_overlap": dp_overlap,
        "dp_step_bit_mismatches": dp_bad,
        "link": {"link_bits": cfg.link_bits, "link_credits": cfg.link_credits,
                 "link_latency": cfg.link_latency, "peak_bytes_per_cycle": cfg.link_bits / 8},
        "busbw_fraction_table": busbw_table(cfg),
        **ovl,
        "sources": {
            **OVERLAP_SOURCES,
            "busbw_fraction_table": "golden model (golden.collective.perf.estimate), dtype "
                                    "fp32 unless the row says bf16; sizes are NCCL's S per "
                                    "core in bytes; 4 ranks for the scalar fractions",
            "allreduce_*/allgather_*/reducescatter_*/alltoall_*": "golden model, 4 ranks, "
                                                                  "256 KiB unless _64k",
            "allreduce_4kib_cycles": "golden model formula (allreduce_4kib_formula)",
            "hop_latency_cycles": "RTL link ring (amaranth.sim of tb.collective.rig.RingRig): "
                                  "wire in to wire out on a forwarding core = (2-hop arrival "
                                  "- 1-hop arrival) - link_latency",
            "link_hop_cycles": "RTL link ring: TX input to RX output of one more hop",
            "rtl_link_flits_per_cycle": "RTL link ring: 64 one-hop flits back to back",
            "dp_step_*": "golden multi-core simulator, 4 ranks, seed 0 (docs/collectives.md "
                         "§17); overlap: share of rank 0's tensor-engine work after the first "
                         "all-reduce starts that runs during it",
            "rtl_allreduce": "RTL MultiCore, small, 2 cores, whatever the bench's preset "
                             "(Verilator; FP32, bytes per core; "
                             "cycles: the cc instruction's issue to retire, slowest core; "
                             "busbw over link_bits / 8 of the small preset (32-bit "
                             "links, latency 4, 12 credits); golden_cycles "
                             "and golden_fraction: the golden model on the same config)",
            "rtl_allreduce_busbw_fraction_*/rtl_allgather_*/rtl_reducescatter_*/"
            "rtl_allreduce_4kib_cycles/rtl_busbw_table*/rtl_engine_builds":
                RTL_ENGINE_SOURCE,
            "rtl_alltoall_*/rtl_sendrecv_*/rtl_busbw_table all_to_all, send_recv":
                RTL_PERMUTE_SOURCE,
            "sem_to_first_flit_cycles": "RTL MultiCore, small, 2 cores: the all-reduce's issue "
                                        "(its semaphore wait satisfied, the activity trace) to "
                                        "the first cycle its core's ring TX valid is high; the "
                                        "largest over cores and sizes"},
    }


# ---- compute/collective overlap on the RTL MultiCore (docs/collectives.md §19) ---------------

def rtl_overlap(cfg, n=2, seed=0):
    """``{"gemm_slowdown_with_allreduce", "allreduce_slowdown_with_gemm", "overlap_cycles"}``
    and the same two slowdowns suffixed ``_shared_banks`` and ``_dram``, on the RTL MultiCore
    of ``n`` cores of ``cfg`` narrowed by :func:`tb.multicore.build.multicore_cfg`:
    :func:`tb.multicore.program.overlap_kernel` run three times (GEMM and all-reduce together,
    each alone) by :func:`tb.multicore.run_kernel.run_overlap` per variant of
    :data:`tb.multicore.run_kernel.OVERLAP_VARIANTS` (no suffix: ``sbuf``), every output bit
    for bit equal to golden. A slowdown is the half's cycles in the run with both over its
    cycles alone, minus 1 (the GEMM: its first instruction's start, the doorbell or ``x``'s
    preload done, to its last store done; the all-reduce: issue to retire; the slowest core).
    ``overlap_cycles``: ``{variant: {run: cycles}}``."""
    from tb.multicore.build import multicore_cfg, multicore_sim
    from tb.multicore.run_kernel import OVERLAP_VARIANTS, run_overlap
    from tb.runner import ROOT
    mc = multicore_cfg(cfg, n)
    sim = multicore_sim(mc)
    out, cycles = {}, {}
    for v, opts in OVERLAP_VARIANTS.items():
        runs = cycles[v] = run_overlap(mc, ROOT / "build" / "bench" / "cc_rtl" / "overlap" / v,
                                       seed=seed, sim=sim, **opts)
        sfx = "" if v == "sbuf" else f"_{v}"
        out[f"gemm_slowdown_with_allreduce{sfx}"] = round(
            runs["both"]["gemm"] / runs["gemm"]["gemm"] - 1, 4)
        out[f"allreduce_slowdown_with_gemm{sfx}"] = round(
            runs["both"]["allreduce"] / runs["allreduce"]["allreduce"] - 1, 4)
    return {**out, "overlap_cycles": cycles}


#: ``sources`` entries of :func:`rtl_overlap`'s metrics.
OVERLAP_SOURCES = {
    "gemm_slowdown_with_allreduce*, allreduce_slowdown_with_gemm*, overlap_cycles":
        "RTL MultiCore, small, 2 cores (Verilator), seed 0, "
        "tb.multicore.program.overlap_kernel: a GEMM from DRAM (AT 16x4, B 16x128 BF16, FP32 "
        "out) and an independent 2 KiB FP32 all-reduce on every core, run together and each "
        "alone, every output bit for bit equal to golden; GEMM cycles: its start (the "
        "doorbell, or the all-reduce source's preload done) to its last store done, "
        "all-reduce cycles: issue to retire, slowest core; slowdown = together / alone - 1. "
        "No suffix: the data-parallel case (the all-reduce's source preloaded into SBUF "
        "before both halves start, in the GEMM-alone run too; its result stored after the "
        "GEMM; its two buffers in SBUF banks 0 and 1, the GEMM's tiles in banks 2 and 3); "
        "_shared_banks: the same with every tile in the next SBUF bank with room (GEMM "
        "operands in the all-reduce's banks); _dram: the all-reduce's source loaded from "
        "DRAM and its result stored on the DMA beside the GEMM, tiles as _shared_banks"}
