# SPDX-License-Identifier: Apache-2.0
"""The whole-core area report: every engine and memory of the :class:`NeuronCore` top.

The core is not synthesized in one piece (at the default preset that would take far longer than
``make synth`` may). Each part of the top is synthesized once, with the parameters the top gives
it (:data:`PARTS`): engines that repeat a leaf (the PEs, the vector lane ALUs, the scalar
function units) instantiate it by name, so yosys maps the leaf once and multiplies it by its
instance count; parts the top instantiates several times (the DMA engines, the sequencers) are
synthesized once and multiplied by their count; the top's own logic (the glue) is synthesized with
every part a blackbox. Each row says which: ``synthesized`` or ``estimate (leaf x count)``.

Memories (the SBUF banks, the PSUM banks, the scalar engine's tables and the FIFOs that yosys keeps
as memories) are counted in bits and costed as SRAM macros at
:data:`synth.flow.SRAM_UM2_PER_BIT` um^2 per bit (an OpenRAM sky130 macro, periphery included);
the logic is the sky130 standard-cell area of :mod:`synth.yosys`. A row's area is logic + macros.

The estimate is checked by synthesizing the whole core in one flattened run (``--flat``; small
preset, minutes): ``estimate_error`` = |sum of the rows - flat| / flat.

The figures (``build/synth/<config>/core_area.json``) are ``core_um2``, ``<row>_um2`` per row,
``sram_bits``, ``logic_um2``, ``sram_um2`` and ``estimate_error`` when a flat run exists;
``scalar_lane_um2`` (one function unit, logic + its table macros) and
``scalar_table_bits_per_lane``.
"""

from __future__ import annotations

import json
from pathlib import Path

from .core_parts import FLAT, PARTS, TOP_PARTS, core_design, engines, top_part
from .flow import SRAM_UM2_PER_BIT, Job

__all__ = ["PARTS", "ROWS", "TOP_PARTS", "FLAT", "core_design", "core_jobs", "core_table",
           "write_core_report", "top_part"]

_EST = "estimate (leaf × count)"
_SYN = "synthesized"
_HIER = "synthesized (leaf once × count, hierarchy kept)"

#: The table: ``(key, label, part, subtree, how)``; ``subtree`` picks a submodule of the part's
#: result by the end of its name (``"-"`` prefix: the part minus those subtrees).
ROWS = (
    ("tensor_array", "tensor engine: PE array (PE × rows × cols + skew)", "tensor",
     ".engine.array", _HIER),
    ("psum", "PSUM: banks (SRAM macros) + accumulate adders + ports", "tensor", ".engine.psum",
     _HIER),
    ("tensor_ctl", "tensor engine: control, SBUF feeds (2 AP readers), queues", "tensor",
     "-.engine.array,.engine.psum", _SYN),
    ("vector", "vector engine (lane ALUs × P, AP readers/writers, widen/convert)", "vector",
     None, _HIER),
    ("scalar", "scalar engine (function units × P, tables, AP units, widen/convert)", "scalar",
     None, _HIER),
    ("dma", "DMA engines (queues, check, walkers, AXI master, element path)", "dma", None, _EST),
    ("sbuf", "SBUF: banks (SRAM macros) + bank arbiters and port muxes", "sbuf", None, _SYN),
    ("sequencers", "sequencers ({engines})", "sequencer", None, _EST),
    ("semaphores", "semaphore file", "semaphores", None, _SYN),
    ("csr", "host registers (CSR)", "csr", None, _SYN),
    ("interconnect", "interconnect: AXI4 mux + PSUM row-port muxes", "axi_mux,psum_mux", None,
     _SYN),
    ("collective", "collective engine (ring schedule, cursors, FP32 reduce, widen/round)",
     "cc", None, _SYN),
    ("link_ports", "ring link ports: TX (credits, CRC) + RX (VC FIFOs, checks)", "link", None,
     _SYN),
    ("decoders", "instruction decoders (tensor, vector, scalar, cc) + sync engine",
     "decoders,sync", None, _SYN),
    ("glue", "top-level glue (soft reset, error select, activity)", "glue", None, _SYN),
)
#: Rows outside the NeuronCore top (not in ``core_um2``; none today: the link ports are in it).
EXTRA_ROWS = ()


