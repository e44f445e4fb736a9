# SPDX-License-Identifier: Apache-2.0
"""Run a multi-core kernel on the golden multi-core simulator and on the RTL multi-core top.

``python -m tb.multicore.run_kernel [--config CONFIG] [--seed N]`` runs the data-parallel
training step (:mod:`golden.kernels.dp_step`, ``MULTI_KERNELS["dp_step"]``) on the
``ring_size`` cores of the config (default ``small:ring_size=4``; the cores narrowed like the
core's integration build, :func:`tb.multicore.build.multicore_cfg`), or from Python
``run_case(case)`` for a :class:`golden.kernels.dp_step.MultiKernelCase` and
``run_rtl(cfg, kps, name, out_dir)`` for any list of built rank programs.

1. every rank's program runs on :class:`golden.collective.multicore.MultiCoreSim` (outputs,
   cycle estimate, per-instruction timeline);
2. the multi-core top is built (:func:`tb.multicore.build.multicore_sim`, cached by
   Verilator) and the generic cocotb module ``tb/multicore/tb_multicore_kernel.py`` runs
   every core's DRAM image and queues at once, tracing every core's ``activity`` port and its
   ring TX valid;
3. every rank's outputs are compared bit for bit with the golden run's and with the case's
   expected codes (composed without any simulator); the report gives each core's cycles, the
   golden estimate, the overlap of the tensor engine with the first all-reduce, the cycles from
   the first collective's issue (its semaphore wait satisfied) to its first flit on the ring,
   and writes ``build/sim/<name>/timeline.{png,svg,html}`` (every core's engines, the cc engine
   among them, its DMA queues and its ring TX link's flits, on one cycle axis, then the golden
   estimate of rank 0).

Exit status of the command: 0 when everything matched, 1 otherwise.
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from tb.core.run_kernel import describer
from tb.runner import ROOT

__all__ = ["MultiKernelReport", "run_rtl", "run_case", "sim_config", "rtl_timeline", "sim_main", "sim_ranks", "SIM_RANKS", "tx_valid_names", "overlap",
           "sem_to_first_flit", "tx_bursts", "format_report", "main", "OVERLAP_RUNS",
           "OVERLAP_VARIANTS", "overlap_spans", "run_overlap"]


@dataclass
class MultiKernelReport:
    """What :func:`run_case` found; ``ok``: every rank's outputs equal the golden run's and the
    expected codes, no error on either side."""
    kernel: str
    config: str
    ranks: int
    rtl_cycles: list = field(default_factory=list)
    golden_cycles: int | None = None
    rtl_overlap: float | None = None
    golden_overlap: float | None = None
    sem_to_first_flit: list = field(default_factory=list)
    checked: dict = field(default_factory=dict)
    mismatches: list = field(default_factory=list)
    errors: list = field(default_factory=list)
    files: dict = field(default_factory=dict)
    seconds: dict = field(default_factory=dict)

    @property
    def ok(self):
        return not self.mismatches and not self.errors and bool(self.checked)


def tx_valid_names(sim):
    """The top-level signal names driving each core's ``ring_tx_valid`` port, read from the
    build's Verilog (``core<i>`` instances), so the cocotb module can trace the ring TX."""
    src = Path(sim.build_dir) / "src" / f"{sim.name}.v"
    text = src.read_text() if src.exists() else ""
    out = []
    for i in range(sim.cfg.ring_size):
        m = re.search(rf"\bcore{i} \((.*?)\);", text, re.S)
        p = m and re.search(r"\.ring_tx_valid\(\s*\\?([^\s)]+)\s*\)", m.group(1))
        out.append(p.group(1) if p else None)
    return out


