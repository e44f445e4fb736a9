# SPDX-License-Identifier: Apache-2.0
"""``make bench BENCH=tensor_engine``: utilization of the tensor engine on GEMMs (Verilator).

Utilization = useful MACs / (rows x cols x cycles), cycles from the first input beat accepted
(stationary or moving) to the last PSUM write. Scenarios: one BF16 tile (K = rows, M = cols,
N = one PSUM bank), 8 back-to-back BF16 tiles (each with its own LoadStationary, overlapped), and
the same for FP8 / FP32 / MX when the config has them. Every result is also checked bit for bit.
"""

from __future__ import annotations

import json
import time

from tb.tensor.gemm import run as run_gemms

NAME = "tensor_engine"


def run(cfg, seed=1, scenarios=None, *, rates=True):
    """Metrics of ``cfg``; with ``rates`` and a preset other than ``small``, the small preset's
    simulation speed and build time are added with a ``_small`` suffix."""
    t0 = time.monotonic()
    m = run_gemms(cfg, seed, scenarios)
    if rates and cfg.name != "small":
        from rtl.config import get_preset
        small = run_gemms(get_preset("small"), seed, None)
        for k in ("sim_cycles_per_second", "verilator_build_seconds"):
            m[f"{k}_small"] = small[k]
    m["bench_wall_seconds"] = time.monotonic() - t0
    return m


if __name__ == "__main__":
    import sys
    from rtl.config import preset_from_env
    print(json.dumps(run(preset_from_env()), indent=2))
    sys.exit(0)