def core_jobs(cfg, *, flat=False):
    """The jobs of the whole-core report of ``cfg`` (ASIC figures only)."""
    jobs = []
    for key, p in PARTS.items():
        if p.count(cfg) == 0:
            continue
        for v in (p.block.variants(cfg) if p.block.variants else (None,)):
            jobs.append(Job(p.block, v, cfg, fmax=False, ecp5=False,
                            extra={"core_part": key, "format_cfg": cfg.name}))
    if flat:
        jobs.append(Job(FLAT, None, cfg, fmax=False, ecp5=False,
                        extra={"core_part": "flat", "format_cfg": cfg.name}))
    # the big engines first, so that the two workers finish together
    big = ("flat", "tensor", "scalar", "vector", "sbuf", "glue", "dma")
    jobs.sort(key=lambda j: big.index(j.extra["core_part"]) if j.extra["core_part"] in big
              else len(big))
    return jobs


def _fig(r):
    return {"logic_um2": float(r["um2_sky130"]), "sram_bits": int(r["memory_bits"] or 0),
            "cells": int(r["cells"]), "flip_flops": int(r["flip_flops"])}


def _tree(res, suffix):
    """Figures of the submodule of ``res`` whose name ends with ``suffix`` (with its tree)."""
    hits = [(n, m) for n, m in res["modules"].items() if n.endswith(suffix)]
    if len(hits) != 1:
        raise ValueError(f"{res['row']}: {len(hits)} modules end with {suffix!r}, not 1: "
                         f"{sorted(n for n, _ in hits)[:5]}")
    n, m = hits[0]
    t = m["tree"]
    return {"logic_um2": float(t["um2_sky130"]), "sram_bits": int(t.get("memory_bits", 0)),
            "cells": int(t["cells"]), "flip_flops": int(t["flip_flops"])}, m["count"]


def _add(a, b, k=1):
    return {x: a[x] + k * b[x] for x in a}


_ZERO = {"logic_um2": 0.0, "sram_bits": 0, "cells": 0, "flip_flops": 0}


def core_table(cfg, results):
    """``(rows, summary)`` of the whole-core report from the results of :func:`core_jobs`."""
    by_part = {}
    for r in results:
        if "error" in r:
            raise RuntimeError(f"core part {r['row']} failed: {r['error']}")
        by_part.setdefault(r["core_part"], []).append(r)
    rows = []
    for table, in_core in ((ROWS, True), (EXTRA_ROWS, False)):
        for key, label, parts, sub, how in table:
            fig, counts = dict(_ZERO), []
            for pk in parts.split(","):
                n = PARTS[pk].count(cfg)
                if n == 0 or pk not in by_part:
                    continue
                for r in by_part[pk]:
                    if sub is None:
                        f = _fig(r)
                    elif sub.startswith("-"):
                        f = _fig(r)
                        for s in sub[1:].split(","):
                            f = _add(f, _tree(r, s)[0], -1)
                    else:
                        f = _tree(r, sub)[0]
                    fig = _add(fig, f, n)
                counts.append(n)
            if not counts:
                continue
            sram = fig["sram_bits"] * SRAM_UM2_PER_BIT
            rows.append({"key": key, "label": label.format(engines=", ".join(engines())),
                         "how": how, "count": max(counts),
                         "in_core": in_core, **fig, "sram_um2": sram,
                         "um2": fig["logic_um2"] + sram})
    core = [r for r in rows if r["in_core"]]
    total = sum(r["um2"] for r in core)
    for r in rows:
        r["share"] = r["um2"] / total if total else 0.0
    s = {"config": cfg.name, "core_um2": total,
         "logic_um2": sum(r["logic_um2"] for r in core),
         "sram_bits": sum(r["sram_bits"] for r in core),
         "sram_um2": sum(r["sram_um2"] for r in core),
         "cells": sum(r["cells"] for r in core),
         "sram_um2_per_bit": SRAM_UM2_PER_BIT,
         "sbuf_bits_config": cfg.sbuf_bits, "psum_bits_config": cfg.psum_bits,
         **{f"{r['key']}_um2": r["um2"] for r in rows}}
    sc = by_part.get("scalar")
    if sc:
        from rtl.scalar.engine import fu_module_name
        lane = sc[0]["modules"].get(fu_module_name(cfg))
        if lane:
            t = lane["tree"]
            s["scalar_table_bits_per_lane"] = int(t.get("memory_bits", 0))
            s["scalar_lane_logic_um2"] = float(t["um2_sky130"])
            s["scalar_lane_um2"] = float(t["um2_sky130"]) + s["scalar_table_bits_per_lane"] \
                * SRAM_UM2_PER_BIT
    flat = by_part.get("flat")
    if flat:
        f = _fig(flat[0])
        flat_um2 = f["logic_um2"] + f["sram_bits"] * SRAM_UM2_PER_BIT
        s.update({"flat_um2": flat_um2, "flat_logic_um2": f["logic_um2"],
                  "flat_sram_bits": f["sram_bits"],
                  "estimate_error": abs(total - flat_um2) / flat_um2,
                  "estimate_error_logic": abs(s["logic_um2"] - f["logic_um2"]) / f["logic_um2"]})
    return rows, s


