# SPDX-License-Identifier: Apache-2.0
"""``make sim`` on the whole core: kernels (``tb/core/kernels.py``) run on the Verilator build
of the NeuronCore (``tb/core/tb_core_kernels.py``). Prints each kernel's cycles, instruction counts
and each engine's busy fraction, checks every output bit for bit (the cocotb test fails
otherwise), and writes an engine-activity timeline per kernel as a PNG under
``build/sim/``. ``WAVES=1`` builds with tracing and writes a VCD."""

from __future__ import annotations

import json
import os
from pathlib import Path

from rtl.config import preset_from_env
from rtl.core.neuroncore import ENGINES_BUILT
from tb.core.build import HIER_ABOVE_PES, core_sim, integration_cfg
from tb.runner import ROOT

__all__ = ["run_kernels", "timeline_png", "main"]

#: Kernels ``make sim`` runs, with their parameters.
SIM_KERNELS = [{"name": n} for n in ("mlp", "attention_head", "layer_norm", "sparse_mlp", "gemm")]
LANES = [*ENGINES_BUILT, "dma"]


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


def timeline_png(rec, path):
    """Engine-activity timeline of one kernel record: one row per engine, a light bar while its
    stream is active (instructions fetched, waiting or running), a tick at each retire; the
    DMA row is busy while some DMA engine moves data."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from rtl import isa
    from rtl.core.neuroncore import activity_layout
    lay = activity_layout(preset_from_env())
    bits = {e: lay["busy"][0] + isa.ENGINES.index(e) for e in ENGINES_BUILT}
    bits["dma"] = lay["dma"][0]
    tl, end = rec["timeline"], rec["cycles"]
    fig, ax = plt.subplots(figsize=(10, 0.5 + 0.45 * len(LANES)))
    for row, lane in enumerate(LANES):
        spans = [(c, nxt - c) for (c, v), (nxt, _) in zip(tl, tl[1:] + [(end, 0)])
                 if v >> bits[lane] & 1 and nxt > c]
        ax.broken_barh(spans, (row - 0.35, 0.7), color="lightsteelblue" if lane != "dma"
                       else "tab:orange")
        for c in rec.get("retires", {}).get(lane, ()):
            ax.vlines(c, row - 0.35, row + 0.35, color="tab:blue", linewidth=1)
    ax.set_yticks(range(len(LANES)), LANES)
    ax.set_xlim(0, max(end, 1))
    ax.set_xlabel("cycle")
    busy = ", ".join(f"{e} {rec['busy'][e] / max(1, rec['cycles']):.0%}" for e in LANES)
    ax.set_title(f"{rec['kernel']}: {rec['cycles']} cycles (stream active: {busy}); "
                 f"ticks: retires", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(cfg=None, kernels=None):
    cfg = cfg or preset_from_env()
    waves = os.environ.get("WAVES", "0") not in ("", "0")
    recs, sim = run_kernels(cfg, kernels or SIM_KERNELS, waves=waves)
    out = ROOT / "build" / "sim"
    print(f"\nWhole core ({cfg.name} preset narrowed to BF16 + FP8 E4M3 and 4:16 sparsity: "
          f"{integration_cfg(cfg, sparse=True).name}), "
          f"Verilator; every output checked bit for bit")
    print(f"{'kernel':<16}{'cycles':>9}  {'instructions':<28}stream active fraction "
          f"(Q_BUSY: fetched, waiting or running; dma: moving)")
    for r in recs:
        ins = " ".join(f"{e}:{n}" for e, n in r["instructions"].items() if n)
        busy = " ".join(f"{e} {r['busy'][e] / max(1, r['cycles']):.2f}" for e in LANES)
        print(f"{r['kernel']:<16}{r['cycles']:>9}  {ins:<28}{busy}")
        png = out / f"{r['kernel']}_{cfg.name}.png"
        timeline_png(r, png)
        print(f"{'':<16}timeline {png.relative_to(ROOT)}; outputs checked: {r['checked']}")
    if waves:
        for v in sorted(Path(sim.build_dir).glob("*.vcd")):
            print(f"waves: {v}")
    return recs


if __name__ == "__main__":
    main()