def run_rtl(cfg, kps, name, out_dir, *, estimate=0, sim=None):
    """Build (or reuse) the multi-core top of ``cfg`` and run the rank programs ``kps`` (one
    :class:`golden.kernel.KernelProgram` per core) on it; returns ``(record, sim build)``.
    ``record["cores"][i]``: ``cycles``, ``start_cycle`` (the doorbell), ``trace``,
    ``tx_valid`` (changes of the ring TX valid, cycles from the doorbell), ``error`` and
    ``outputs`` ({name: codes}). ``sim``: the build to reuse (:func:`multicore_sim` of
    ``cfg``; elaborating the top again costs most of a minute)."""
    from tb.multicore.build import multicore_sim
    if len(kps) != cfg.ring_size:
        raise ValueError(f"run_rtl kps must hold one program per core ({cfg.ring_size}), "
                         f"not {len(kps)}")
    sim = sim or multicore_sim(cfg)
    out_dir = Path(out_dir).resolve()        # the simulator runs in its build folder
    out_dir.mkdir(parents=True, exist_ok=True)
    names = tx_valid_names(sim)
    cores = []
    for r, kp in enumerate(kps):
        queues = kp.place_queues()      # writes the queues into the image: first
        image = out_dir / f"image{r}.bin"
        image.write_bytes(bytes(kp.dram))
        cores.append({"image": str(image), "dram_base": kp.dram_base,
                      "dram_bytes": len(kp.dram), "queues": queues,
                      "outputs": {n: (t.addr, t.shape[0] * t.pitch)
                                  for n, t in kp.outputs.items()},
                      "tx_valid": names[r]})
    rec_path = out_dir / "rtl.json"
    rec_path.unlink(missing_ok=True)
    params = {"name": name, "cores": cores, "out": str(rec_path),
              "max_cycles": 4 * int(estimate)}
    (out_dir / "params.json").write_text(json.dumps(params, indent=1))
    sim.run("tb.multicore.tb_multicore_kernel", params=params, tag=f"kernel_{name}")
    rec = json.loads(rec_path.read_text())
    for kp, q, c in zip(kps, cores, rec["cores"]):
        img = bytearray(len(kp.dram))
        for n, (addr, _nb) in q["outputs"].items():
            raw = bytes.fromhex(c["outputs"].get(n, ""))
            img[addr - kp.dram_base:addr - kp.dram_base + len(raw)] = raw
        c["outputs"] = {n: kp.outputs[n].read(img, kp.dram_base) for n in c["outputs"]}
    return rec, sim


def rtl_timeline(cfg, core):
    """:func:`tb.core.timeline.rtl_timeline` of one core's record (:func:`run_rtl`)."""
    from rtl.core.neuroncore import ENGINES_BUILT, activity_layout
    from tb.core import timeline
    return timeline.rtl_timeline(core["trace"], core["cycles"] or 0, activity_layout(cfg),
                                 ENGINES_BUILT, cfg.dma_engines, cfg.dma_queues)


def overlap(tl, k=0):
    """Of the tensor engine's execution after the ``k``-th collective issues, the fraction
    that runs while that collective executes (``None`` without it or without such work);
    ``tl``: :func:`tb.core.timeline.rtl_timeline` of one core."""
    cc = tl["engines"].get("cc", {}).get("exec", [])
    if len(cc) <= k:
        return None
    a, b, _ = cc[k]
    pe = [(s, d) for s, d, _ in tl["engines"].get("pe", {}).get("exec", [])]
    inside = sum(max(0, min(b, d) - max(a, s)) for s, d in pe)
    after = sum(max(0, d - max(a, s)) for s, d in pe)
    return inside / after if after else None


def sem_to_first_flit(tl, tx, k=0):
    """Cycles from the ``k``-th collective's issue (the cc engine's ``issued`` toggle: its
    semaphore wait satisfied) to the first cycle the core's ring TX valid is high at or after
    it (``tx``: ``(cycle, value)`` changes, cycles from the doorbell); ``None`` when either is
    missing."""
    cc = tl["engines"].get("cc", {}).get("exec", [])
    if len(cc) <= k or tx is None:
        return None
    issue = cc[k][0]
    level = 0
    for cyc, v in tx:
        if cyc >= issue and v:
            return cyc - issue
        level = v
    return 0 if level else None


def tx_bursts(tx, end):
    """``[(start, done, k)]``: the runs of cycles the ring TX valid is high (``tx``: its
    ``(cycle, value)`` changes), the timeline's ``ring tx`` row (one flit a cycle in a run)."""
    out, start = [], None
    for cyc, v in tx:
        if v and start is None:
            start = cyc
        elif not v and start is not None:
            out.append((start, cyc, len(out)))
            start = None
    if start is not None:
        out.append((start, end, len(out)))
    return out


#: The three runs of :func:`run_overlap`: ``{name: (gemm, allreduce)}``.
OVERLAP_RUNS = {"both": (True, True), "gemm": (True, False), "allreduce": (False, True)}


