# SPDX-License-Identifier: Apache-2.0
"""``python -m synth`` (this module: :func:`main`): area, timing and scaling report of every
registered block.

``make synth``        -> ``python -m synth``: the whole-core area table of the config named by
                         ``CONFIG`` (a preset, ``preset:field=value,...`` or a TOML file;
                         default ``default``), :mod:`synth.core`
``make synth BLOCKS=default|all|name,...`` -> the per-block report (area, ECP5, Fmax)
``make synth-sweep``  -> ``python -m synth --sweep`` (array sizes x format configurations), then
                         the whole-core estimate check on ``small`` (``--flat``)

Reports go to ``build/synth/<config name>/``; the result cache and yosys work directories are
shared under ``build/synth/``.
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

from rtl.config import PRESETS, parse_config, parse_sparse_pattern, preset_from_env

from . import blocks as blocks_mod
from . import core as core_mod
from .design import as_design
from .estimate import METRICS, check_estimate, estimate
from .flow import Job, ROOT, SRAM_UM2_PER_BIT, run_jobs
from .report import update_readme, write_csv, write_json, write_markdown, write_plots

#: Array sizes synthesized directly, and sizes estimated hierarchically.
DIRECT_SIZES = (2, 4, 8, 16)
ESTIMATED_SIZES = (32, 64, 128)


def array_cfg(cfg, n, base_name=None):
    """``cfg`` resized to an N x N array (``partitions = pe_rows = pe_cols = N``); explicitly
    listed sparse patterns whose n does not divide N are dropped (a 2 x 2 array has no 4:16)."""
    sp = cfg.sparse_patterns
    if sp is not None:
        sp = tuple(p for p in sp if n % parse_sparse_pattern(p)[0] == 0)
    return cfg.replace(name=f"{base_name or cfg.name}_{n}x{n}", partitions=n, pe_rows=n,
                       pe_cols=n, sparse_patterns=sp)


def format_configs():
    """Format configurations of the sweep: all formats with and without MX, BF16-only, FP8-only,
    and the sparsity variants: no sparsity at all (``dense``, the hardware without the decoder)
    and 4:16 only (``sparse_4_16``); the others enable every N:M pattern that fits."""
    d = PRESETS["default"]
    cfgs = [d, d.replace(name="all_nomx", mx_formats=()), PRESETS["bf16_only"],
            PRESETS["fp8_only"], d.replace(name="dense", sparse_patterns=()),
            d.replace(name="sparse_4_16", sparse_patterns=("4:16",))]
    return cfgs


def plan(cfg, blocks, *, fmax, sweep, default_run=False):
    """``(jobs, estimates, skipped)``: jobs to run, array estimates to derive from their results,
    and notes on blocks too large to synthesize directly (``Block.holds_array``).
    ``default_run``: the default ``make synth`` (blocks with ``default_pnr = False`` are not
    placed and routed)."""
    jobs, est, skipped = [], [], []
    seen = set()

    def add(job):
        k = (job.block.name, job.variant, job.cfg)
        if k not in seen:
            seen.add(k)
            jobs.append(job)

    fcs = [cfg] + ([c for c in format_configs() if c != cfg] if sweep else [])
    for fc in fcs:
        in_preset = fc is cfg
        for b in blocks:
            if not (in_preset or b.sweep):
                continue
            nd = max(DIRECT_SIZES)
            if b.holds_array and max(fc.pe_rows, fc.pe_cols) > nd:
                skipped.append(f"`{b.name}` [{fc.name}] not synthesized: its {fc.pe_rows} x "
                               f"{fc.pe_cols} array is larger than the largest directly "
                               f"synthesized one ({nd} x {nd}; see the hierarchical estimate)")
                continue
            variants = b.variants(fc) if b.variants else (None,)
            if not sweep and b.default_variants is not None:
                variants = tuple(v for v in variants if v in b.default_variants(fc))
            for v in variants:
                if not b.array:
                    # default run: P&R of single blocks and the "all" variant only (keeps
                    # `make synth` within minutes); the sweep places and routes every variant
                    pnr_here = sweep or (v in (None, "all")
                                         and (b.default_pnr or not default_run))
                    add(Job(b, v, fc, fmax=fmax and b.pnr and pnr_here,
                            extra={"format_cfg": fc.name, "in_preset": in_preset}))
                    continue
                n0 = fc.pe_rows
                direct = DIRECT_SIZES if (sweep or n0 > max(DIRECT_SIZES)) else (n0,)
                for n in direct:
                    c = fc if (n == n0 and fc.pe_cols == n) else array_cfg(fc, n)
                    add(Job(b, v, c, fmax=fmax and b.pnr and n <= 8,
                            extra={"format_cfg": fc.name, "n": n,
                                   "in_preset": in_preset and c is fc}))
                targets = ESTIMATED_SIZES if sweep else ()
                if n0 > max(DIRECT_SIZES) and n0 not in targets:
                    targets = targets + (n0,)
                for n in targets:   # the PE alone at each estimated size
                    c = fc if fc.pe_rows == n else array_cfg(fc, n)
                    add(Job(pe_block(b), v, c, fmax=False,
                            extra={"format_cfg": fc.name, "n": n, "helper": True}))
                if targets:
                    est.append({"block": b, "variant": v, "fc": fc, "sizes": direct,
                                "targets": targets, "in_preset": in_preset})
    # biggest first (arrays by size, then the blocks marked slow), so the two workers finish
    # together
    jobs.sort(key=lambda j: (-(j.extra.get("n", 0) ** 2), not (j.block.slow and j.fmax)))
    return jobs, est, skipped


def pe_block(block):
    """A helper block: the PE module of the array ``block``, synthesized alone."""
    def build(cfg, variant):
        return as_design(block.build(cfg, variant)).modules[blocks_mod.pe_module_of(block, cfg)]
    return blocks_mod.Block(name=f"{block.name}__pe", module=block.module, build=build,
                            pnr=False, description=f"PE of {block.name} (estimate helper)")


def derive_estimates(results, est):
    """Estimated rows and estimate checks from synthesized array results."""
    rows, checks = [], []
    for e in est:
        b, v, fc = e["block"], e["variant"], e["fc"]
        row = b.name if v is None else f"{b.name}_{v}"
        syn = {r["n"]: r for r in results
               if r.get("row") == row and r.get("format_cfg") == fc.name and "n" in r
               and "error" not in r and r["n"] in e["sizes"]}
        if len(syn) < 2:
            continue
        pes = {r["n"]: r for r in results
               if r.get("row") == f"{b.name}__pe" + ("" if v is None else f"_{v}")
               and r.get("format_cfg") == fc.name and "error" not in r}
        values = estimate(syn, None, e["targets"], pe_results=pes)
        for n, vals in values.items():
            c = fc if fc.pe_rows == n else array_cfg(fc, n)
            rows.append({"row": row, "block": b.name, "variant": v, "preset": f"{c.name}_est",
                         "kind": "estimated", "array": True, "format_cfg": fc.name, "n": n,
                         "in_preset": e["in_preset"] and c is fc,
                         "fmax_mhz": None, "fmax_note": "estimated, not placed",
                         **{m: vals[m] for m in METRICS},
                         "sram_um2": vals["memory_bits"] * SRAM_UM2_PER_BIT})
        nmax, chk = check_estimate(syn, None)
        checks.append({"row": row, "format_cfg": fc.name, "n": nmax, "metrics": chk})
    return rows, checks


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m synth", description=__doc__.splitlines()[0])
    ap.add_argument("--config", default=None, help=f"preset (one of {sorted(PRESETS)}), "
                    "preset:field=value,... or a TOML file (default: $CONFIG or 'default')")
    ap.add_argument("--sweep", action="store_true", help="array sizes x format configurations")
    ap.add_argument("--no-fmax", "--quick", dest="fmax", action="store_false",
                    help="skip ECP5 place and route (no Fmax)")
    ap.add_argument("--blocks", default=None,
                    help="per-block report: comma-separated block names, 'default' (the blocks "
                         "marked default in synth/blocks.py) or 'all' (without it: the "
                         "whole-core report; the sweep: all)")
    ap.add_argument("--core", action="store_true",
                    help="the whole-core report (the default without --blocks / --sweep)")
    ap.add_argument("--flat", action="store_true",
                    help="also synthesize the whole core flat in one run and report the "
                         "estimate's error (minutes on small; hours at the default preset)")
    ap.add_argument("-j", "--jobs", type=int, default=2, help="parallel yosys processes")
    ap.add_argument("--update-readme", action="store_true",
                    help="replace the table between the synth-table markers of README.md")
    ap.add_argument("--out", default=None,
                    help="report directory (default: build/synth/<config name>)")
    ap.add_argument("--build", default=None,
                    help="cache and work directory, shared by every config (default: --out if "
                         "given, else build/synth)")
    a = ap.parse_args(argv)
    # blocks may build helper elaboratables they do not use (e.g. a prototype PE); not our noise
    warnings.filterwarnings("ignore", message=r".* created but never used")
    try:
        cfg = parse_config(a.config) if a.config else preset_from_env()
    except (ValueError, TypeError) as e:
        ap.error(f"CONFIG: {e}")
    build = Path(a.build or a.out or ROOT / "build" / "synth")
    out = Path(a.out) if a.out else build / cfg.name
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    core = a.core or a.flat or not (a.blocks or a.sweep)
    rc = 0
    if a.blocks or a.sweep:
        rc = _blocks_report(a, cfg, build, out, t0)
    if core:
        rc = max(rc, core_report(cfg, build, out, flat=a.flat, jobs=a.jobs))
    return rc


def core_report(cfg, build, out, *, flat=False, jobs=2):
    """The whole-core report of ``cfg`` (:mod:`synth.core`); prints its table."""
    t0 = time.monotonic()
    scaled = core_mod.needs_scaling(cfg)
    cfgs = core_mod.scaled_refs(cfg) if scaled else [cfg]
    js = [j for c in cfgs for j in core_mod.core_jobs(c, flat=flat and not scaled)]
    print(f"synth: whole core {cfg.name}: {len(js)} parts (ASIC figures)"
          + (" + the flat core" if flat and not scaled else "")
          + (f", estimated from {', '.join(c.name for c in cfgs)}" if scaled else ""))
    results = run_jobs(js, build, processes=jobs)
    errors = [r for r in results if "error" in r]
    for r in errors:
        print(f"synth: FAILED {r['row']} [{r['preset']}]\n{r.get('traceback', r['error'])}",
              file=sys.stderr)
    if errors:
        return 1
    table = None
    if scaled:
        per = [[r for r in results if r["preset"] == c.name] for c in cfgs]
        table = core_mod.scaled_table(cfg, cfgs, per)
    md, s = core_mod.write_core_report(cfg, results, out, build / "core_area.json",
                                       runtime=time.monotonic() - t0, table=table)
    print(md)
    print(f"synth: whole core {cfg.name}: {s['core_um2'] / 1e6:,.3f} mm² in "
          f"{time.monotonic() - t0:.0f} s -> {out / 'core_area.md'}, {out / 'core_area.json'}, "
          f"{out / 'core_area.png'}, {build / 'core_area.json'}")
    return 0


def _blocks_report(a, cfg, build, out, t0):
    """The per-block report (``--blocks`` / ``--sweep``)."""
    reg = blocks_mod.BLOCKS
    if a.blocks == "all":
        pass
    elif a.blocks == "default" or not a.blocks:    # the blocks marked default (synth/blocks.py)
        reg = tuple(b for b in reg if b.default) if not a.sweep else reg
    else:
        reg = tuple(blocks_mod.get_block(n.strip()) for n in a.blocks.split(","))
    avail, missing = blocks_mod.available_blocks(reg)
    print(f"synth: preset {cfg.name}, {'sweep' if a.sweep else 'default run'}, "
          f"fmax {'on' if a.fmax else 'off'}; blocks: {', '.join(b.name for b in avail) or 'none'}"
          + (f"; not available yet: {', '.join(b.name for b in missing)}" if missing else ""))
    jobs, est, skipped = plan(cfg, avail, fmax=a.fmax, sweep=a.sweep,
                              default_run=a.blocks == "default" and not a.sweep)
    for note in skipped:
        print("synth: " + note.replace("`", ""))
    results = run_jobs(jobs, build, processes=a.jobs)
    errors = [r for r in results if "error" in r]
    good = [r for r in results if "error" not in r and not r.get("helper")]
    est_rows, checks = derive_estimates([r for r in results if "error" not in r], est)
    allrows = good + est_rows
    preset_rows = [r for r in allrows if r.get("in_preset")]
    order = {b.name: i for i, b in enumerate(blocks_mod.BLOCKS)}
    keyf = lambda r: (order.get(r["block"], 99), r.get("format_cfg", ""), r.get("n", 0),  # noqa: E731
                      r["row"])
    preset_rows.sort(key=keyf)
    sweep_rows = sorted([r for r in allrows if a.sweep or r.get("array")], key=keyf)
    runtime = time.monotonic() - t0
    csv_rows = preset_rows + [r for r in sweep_rows if r not in preset_rows] if a.sweep \
        else preset_rows
    write_csv(csv_rows, out / "area.csv")
    write_json(allrows + errors, out / "area_full.json", preset=cfg.name, sweep=a.sweep,
               runtime_s=round(runtime, 1), checks=checks)
    md = write_markdown(out / "area.md", preset_rows, preset=cfg.name,
                        sweep_rows=sweep_rows if (a.sweep or est_rows) else (),
                        checks=checks, missing=missing, errors=errors, runtime=runtime,
                        notes=skipped + [f"`{r['row']}` [{r['preset']}]: ECP5 LUTs mapped with "
                                         "classic abc (abc9 failed; `ecp5_note` in area_full.json)"
                                         for r in good if r.get("ecp5_note")])
    plots = write_plots(out, preset_rows, sweep_rows)
    if a.sweep:   # keep the sweep when a later `make synth` rewrites area.csv / area.md
        import shutil
        for src, dst in (("area.csv", "area_sweep.csv"), ("area.md", "area_sweep.md"),
                         ("area_full.json", "area_sweep_full.json")):
            shutil.copyfile(out / src, out / dst)
    if a.update_readme:
        ok = update_readme(ROOT / "README.md", preset_rows, cfg.name)
        print("synth: README.md table " + ("updated" if ok else "NOT updated (no markers)"))
    print(f"synth: {len(good)} synthesized, {len(est_rows)} estimated, {len(errors)} failed in "
          f"{runtime:.0f} s -> {out / 'area.csv'}, {md}, " + ", ".join(str(p) for p in plots))
    for c in checks:
        worst = max(c["metrics"].items(), key=lambda kv: kv[1][2])
        print(f"synth: estimate check {c['row']} [{c['format_cfg']}] N={c['n']}: worst "
              f"{worst[0]} {100 * worst[1][2]:.2f}%")
    for r in errors:
        print(f"synth: FAILED {r['row']} [{r['preset']}]\n{r.get('traceback', r['error'])}",
              file=sys.stderr)
    return 1 if errors else 0