#: Largest array synthesized as part of the tensor engine; above it the core is estimated from
#: two reference configs (:func:`scaled_refs`).
DIRECT_MAX = 16
#: Partition counts of the two reference configs of a scaled estimate.
REF_PARTITIONS = (8, 16)
#: SBUF bytes per partition of the reference configs (the SBUF's bits are then set from the
#: target config: only its address width is the reference's).
REF_SBUF_BYTES = 16 * 1024


def needs_scaling(cfg):
    """True when the core is too big to synthesize part by part (array beyond 16 x 16)."""
    return max(cfg.pe_rows, cfg.pe_cols) > DIRECT_MAX


def scaled_refs(cfg):
    """The two reference configs of ``cfg``: P = 8 and 16 partitions (square arrays), SBUF
    16 KiB per partition, every other field ``cfg``'s; a reference equal to a preset is that
    preset (so its results are shared with ``make synth CONFIG=<preset>``)."""
    from rtl.config import PRESETS
    refs = []
    for n in REF_PARTITIONS:
        r = cfg.replace(name=f"{cfg.name}__ref{n}", partitions=n, pe_rows=n,
                        pe_cols=min(cfg.pe_cols, n),
                        sbuf_bytes_per_partition=min(cfg.sbuf_bytes_per_partition,
                                                     REF_SBUF_BYTES),
                        sbuf_banks=min(cfg.sbuf_banks, 4))
        refs.append(_canonical(r, PRESETS))
    return refs


def _canonical(cfg, presets):
    """``cfg`` named as ``CONFIG=<preset>:<fields>`` would name it (the closest preset), so that
    a reference config shares its results with a run of that ``CONFIG``."""
    import dataclasses
    from rtl.config import parse_config
    fields = [f.name for f in dataclasses.fields(cfg) if f.name != "name"]

    def diff(p):
        return {f: getattr(cfg, f) for f in fields if getattr(cfg, f) != getattr(p, f)}

    def spell(v):
        if isinstance(v, tuple):
            return "+".join(v)
        return str(v).lower() if isinstance(v, bool) or v is None else str(v)
    base = min(presets.values(), key=lambda p: len(diff(p)))
    d = diff(base)
    c = parse_config(base.name + (":" + ",".join(f"{k}={spell(v)}" for k, v in d.items())
                                  if d else ""))
    return c if c.replace(name=cfg.name) == cfg else cfg


def _pe_um2(cfg, results):
    from rtl.tensor.array import pe_module_name
    r = next(r for r in results if r["core_part"] == "tensor")
    m = r["modules"][pe_module_name(cfg)]
    return float(m["tree"]["um2_sky130"]), int(m["tree"].get("memory_bits", 0))