def overlap_spans(cfg, core, *, preload=False, tl=None):
    """``(gemm cycles, all-reduce cycles)`` of one core's record (:func:`run_rtl`) of
    :func:`tb.multicore.program.overlap_kernel`: the doorbell (with ``preload``: the first
    completion on the last DMA queue, ``x``'s preload) to the last completion on the last DMA
    queue (``C``'s stores, alone there), and the all-reduce's issue to its retire (the ``cc``
    engine's first instruction); ``None`` for a half the run does not have. ``tl``: the
    core's timeline instead (:func:`tb.core.timeline.golden_timeline` of a golden run)."""
    tl = rtl_timeline(cfg, core) if tl is None else tl
    g = cfg.dma_engines * cfg.dma_queues - 1
    ends = sorted(b for _, b, _ in tl["dma"].get(f"dma{g // cfg.dma_queues}.q{g % cfg.dma_queues}",
                                                 []))
    start = ends.pop(0) if preload and ends else 0
    cc = tl["engines"].get("cc", {}).get("exec", [])
    return (ends[-1] - start if ends else None,
            cc[0][1] - cc[0][0] if cc else None)


#: The variants of :func:`tb.multicore.program.overlap_kernel` the bench measures, ``{name:
#: kernel options}`` (docs/collectives.md §19). ``sbuf``: the data-parallel case, the
#: all-reduce's source already in SBUF when both halves start, its result stored after the
#: GEMM, its two buffers in SBUF banks the GEMM's tiles do not use; ``shared_banks``: the same
#: with every tile in the next bank with room (the GEMM's operands land in the all-reduce's
#: banks); ``dram``: the all-reduce's load and store on the DMA beside the GEMM's, every tile
#: in the next bank with room.
OVERLAP_VARIANTS = {"sbuf": {"preload": True, "late_store": True, "own_banks": True},
                    "shared_banks": {"preload": True, "late_store": True},
                    "dram": {}}


def run_overlap(cfg, out_dir, *, seed=0, sim=None, runs=OVERLAP_RUNS, **options):
    """Run :func:`tb.multicore.program.overlap_kernel` of ``cfg.ring_size`` cores on the golden
    multi-core simulator and the RTL top, once per entry of ``runs``; every core's outputs
    must equal golden's bit for bit (``AssertionError`` naming the run, core and output
    otherwise); ``options``: the kernel's (``preload``, ``late_store``, ``own_banks``; a
    value of :data:`OVERLAP_VARIANTS`). Returns ``{run:
    {"gemm": cycles, "allreduce": cycles, "golden": cycles, "golden_gemm": cycles,
    "golden_allreduce": cycles}}``: the slowest core's :func:`overlap_spans` on the RTL and
    on the golden estimate, and the golden run's last completion."""
    import numpy as np

    from golden.kernel.multi import run_multi
    from tb.multicore.build import multicore_sim
    from tb.core import timeline
    from tb.multicore.program import overlap_kernel
    n = cfg.ring_size
    sim = sim or multicore_sim(cfg)
    out = {}
    for name, (gemm, ar) in runs.items():
        kps = overlap_kernel(cfg, n, gemm=gemm, allreduce=ar, seed=seed, **options).build()
        g = run_multi((cfg, kps))
        gspans = [overlap_spans(cfg, None, preload=options.get("preload", False),
                                tl=timeline.golden_timeline(c.timeline)) for c in g.sim.cores]
        assert not any(g.errors), f"overlap {name}: golden errors {g.errors}"
        rec, _ = run_rtl(cfg, kps, f"overlap_{name}", Path(out_dir) / name,
                         estimate=max(g.cycles), sim=sim)
        spans = []
        for r, c in enumerate(rec["cores"]):
            assert c["error"] is None, f"overlap {name} core {r}: error {c['error']}"
            for o, want in g.outputs[r].items():
                assert np.array_equal(c["outputs"][o], want), (
                    f"overlap {name} core {r}: {o} differs from golden (seed {seed})")
            spans.append(overlap_spans(cfg, c, preload=options.get("preload", False)))
        out[name] = {"gemm": _slowest(spans, 0), "allreduce": _slowest(spans, 1),
                     "golden": max(g.cycles), "golden_gemm": _slowest(gspans, 0),
                     "golden_allreduce": _slowest(gspans, 1)}
    return out


def _slowest(spans, i):
    vals = [s[i] for s in spans if s[i] is not None]
    return max(vals) if vals else None


