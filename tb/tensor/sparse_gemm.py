# SPDX-License-Identifier: Apache-2.0
"""Sparse GEMM timing on the tensor engine (Verilator): the speed-up of every enabled N:M
pattern over dense on the same array, and the 4:16-vs-dense-twin GEMM of ``make sim``. Every
result is checked bit for bit (``tb.tensor.tb_tensor_sparse_bench``).
"""

from __future__ import annotations

import json

from tb.runner import build_dir_for
from tb.tensor.build import depths_for, tensor_sim

__all__ = ["TILES", "bench_n", "run_speedups", "run_demo"]

#: Tile counts timed; the steady-state cycles per tile are their difference over 6 tiles.
TILES = (2, 8)


def bench_n(cfg):
    """Moving columns per tile: one PSUM bank, at most 128 (enough to hide every load:
    ``N >= M + (R - 1) * La + 2``, docs/tensor-engine.md)."""
    return min(cfg.psum_bank_fp32, 128)


def _run(cfg, seed, **params):
    sim = tensor_sim(cfg, depths_for(cfg), name="tensor_bench")
    out = build_dir_for(cfg, "tensor_bench") / "sparse_bench_result.json"
    sim.run("tb.tensor.tb_tensor_sparse_bench", params={"seed": seed, "depths": sim.depths,
                                                 "out": str(out), **params},
            tag="sparse_bench")
    return json.loads(out.read_text()), sim.build_seconds


def run_speedups(cfg, seed=1):
    """Metrics: per enabled pattern ``speedup_<n>_<m>`` = dense-equivalent MACs per cycle of
    steady-state sparse tiles over the MACs per cycle of dense tiles of the same moving format
    on the same array (``CR * dense cycles per tile / sparse cycles per tile``, cycles per tile
    from the 2- and 8-tile windows), ``speedup_window_<n>_<m>`` the same over the whole 8-tile
    windows (fill and drain included), and the cycle counts. Patterns that also run a wider
    moving format (e.g. 2:4 with BF16) get ``speedup_<n>_<m>_<format>`` as well."""
    n = bench_n(cfg)
    r, build = _run(cfg, seed, n=n, tiles=list(TILES))
    lo, hi = (str(t) for t in TILES)
    m = {}
    for pattern, s in r["sparse"].items():
        d = r["dense"][s["fmt"]]
        key = pattern.replace(":", "_").replace("@", "_")
        per_s = (s[hi] - s[lo]) / (TILES[1] - TILES[0])
        per_d = (d[hi] - d[lo]) / (TILES[1] - TILES[0])
        m[f"speedup_{key}"] = s["cr"] * per_d / per_s
        m[f"speedup_window_{key}"] = s["cr"] * d[hi] / s[hi]
        m[f"cycles_per_tile_sparse_{key}"] = per_s
        m[f"cycles_8_tiles_sparse_{key}"] = s[hi]
        m[f"format_{key}"] = s["fmt"]
    for fmt, d in r["dense"].items():
        m[f"cycles_per_tile_dense_{fmt}"] = (d[hi] - d[lo]) / (TILES[1] - TILES[0])
        m[f"cycles_8_tiles_dense_{fmt}"] = d[hi]
    m["moving_columns_per_tile"] = n
    m["verilator_build_seconds"] = build
    return m


def run_demo(cfg, seed=1):
    """The 4:16 sparse GEMM and its dense twin (``make sim``): cycles of both."""
    r, _ = _run(cfg, seed, n=bench_n(cfg), tiles=[1], demo=1)
    return r["demo"]
