# SPDX-License-Identifier: Apache-2.0
"""``make bench BENCH=sparsity``: N:M structured-sparsity speed-ups, decoder area, metadata.

Metrics (``build/bench/sparsity.json``):

* ``speedup_<n>_<m>`` per enabled pattern (``speedup_4_16``: goal >= 3.8; ``speedup_2_4``:
  goal >= 1.9): dense-equivalent throughput of steady-state sparse tiles over dense throughput
  on the same array and moving format (Verilator, results checked bit for bit; see
  ``tb.tensor.sparse_gemm.run_speedups``), plus whole-window figures and cycle counts;
* ``metadata_bits_per_kept_<n>_<m>``: tag bits per kept weight (``ceil(log2 m)``),
  ``metadata_bits_per_kept`` for the first (default 4:16) pattern;
* ``decoder_area_fraction``: the sparsity hardware's share of the array's sky130 area, from
  ``build/synth/sparsity_area.json`` (``python -m synth.sparsity``, run here when that file is
  missing or for another preset), and ``decoder_area_fraction_pe`` (one PE).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from golden.sparse import metadata_bits_per_kept
from tb.tensor.sparse_gemm import run_speedups

NAME = "sparsity"
AREA = Path(__file__).resolve().parent.parent / "build" / "synth" / "sparsity_area.json"


def decoder_area(cfg):
    """The synthesized area figures of ``cfg`` (runs ``python -m synth.sparsity`` if needed)."""
    def ok():
        return AREA.exists() and json.loads(AREA.read_text()).get("preset") == cfg.name
    if not ok():
        subprocess.run([sys.executable, "-m", "synth.sparsity"], check=True,
                       cwd=AREA.parent.parent.parent, env={**os.environ, "CONFIG": cfg.name})
    return json.loads(AREA.read_text())


def run(cfg, seed=1):
    if not cfg.sparsity:
        return {"patterns": 0}
    m = run_speedups(cfg, seed)
    for p in cfg.sparsity:
        m[f"metadata_bits_per_kept_{p.replace(':', '_')}"] = metadata_bits_per_kept(p)
    m["metadata_bits_per_kept"] = metadata_bits_per_kept(cfg.sparsity[0])
    a = decoder_area(cfg)
    m["decoder_area_fraction"] = a["decoder_area_fraction"]
    m["decoder_transistor_fraction"] = a["decoder_transistor_fraction"]
    m["decoder_area_fraction_pe"] = a["pe"]["decoder_area_fraction"]
    m["array_um2_sky130_sparse"] = a["sparse"]["um2_sky130"]
    m["array_um2_sky130_dense"] = a["dense"]["um2_sky130"]
    return m


if __name__ == "__main__":
    from rtl.config import preset_from_env
    print(json.dumps(run(preset_from_env()), indent=2))