def run_case(case, *, out_dir=None, quiet=False):
    """Run a :class:`golden.kernels.dp_step.MultiKernelCase` on the golden multi-core
    simulator and the RTL multi-core top (the case's config, ``ring_size == case.ranks``);
    print the report (unless ``quiet``) and return it (:class:`MultiKernelReport`)."""
    import numpy as np
    from golden.kernels.dp_step import run_golden_multi
    from rtl.core.neuroncore import ENGINES_BUILT
    from tb.core import timeline
    cfg = case.cfg
    if cfg.ring_size != case.ranks:
        raise ValueError(f"case {case.name!r} has {case.ranks} ranks, its config "
                         f"{cfg.name} ring_size {cfg.ring_size}")
    out_dir = Path(out_dir).resolve() if out_dir else ROOT / "build" / "sim" / case.name
    rep = MultiKernelReport(kernel=case.name, config=cfg.name, ranks=case.ranks)
    t0 = time.monotonic()
    g = run_golden_multi(case)
    t1 = time.monotonic()
    rep.golden_cycles = g["cycles"]
    rep.golden_overlap = None if g["overlap"] is None else round(g["overlap"], 4)
    rep.errors += [f"golden rank {r}: {e}" for r, e in enumerate(g["errors"]) if e]
    rec, _sim = run_rtl(cfg, case.kps, case.name, out_dir, estimate=g["cycles"])
    t2 = time.monotonic()
    from tb.core.run_kernel import rtl_error_text
    outs = []
    for r, (kp, c) in enumerate(zip(case.kps, rec["cores"])):
        rep.rtl_cycles.append(c["cycles"])
        if c["error"]:
            rep.errors.append(f"RTL core {r}: {rtl_error_text(kp, c['error'])}")
        outs.append(c["outputs"])
    if not rep.errors:
        gout = g["run"].outputs
        for r in range(case.ranks):
            for n, want in gout[r].items():
                got = np.asarray(outs[r].get(n), np.uint32)
                bad = int(np.count_nonzero(got != np.asarray(want, np.uint32)))
                if bad:
                    rep.mismatches.append(f"core {r} output {n}: {bad} element(s) differ "
                                          f"from the golden run")
                rep.checked[f"{r}:{n}"] = int(got.size)
        for (r, n), (bad, q) in case.check(outs).items():
            if bad:
                rep.mismatches.append(f"core {r} output {n}: {bad} element(s) differ from "
                                      f"the expected codes (worst {q:.3g} of the bound)")
    # one cycle axis for every core: from the first doorbell
    origin = min(c["start_cycle"] for c in rec["cores"])
    panels, tls = [], []
    for r, c in enumerate(rec["cores"]):
        shift = c["start_cycle"] - origin
        shifted = dict(c, trace=[(cy + shift, v) for cy, v in c["trace"]],
                       cycles=(c["cycles"] or 0) + shift)
        tl = rtl_timeline(cfg, shifted)
        tls.append(tl)
        panels.append((f"RTL core {r}", tl, shifted["cycles"], describer(case.kps[r])))
        tx = c.get("tx_valid")
        if tx is not None:
            tx = [(cy + shift, v) for cy, v in tx]
        rep.sem_to_first_flit.append(sem_to_first_flit(tl, tx))
        if tx:
            tl = dict(tl, dma={**tl["dma"], "ring tx": tx_bursts(tx, shifted["cycles"])})
            panels[-1] = panels[-1][:1] + (tl,) + panels[-1][2:]
    rep.rtl_overlap = None if overlap(tls[0]) is None else round(overlap(tls[0]), 4)
    gtl = timeline.golden_timeline(g["run"].sim.cores[0].timeline)
    panels.append(("golden estimate, rank 0", gtl, g["cycles"], describer(case.kps[0])))
    png, svg, html = timeline.write_kernel_timeline(
        out_dir / "timeline", panels,
        title=f"{case.name} on {case.ranks} x {cfg.name} (engines {', '.join(ENGINES_BUILT)})")
    rep.files = {"png": png, "svg": svg, "html": html}
    rep.seconds = {"golden": round(t1 - t0, 2), "rtl": round(t2 - t1, 2),
                   "sim_wall": round(rec.get("wall_seconds", 0.0), 2)}
    (out_dir / "report.json").write_text(json.dumps(asdict(rep), indent=1, default=str))
    if not quiet:
        print(format_report(rep))
    return rep


