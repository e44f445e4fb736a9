# SPDX-License-Identifier: Apache-2.0
"""``make sim`` on the whole core: kernels (``tb/core/kernels.py``) run on the Verilator build
of the NeuronCore (``tb/core/tb_core_kernels.py``). Prints each kernel's cycles, instruction counts
and each engine's executing and waiting fractions (from the ``activity`` trace,
:mod:`tb.core.timeline`), checks every output bit for bit (the cocotb test fails otherwise), and
writes a per-instruction timeline per kernel (PNG, SVG, HTML) under ``build/sim/``.
``WAVES=1`` builds with tracing and writes a VCD. ``make sim KERNEL=...`` runs a kernel file
instead (:mod:`tb.core.run_kernel`)."""

from __future__ import annotations

import json
import os
from pathlib import Path

from rtl.config import preset_from_env
from rtl.core.neuroncore import ENGINES_BUILT
from tb.core import timeline
from tb.core.build import HIER_ABOVE_PES, core_sim, integration_cfg
from tb.runner import ROOT

__all__ = ["run_kernels", "execution_fractions", "main"]

#: Kernels ``make sim`` runs, with their parameters.
SIM_KERNELS = [{"name": n} for n in ("mlp", "attention_head", "layer_norm", "sparse_mlp", "gemm")]


def run_kernels(cfg, kernels, *, waves=False, tag="sim"):
    """Run ``kernels`` ([{"name", ...params}]) on the core built for ``cfg`` (narrowed by
    :func:`~tb.core.build.integration_cfg` with the 4:16 sparse PE, so the sparse MLP runs on
    the tensor engine's sparse mode); returns ``(records, sim build)``."""
    icfg = integration_cfg(cfg, sparse=True)
    sim = core_sim(icfg, waves=waves, hier=icfg.pe_rows * icfg.pe_cols > HIER_ABOVE_PES)
    out = ROOT / "build" / "sim"
    out.mkdir(parents=True, exist_ok=True)
    metrics = out / f"core_{cfg.name}_{tag}.jsonl"
    metrics.unlink(missing_ok=True)
    sim.run("tb.core.tb_core_kernels", params={"kernels": kernels, "metrics": str(metrics)},
            tag=tag)
    recs = [json.loads(line) for line in metrics.read_text().splitlines() if line.strip()]
    return recs, sim


def execution_fractions(rec, cfg):
    """``(timeline, {engine: {"executing", "waiting"}})`` of a kernel record, from its
    ``activity`` trace (:func:`tb.core.timeline.rtl_timeline`, :func:`~tb.core.timeline.fractions`)."""
    from rtl.core.neuroncore import activity_layout
    from tb.core import timeline
    tl = timeline.rtl_timeline(rec["trace"], rec["cycles"], activity_layout(cfg), ENGINES_BUILT,
                               cfg.dma_engines, cfg.dma_queues)
    return tl, timeline.fractions(tl, rec["cycles"])


def main(cfg=None, kernels=None):
    cfg = cfg or preset_from_env()
    waves = os.environ.get("WAVES", "0") not in ("", "0")
    recs, sim = run_kernels(cfg, kernels or SIM_KERNELS, waves=waves)
    icfg = integration_cfg(cfg, sparse=True)
    out = ROOT / "build" / "sim"
    print(f"\nWhole core ({cfg.name} preset narrowed to BF16 + FP8 E4M3 and 4:16 sparsity: "
          f"{integration_cfg(cfg, sparse=True).name}), "
          f"Verilator; every output checked bit for bit")
    print(f"{'kernel':<16}{'cycles':>9}  {'instructions':<28}executing / waiting on a "
          f"semaphore (docs/core.md §6), dma: moving")
    for r in recs:
        ins = " ".join(f"{e}:{n}" for e, n in r["instructions"].items() if n)
        tl, frac = execution_fractions(r, icfg)
        busy = " ".join(f"{e} {frac[e]['executing']:.2f}/{frac[e]['waiting']:.2f}"
                        for e in ENGINES_BUILT)
        print(f"{r['kernel']:<16}{r['cycles']:>9}  {ins:<28}{busy} "
              f"dma {r['busy']['dma'] / max(1, r['cycles']):.2f}")
        png, _svg, _html = timeline.write_kernel_timeline(
            out / f"{r['kernel']}_{cfg.name}", [("RTL", tl, r["cycles"], lambda s, k: "")],
            title=f"{r['kernel']} on {icfg.name}")
        print(f"{'':<16}timeline {Path(png).relative_to(ROOT)} (.svg, .html); outputs "
              f"checked: {r['checked']}")
    if waves:
        for v in sorted(Path(sim.build_dir).glob("*.vcd")):
            print(f"waves: {v}")
    return recs


if __name__ == "__main__":
    main()