def scaled_table(cfg, refs, ref_results):
    """``(rows, summary)`` of ``cfg`` from the part results of its two reference configs.

    Every row is fitted linearly in the partition count P through the two references
    (``a + b P``: per-partition datapaths, lanes, DMA engines = P / 8) and evaluated at
    ``cfg.partitions``, except the PE array: ``rows x cols x PE + edge``, the PE from the
    references' hierarchy and the edge (skew registers) fitted as ``a N + b N^2``. The SBUF's
    and PSUM's memory bits are the config's."""
    import numpy as np
    tabs = [core_table(r, res) for r, res in zip(refs, ref_results)]
    ps = [r.partitions for r in refs]
    P = cfg.partitions
    how_p = f"estimate (linear in P from P = {ps[0]}, {ps[1]})"
    rows = []
    for i, r0 in enumerate(tabs[0][0]):
        r1 = tabs[1][0][i]
        row = {**r0, "how": how_p, "count": None}
        for k in ("logic_um2", "sram_bits", "cells", "flip_flops"):
            y0, y1 = r0[k], r1[k]
            v = y0 + (y1 - y0) * (P - ps[0]) / (ps[1] - ps[0])
            row[k] = round(v) if k != "logic_um2" else v
        if r0["key"] == "tensor_array":
            pes = [_pe_um2(c, res) for c, res in zip(refs, ref_results)]
            ns = np.array([c.pe_rows for c in refs], float)
            edge = np.array([t[0][i]["logic_um2"] - c.pe_rows * c.pe_cols * pe[0]
                             for t, c, pe in zip(tabs, refs, pes)])
            ab = np.linalg.solve(np.array([ns, ns ** 2]).T, edge)
            # the edge of a rows x cols array: registers along both edges (a (R + C) / 2) and
            # the skew / de-skew triangles (b (R² + C²) / 2); a N + b N² when square
            r, c = cfg.pe_rows, cfg.pe_cols
            row["logic_um2"] = r * c * pes[1][0] + float(ab[0] * (r + c) / 2
                                                         + ab[1] * (r * r + c * c) / 2)
            row["sram_bits"] = 0
            row["how"] = (f"estimate (PE × {r} × {c} + edge a N + b N² fitted at N = "
                          f"{refs[0].pe_rows}, {refs[1].pe_rows})")
        elif r0["key"] in ("sbuf", "psum"):
            row["sram_bits"] = cfg.sbuf_bits if r0["key"] == "sbuf" else cfg.psum_bits
            row["how"] = how_p + ", bits of the config"
        elif r0["key"] not in ("tensor_ctl", "vector", "scalar", "dma", "glue", "interconnect",
                               "semaphores"):
            row["how"] = f"synthesized at P = {ps[1]} (P-independent)" \
                if abs(r1["logic_um2"] - r0["logic_um2"]) < 1e-6 * max(1.0, r1["logic_um2"]) \
                else how_p
        row["sram_um2"] = row["sram_bits"] * SRAM_UM2_PER_BIT
        row["um2"] = row["logic_um2"] + row["sram_um2"]
        rows.append(row)
    core = [r for r in rows if r["in_core"]]
    total = sum(r["um2"] for r in core)
    for r in rows:
        r["share"] = r["um2"] / total if total else 0.0
    s = {"config": cfg.name, "core_um2": total, "scaled_from": [c.name for c in refs],
         "logic_um2": sum(r["logic_um2"] for r in core),
         "sram_bits": sum(r["sram_bits"] for r in core),
         "sram_um2": sum(r["sram_um2"] for r in core),
         "cells": sum(r["cells"] for r in core), "sram_um2_per_bit": SRAM_UM2_PER_BIT,
         "sbuf_bits_config": cfg.sbuf_bits, "psum_bits_config": cfg.psum_bits,
         **{f"{r['key']}_um2": r["um2"] for r in rows}}
    for k in ("scalar_lane_um2", "scalar_lane_logic_um2", "scalar_table_bits_per_lane"):
        if k in tabs[1][1]:
            s[k] = tabs[1][1][k]
    return rows, s