def format_report(rep):
    """The report as text (what the command prints)."""
    lines = [f"multi-core kernel {rep.kernel} on {rep.ranks} x {rep.config} (RTL MultiCore, "
             f"Verilator): cycles per core {rep.rtl_cycles}, golden estimate "
             f"{rep.golden_cycles}"]
    if rep.rtl_cycles and rep.golden_cycles and all(rep.rtl_cycles):
        worst = max(rep.rtl_cycles)
        lines[0] += f" ({(rep.golden_cycles - worst) / worst:+.1%} of the slowest core)"
    ov = ("none (no tensor-engine work after the first all-reduce issues)"
          if rep.rtl_overlap is None else f"{rep.rtl_overlap:.0%}")
    gov = "none" if rep.golden_overlap is None else f"{rep.golden_overlap:.0%}"
    lines.append(f"overlap (core 0's tensor-engine work after the first all-reduce issues that "
                 f"runs during it): RTL {ov}, golden {gov}")
    lines.append(f"first all-reduce, issue (semaphore wait satisfied) -> first flit on the "
                 f"ring TX, per core: {rep.sem_to_first_flit} cycles")
    for e in rep.errors:
        lines.append(f"ERROR {e}")
    for m in rep.mismatches:
        lines.append(f"MISMATCH {m}")
    if rep.checked and not rep.mismatches and not rep.errors:
        lines.append(f"every core's outputs bit for bit equal to the golden run and to the "
                     f"expected codes: {', '.join(f'{k} ({v})' for k, v in rep.checked.items())}")
    if rep.seconds:
        lines.append(f"golden {rep.seconds['golden']:.1f} s, RTL build + run "
                     f"{rep.seconds['rtl']:.1f} s ({rep.seconds['sim_wall']:.1f} s simulating)")
    for k, v in rep.files.items():
        lines.append(f"{k}: {Path(v).relative_to(ROOT) if Path(v).is_relative_to(ROOT) else v}")
    lines.append("OK" if rep.ok else "FAILED")
    return "\n".join(lines)


def sim_config(text):
    """The multi-core top's config of ``text`` (``rtl.config.parse_config``), narrowed by
    :func:`tb.multicore.build.multicore_cfg`; a ``ring_size`` override is applied by
    ``multicore_cfg`` (so ``small:ring_size=4`` shares the build of the multi-core tests)."""
    from rtl.config import parse_config
    from tb.multicore.build import multicore_cfg
    m = re.fullmatch(r"(.*?)[:,]ring_size=(\d+)", text.strip())
    if m and m.group(1) and "=" not in m.group(1).split(":")[0]:
        return multicore_cfg(parse_config(m.group(1)), int(m.group(2)))
    cfg = parse_config(text)
    return multicore_cfg(cfg, cfg.ring_size)


#: Cores of ``make sim MULTICORE=1``'s multi-core kernel (``MULTICORE=<n>``, n >= 2: n cores).
SIM_RANKS = 4


def sim_ranks(value):
    """Cores of the ``MULTICORE`` setting: ``0`` (or empty) none, ``1`` :data:`SIM_RANKS`,
    else that many (2, 4 or 8)."""
    text = (value or "0").strip()
    if not text.isdigit() or int(text) not in (0, 1, 2, 4, 8):
        raise ValueError(f"MULTICORE must be 0, 1 or a ring size in (2, 4, 8), not {value!r}")
    n = int(text)
    return SIM_RANKS if n == 1 else n


def sim_main(cfg=None, ranks=None):
    """``make sim``'s multi-core kernel: the data-parallel step on ``ranks`` (default from
    ``$MULTICORE``, :func:`sim_ranks`: none unless set, since the Verilator build of the
    multi-core top alone would take ``make sim`` past its 10 minutes) cores of ``cfg``
    (default: the ``small`` preset, whatever ``make sim``'s ``CONFIG``) narrowed by
    :func:`tb.multicore.build.multicore_cfg`; prints the report and returns it (``None`` when
    skipped). ``RuntimeError`` unless every output matched."""
    import os
    from golden.kernels.dp_step import dp_step_case
    from rtl.config import SMALL
    from tb.multicore.build import multicore_cfg
    if ranks is None:
        ranks = sim_ranks(os.environ.get("MULTICORE"))
    if not ranks:
        print("\nMulti-core kernel (the data-parallel step on 4 RTL cores): "
              "make sim MULTICORE=1")
        return None
    mc = multicore_cfg(cfg or SMALL, ranks)
    print(f"\nMulti-core kernel: the data-parallel step (golden/kernels/dp_step.py) on "
          f"{ranks} cores of {mc.name}, Verilator")
    rep = run_case(dp_step_case(mc, seed=0, ranks=ranks))
    if not rep.ok:
        raise RuntimeError(f"the multi-core kernel failed: {rep.errors or rep.mismatches}")
    return rep


def main(argv=None):
    """The command line (module docstring); returns the exit status."""
    import argparse
    from golden.kernels.dp_step import dp_step_case
    ap = argparse.ArgumentParser(prog="python -m tb.multicore.run_kernel",
                                 description="The data-parallel step on the RTL multi-core top "
                                             "and the golden multi-core simulator.")
    ap.add_argument("--config", default="small:ring_size=4",
                    help="config with its ring_size (default small:ring_size=4)")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args(argv)
    cfg = sim_config(a.config)
    rep = run_case(dp_step_case(cfg, seed=a.seed, ranks=cfg.ring_size))
    return 0 if rep.ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
