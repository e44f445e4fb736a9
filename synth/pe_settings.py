# SPDX-License-Identifier: Apache-2.0
"""``python -m synth.pe_settings``: the tensor PE's area and ECP5 Fmax per setting.

Synthesizes the PE (``synth.blocks`` ``tensor_pe``) of the preset chosen with ``CONFIG`` for
each setting of ``fp32_passes`` (1 = native 24 x 24 multiplier, 4 = 12 x 12 split) and of the
pipeline depths ``mul_stages`` / ``add_stages``, through the cached flow of :mod:`synth.flow`
(sky130 area, then ECP5 place and route for Fmax), one job at a time, and writes
``build/synth/pe_settings.json``: ``{"preset", "settings": [{"fp32_passes", "mul_stages",
"add_stages", "latency", "row_skew", "um2_sky130", "transistors", "cells", "flip_flops",
"fmax_mhz"}, ...]}``. ``--settings P:M:A,...`` picks the settings (default :data:`SETTINGS`);
``--no-fmax`` skips place and route. ``--mode-sets`` instead synthesizes the preset's PE at its
own depths once per mode set (:data:`MODE_SETS`: packed modes and sparsity on or off; area
only) and writes ``build/synth/pe_mode_sets.json``: ``{"preset", "mode_sets": [{"mode_set",
"packed_modes", "sparse", "um2_sky130", ...}, ...]}``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from rtl.config import preset_from_env
from rtl.tensor.pe import PE

from .blocks import get_block
from .flow import Job, run_jobs

__all__ = ["OUT", "OUT_MODES", "SETTINGS", "MODE_SETS", "measure", "measure_mode_sets",
           "mode_set_configs", "main"]

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "build" / "synth" / "pe_settings.json"
OUT_MODES = ROOT / "build" / "synth" / "pe_mode_sets.json"

#: (fp32_passes, mul_stages, add_stages): native and split at the presets' depths, then the
#: split PE at deeper pipelines (docs/tensor-engine.md, "PE area and Fmax per setting").
SETTINGS = ((1, 1, 2), (4, 1, 2), (4, 2, 4), (4, 2, 5), (4, 2, 6), (4, 3, 6), (4, 4, 6))

_KEYS = ("um2_sky130", "transistors", "cells", "flip_flops", "fmax_mhz")

#: (name, packed_modes, sparse): the PE's optional mode sets, all on first. ``sparse = False``
#: is ``sparse_patterns=()``; True keeps the preset's patterns.
MODE_SETS = (("all", True, True), ("packed, no sparsity", True, False),
             ("sparsity, no packed", False, True), ("neither", False, False))


def _synthesize(cfgs, fmax, progress):
    """The PE of each config of ``cfgs``, one job at a time (cached); the result dicts, or
    ``RuntimeError`` naming the first config whose synthesis failed."""
    pe = get_block("tensor_pe")
    res = run_jobs([Job(pe, None, c, fmax=fmax) for c in cfgs], ROOT / "build" / "synth",
                   processes=1, progress=progress)
    for c, r in zip(cfgs, res):
        if r.get("error"):
            raise RuntimeError(f"synthesis of {r['row']} ({c.name}) failed: {r['error']}")
    return res


def measure(cfg, settings=SETTINGS, fmax=True, progress=print):
    """One dict of figures per ``(fp32_passes, mul_stages, add_stages)`` of ``settings``."""
    cfgs = [cfg.replace(name=f"{cfg.name}_p{p}m{m}a{a}", fp32_passes=p, mul_stages=m,
                        add_stages=a) for p, m, a in settings]
    res = _synthesize(cfgs, fmax, progress)
    out = []
    for (p, m, a), c, r in zip(settings, cfgs, res):
        sig = PE.Signature(c)
        out.append({"fp32_passes": p, "mul_stages": m, "add_stages": a,
                    "latency": sig.latency, "row_skew": sig.row_skew,
                    **{k: r.get(k) for k in _KEYS}})
    return out


def mode_set_configs(cfg):
    """``cfg`` once per entry of :data:`MODE_SETS` (named ``<preset>_{p,np}{s,ns}``)."""
    cfgs = []
    for _name, packed, sparse in MODE_SETS:
        tag = f"{'p' if packed else 'np'}{'s' if sparse else 'ns'}"
        c = cfg.replace(name=f"{cfg.name}_{tag}", packed_modes=packed)
        cfgs.append(c if sparse else c.replace(sparse_patterns=()))
    return cfgs


def measure_mode_sets(cfg, progress=print):
    """Area figures of ``cfg``'s PE for each entry of :data:`MODE_SETS` (no place and route)."""
    cfgs = mode_set_configs(cfg)
    res = _synthesize(cfgs, False, progress)
    out = []
    for (name, packed, sparse), c, r in zip(MODE_SETS, cfgs, res):
        out.append({"mode_set": name, "packed_modes": packed, "sparse": sparse,
                    "fp8_macs_per_cycle": c.fp8_pack or 1, "mx_macs_per_cycle": c.mx_pack or 1,
                    **{k: r.get(k) for k in _KEYS if k != "fmax_mhz"}})
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m synth.pe_settings",
                                 description=__doc__.splitlines()[0])
    ap.add_argument("--settings", default=None, help="P:M:A,... (fp32_passes, mul_stages, "
                                                     "add_stages)")
    ap.add_argument("--no-fmax", dest="fmax", action="store_false")
    ap.add_argument("--mode-sets", action="store_true",
                    help="area of the preset's PE per mode set instead (see MODE_SETS)")
    ap.add_argument("--out", default=None)
    a = ap.parse_args(argv)
    if a.mode_sets:
        cfg = preset_from_env()
        rows = measure_mode_sets(cfg)
        out = Path(a.out or OUT_MODES)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps({"preset": cfg.name, "mode_sets": rows}, indent=2) + "\n")
        for r in rows:
            print(f"[synth] PE {cfg.name} {r['mode_set']}: {r['um2_sky130']:,.0f} um2, "
                  f"{r['cells']:,} cells, {r['um2_sky130'] / r['fp8_macs_per_cycle']:,.0f} um2 "
                  f"per FP8 MAC per cycle")
        return 0
    settings = SETTINGS if a.settings is None else tuple(
        tuple(int(x) for x in s.split(":")) for s in a.settings.split(","))
    cfg = preset_from_env()
    rows = measure(cfg, settings, fmax=a.fmax)
    out = Path(a.out or OUT)
    out.parent.mkdir(parents=True, exist_ok=True)
    prev = json.loads(out.read_text()) if out.exists() else {}
    keep = [r for r in prev.get("settings", []) if prev.get("preset") == cfg.name and not any(
        (r["fp32_passes"], r["mul_stages"], r["add_stages"]) == s for s in settings)]
    out.write_text(json.dumps({"preset": cfg.name, "settings": keep + rows}, indent=2) + "\n")
    for r in rows:
        f = r["fmax_mhz"]
        print(f"[synth] PE {cfg.name} passes={r['fp32_passes']} mul={r['mul_stages']} "
              f"add={r['add_stages']}: {r['um2_sky130']:,.0f} um2, "
              f"fmax {'n/a' if f is None else f'{f:.1f} MHz'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
