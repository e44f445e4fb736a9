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
* **RTL engine ring, default, 4 ranks**: ``rtl_allreduce_busbw_fraction_64k``/``_256k``,
  ``rtl_allgather_busbw_fraction``, ``rtl_reducescatter_busbw_fraction`` (64 KiB),
  ``rtl_allreduce_4kib_cycles``: amaranth.sim of :class:`tb.multicore.rig.EngineRing` (four
  collective engines with their SBUFs and link ports, :func:`rtl_engine_case`), every rank's
  SBUF checked bit for bit against the multi-core golden simulator; run only with
  ``NC_BENCH_RTL_ENGINE=1`` (hours in amaranth.sim), ``None`` otherwise;
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


#: RTL engine ring runs: (metric, op, NCCL size S in bytes per core); FP32, 4 ranks.
RTL_ENGINE_RUNS = (("rtl_allreduce_4kib", "all_reduce", 4 << 10),
                   ("rtl_allreduce_64k", "all_reduce", 64 << 10),
                   ("rtl_allreduce_256k", "all_reduce", 256 << 10),
                   ("rtl_allgather_64k", "all_gather", 64 << 10),
                   ("rtl_reducescatter_64k", "reduce_scatter", 64 << 10))


def rtl_engine_case(cfg, op, size, seed=0):
    """``(cycles, busbw fraction)`` of one FP32 ``op`` of NCCL size ``size`` bytes per core on
    :class:`tb.multicore.rig.EngineRing` of ``cfg`` (amaranth.sim), every rank's whole SBUF
    checked bit for bit against :class:`golden.collective.multicore.MultiCoreSim`
    (``RuntimeError`` otherwise). The source is ``partitions`` rows; the destination the rows
    a flit's slots reach in one write (all-reduce: the source's shape; reduce-scatter: the
    chunk's rows; all-gather: ``n`` times the rows)."""
    from golden.asm import assemble
    from golden.collective.multicore import MultiCoreSim
    from tb.amsim import SimBench
    from tb.multicore.rig import EngineRing, run_engines
    n, P, SB = cfg.ring_size, cfg.partitions, cfg.sbuf_bytes_per_partition
    src_elems = size // 4 // (n if op == "all_gather" else 1)
    per = src_elems // P
    dparts = {"all_gather": P * n, "reduce_scatter": P // n}.get(op, P)
    if dparts > P:                       # all-gather: n times the row length instead
        dparts, dper = P, per * n
    else:
        dper = per
    dst = per * 4
    text = (f"{op} ap0=sbuf.fp32[0:{dparts}]@{dst:#x}{{1x{dper}}} "
            f"ap1=sbuf.fp32[0:{P}]@0x0{{1x{per}}}" + ("" if op == "all_gather" else " op=1"))
    rng = np.random.default_rng(seed)
    images = []
    for _ in range(n):
        img = np.zeros((P, SB), np.uint8)
        x = (rng.standard_normal((P, per)) * 3).astype(np.float32)
        img[:, :per * 4] = x.view(np.uint8).reshape(P, per * 4)
        images.append(img)
    g = MultiCoreSim(cfg, n, dram_bytes=4096)
    for r in range(n):
        g.cores[r].sbuf[...] = images[r]
    errs = g.run([{"cc": assemble(text)} for _ in range(n)])
    rig = EngineRing(cfg)
    st, _, imgs, cyc = run_engines(SimBench(rig), rig, [assemble(text)] * n, images,
                                   max_cycles=40 * size // cfg.link_bits + 20_000)
    if any(errs) or any(st):
        raise RuntimeError(f"{op} {size} B: errors golden {errs}, RTL {st}")
    for r in range(n):
        if not np.array_equal(imgs[r], g.cores[r].sbuf):
            raise RuntimeError(f"{op} {size} B: RTL rank {r} differs from golden")
    factor = {"all_reduce": 2 * (n - 1) / n}.get(op, (n - 1) / n)
    return cyc, round(size / cyc * factor / (cfg.link_bits / 8), 4)


def rtl_engine_figures(cfg, runs=RTL_ENGINE_RUNS):
    """The ``rtl_*`` metrics of :data:`RTL_ENGINE_RUNS` on a ring of 4 engines of ``cfg``."""
    c4 = cfg.replace(ring_size=4)
    out = {}
    for name, op, size in runs:
        out[name] = rtl_engine_case(c4, op, size)
    return {"rtl_allreduce_4kib_cycles": out["rtl_allreduce_4kib"][0],
            "rtl_allreduce_busbw_fraction_64k": out["rtl_allreduce_64k"][1],
            "rtl_allreduce_busbw_fraction_256k": out["rtl_allreduce_256k"][1],
            "rtl_allgather_busbw_fraction": out["rtl_allgather_64k"][1],
            "rtl_reducescatter_busbw_fraction": out["rtl_reducescatter_64k"][1],
            "rtl_engine_cycles": {k: v[0] for k, v in out.items()}}


#: Where the ``rtl_*`` engine-ring metrics come from.
RTL_ENGINE_SOURCE = ("RTL engine ring, default, 4 ranks, amaranth.sim "
                     "(tb.multicore.rig.EngineRing; FP32, NCCL S per core: all-reduce 4 KiB, "
                     "64 KiB, 256 KiB, all-gather and reduce-scatter 64 KiB; cycles issue to the "
                     "last status; every rank's SBUF bit for bit equal to MultiCoreSim's)")


def rtl_engine_metrics(rtl):
    """The ``rtl_*`` engine-ring metrics on the default preset; ``None`` each without ``rtl``
    or unless ``NC_BENCH_RTL_ENGINE=1``: amaranth.sim of four default engines runs about one
    to two cycles a second, so the 64 KiB and 256 KiB all-reduces (about 6,300 and 25,000
    cycles) take hours."""
    if not rtl or os.environ.get("NC_BENCH_RTL_ENGINE", "0") in ("", "0"):
        return {k: None for k in ("rtl_allreduce_4kib_cycles",
                                  "rtl_allreduce_busbw_fraction_64k",
                                  "rtl_allreduce_busbw_fraction_256k",
                                  "rtl_allgather_busbw_fraction",
                                  "rtl_reducescatter_busbw_fraction", "rtl_engine_cycles")}
    return rtl_engine_figures(DEFAULT)


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
            "rtl_allreduce_4kib_cycles/rtl_engine_cycles": RTL_ENGINE_SOURCE,
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