def _md(rows, s, cfg, runtime=None):
    lines = [f"## Whole core: `{cfg.name}`", "",
             f"{cfg.partitions} partitions, {cfg.pe_rows} × {cfg.pe_cols} PEs, SBUF "
             f"{cfg.sbuf_bytes_per_partition // 1024} KiB × {cfg.partitions}, PSUM "
             f"{cfg.psum_banks} × {cfg.psum_bank_bytes} B × {cfg.partitions}, "
             f"{cfg.dma_engines} DMA engines. Logic: sky130_fd_sc_hd standard-cell area "
             f"(area-only mapping, no placement); memories: SRAM macros at "
             f"{SRAM_UM2_PER_BIT} µm²/bit (OpenRAM sky130 32 × 512 1RW1R macro, periphery "
             "included).", "",
             "| part | how | × | logic µm² | memory bits | SRAM µm² | total µm² | share |",
             "|---|---|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        if not r["in_core"]:
            continue
        lines.append(f"| {r['label']} | {r['how']} | {r['count'] or ''} | "
                     f"{r['logic_um2']:,.0f} | {r['sram_bits']:,} | {r['sram_um2']:,.0f} | "
                     f"{r['um2']:,.0f} | {100 * r['share']:.1f} % |")
    lines.append(f"| **core** | sum | | **{s['logic_um2']:,.0f}** | **{s['sram_bits']:,}** | "
                 f"**{s['sram_um2']:,.0f}** | **{s['core_um2']:,.0f}** | 100 % |")
    for r in rows:
        if not r["in_core"]:
            lines.append(f"| {r['label']} | {r['how']} | {r['count'] or ''} | "
                         f"{r['logic_um2']:,.0f} | {r['sram_bits']:,} | {r['sram_um2']:,.0f} | "
                         f"{r['um2']:,.0f} | ({100 * r['share']:.1f} %) |")
    lines.append("")
    if "estimate_error" in s:
        lines.append(f"Whole core synthesized flat in one run: {s['flat_um2']:,.0f} µm² "
                     f"(logic {s['flat_logic_um2']:,.0f}); estimate error "
                     f"{100 * s['estimate_error']:.2f} % (logic "
                     f"{100 * s['estimate_error_logic']:.2f} %).")
    if "scalar_lane_um2" in s:
        lines.append(f"Scalar function-unit lane: {s['scalar_lane_um2']:,.0f} µm² (logic "
                     f"{s['scalar_lane_logic_um2']:,.0f} + "
                     f"{s['scalar_table_bits_per_lane']:,} table bits as SRAM).")
    if "scaled_from" in s:
        lines.append(f"Estimated from the part results of {', '.join(s['scaled_from'])} (the "
                     f"array beyond {DIRECT_MAX} × {DIRECT_MAX} is not synthesized as a part).")
    if runtime is not None:
        lines.append(f"Run time {runtime:.0f} s.")
    return "\n".join(lines) + "\n"


def _plot(rows, s, path):
    """The area breakdown: left, linear bars (logic and SRAM stacked) labelled with mm² and
    share; right, the same totals on a log axis, so that the small blocks stay visible. Written
    as ``path`` (PNG) and its ``.svg``."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    core = sorted((r for r in rows if r["in_core"]), key=lambda r: r["um2"])
    fig, (ax, lx) = plt.subplots(1, 2, figsize=(12, 0.42 * len(core) + 1.6), sharey=True,
                                 gridspec_kw={"width_ratios": [3, 2]})
    y = range(len(core))
    logic = [r["logic_um2"] / 1e6 for r in core]
    sram = [r["sram_um2"] / 1e6 for r in core]
    ax.barh(y, logic, color="#4878a8", label="logic (sky130 cells)")
    ax.barh(y, sram, left=logic, color="#e0a040", label="SRAM macros")
    top = max(r["um2"] for r in core) / 1e6
    for i, r in enumerate(core):
        ax.text(r["um2"] / 1e6 + top * 0.01, i,
                f"{r['um2'] / 1e6:,.3f} mm²  {100 * r['share']:.1f} %", va="center", fontsize=8)
    ax.set_yticks(list(y))
    ax.set_yticklabels([r["key"] for r in core], fontsize=9)
    ax.set_xlim(0, top * 1.4)
    ax.set_xlabel("area (mm², linear)")
    ax.legend(loc="lower right", fontsize=8)
    lx.barh(y, logic, color="#4878a8")
    lx.barh(y, [max(a, 1e-6) for a in sram], left=logic, color="#e0a040")
    lx.set_xscale("log")
    lx.set_xlim(max(1e-4, min(r["um2"] for r in core) / 1e6 / 3), top * 2)
    lx.set_xlabel("area (mm², log: small blocks)")
    lx.grid(True, axis="x", which="major", alpha=0.3)
    fig.suptitle(f"NeuronCore {s['config']}: {s['core_um2'] / 1e6:,.2f} mm² (sky130 cells, "
                 f"area-only; memories as SRAM macros at {SRAM_UM2_PER_BIT} µm²/bit)",
                 fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    fig.savefig(Path(path).with_suffix(".svg"))
    plt.close(fig)
    return path


def write_core_report(cfg, results, out, index, runtime=None, table=None):
    """Write ``core_area.json``, ``core_area.md`` and ``core_area.png`` under ``out`` and the
    config's summary into ``index`` (``build/synth/core_area.json``: one entry per config);
    returns ``(markdown, summary)``."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    rows, s = table if table is not None else core_table(cfg, results)
    if runtime is not None:
        s["runtime_s"] = round(runtime, 1)
    (out / "core_area.json").write_text(json.dumps({**s, "rows": rows}, indent=1) + "\n")
    md = _md(rows, s, cfg, runtime)
    (out / "core_area.md").write_text(md)
    try:
        _plot(rows, s, out / "core_area.png")
    except ImportError:     # matplotlib is the [plot] extra
        pass
    index = Path(index)
    allcfg = json.loads(index.read_text()) if index.exists() else {}
    prev = allcfg.get(cfg.name, {})
    if "estimate_error" in prev and "estimate_error" not in s:
        s = {**s, **{k: prev[k] for k in prev if k.startswith(("flat_", "estimate_error"))}}
    allcfg[cfg.name] = s
    index.write_text(json.dumps(allcfg, indent=1, sort_keys=True) + "\n")
    return md, s
