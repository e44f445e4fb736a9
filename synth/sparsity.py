# SPDX-License-Identifier: Apache-2.0
"""``python -m synth.sparsity``: the area of the structured-sparsity decoder.

Synthesizes the tensor array (``synth.blocks`` ``tensor_array``: PEs, rows, skew, de-skew) of
the preset chosen with ``CONFIG`` twice, as configured and with ``sparse_patterns=()`` (the dense
twin, the hardware without any sparsity), through the cached flow of :mod:`synth.flow`, and
writes ``build/synth/sparsity_area.json``::

    {"preset", "patterns", "sparse": {figures}, "dense": {figures},
     "decoder_area_fraction": (sparse - dense) / sparse of the sky130 area,
     "decoder_transistor_fraction": the same in transistors, "pe": {... the PE alone ...}}

The difference is everything sparsity adds: the tag register and the m:1 tag mux in every PE,
the wider moving bus (the group bus, one register per PE and per skew stage), the engine-side
repacking is not in the array (it is per row, in the engine). ``bench/bench_sparsity.py`` reads
this file (``decoder_area_fraction``).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from rtl.config import preset_from_env

from .blocks import get_block
from .flow import Job, run_jobs

__all__ = ["OUT", "measure", "main"]

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "build" / "synth" / "sparsity_area.json"

_KEYS = ("um2_sky130", "transistors", "cells", "flip_flops")


def _figures(r):
    if r.get("error"):
        raise RuntimeError(f"synthesis of {r['row']} ({r['preset']}) failed: {r['error']}")
    return {k: r[k] for k in _KEYS}


def measure(cfg, processes=2, progress=print):
    """Figures of the array and of the PE of ``cfg`` and of its dense twin (see module doc)."""
    if not cfg.sparsity:
        raise ValueError(f"cfg {cfg.name!r} has no sparse patterns to measure")
    dense = cfg.replace(name=f"{cfg.name}_dense", sparse_patterns=())
    arr, pe = get_block("tensor_array"), get_block("tensor_pe")
    jobs = [Job(arr, None, cfg), Job(arr, None, dense), Job(pe, None, cfg), Job(pe, None, dense)]
    res = run_jobs(jobs, ROOT / "build" / "synth", processes=processes, progress=progress)
    sa, da, sp, dp = (_figures(r) for r in res)

    def frac(s, d, k):
        return (s[k] - d[k]) / s[k]
    return {
        "preset": cfg.name, "patterns": list(cfg.sparsity),
        "array": f"{cfg.pe_rows}x{cfg.pe_cols}",
        "sparse": sa, "dense": da,
        "decoder_area_fraction": frac(sa, da, "um2_sky130"),
        "decoder_transistor_fraction": frac(sa, da, "transistors"),
        "pe": {"sparse": sp, "dense": dp,
               "decoder_area_fraction": frac(sp, dp, "um2_sky130")},
    }


def main(argv=None):
    cfg = preset_from_env()
    r = measure(cfg)
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(r, indent=2) + "\n")
    print(f"[synth] sparsity decoder, {cfg.name} {r['array']}: "
          f"{100 * r['decoder_area_fraction']:.1f} % of the array's sky130 area "
          f"({100 * r['pe']['decoder_area_fraction']:.1f} % of a PE) -> {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
