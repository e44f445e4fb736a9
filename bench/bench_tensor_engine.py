# SPDX-License-Identifier: Apache-2.0
"""``make bench BENCH=tensor_engine``: utilization of the tensor engine on GEMMs (Verilator).

Utilization = useful MACs / (rows x cols x cycles), cycles from the first input beat accepted
(stationary or moving) to the last PSUM write. Scenarios: one BF16 tile (K = rows, M = cols,
N = one PSUM bank), 8 back-to-back BF16 tiles (each with its own LoadStationary, overlapped), and
the same for FP8 / FP32 / MX when the config has them. Every result is also checked bit for bit.
``rate_vs_bf16_{fp8,fp32,mx}``: MACs per cycle of those scenarios over BF16's (FP32 is 0.25 with
``fp32_passes = 4``; FP8 and MX run their packed modes, 2 and 4 elements per PE step, when the
config has them, and ``*_unpacked`` the same formats one element per step). PE area and Fmax per setting come from ``python -m synth.pe_settings``
when it was run for the preset (``pe_area``). ``sim_cycles_per_second`` is the best
scenario's simulated cycles over its wall seconds (the figure as first reported);
``sim_cycles_per_second_all_scenarios`` every scenario's cycles over their wall seconds,
``sim_cycles_per_second_slowest_scenario`` the slowest one.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from tb.tensor.gemm import run as run_gemms

NAME = "tensor_engine"
#: Written by ``python -m synth.pe_settings`` (bench does not import synth).
PE_SETTINGS = Path(__file__).resolve().parent.parent / "build" / "synth" / "pe_settings.json"


def run(cfg, seed=1, scenarios=None, *, rates=True):
    """Metrics of ``cfg``; with ``rates`` and a preset other than ``small``, the small preset's
    simulation speed and build time are added with a ``_small`` suffix."""
    t0 = time.monotonic()
    m = run_gemms(cfg, seed, scenarios)
    if rates and cfg.name != "small":
        from rtl.config import get_preset
        small = run_gemms(get_preset("small"), seed, None)
        for k in ("sim_cycles_per_second", "sim_cycles_per_cpu_second",
                  "verilator_build_seconds_this_run", "verilator_build_cold"):
            m[f"{k}_small"] = small[k]
    m.update(pe_area(cfg))
    m["bench_wall_seconds"] = time.monotonic() - t0
    return m


def pe_area(cfg):
    """The PE's sky130 area and ECP5 Fmax per setting, from ``python -m synth.pe_settings``
    (``build/synth/pe_settings.json``) when it was run for this preset: ``pe_um2_p{passes}_m{mul
    stages}_a{add stages}`` and ``pe_fmax_mhz_...``; ``pe_um2_per_fp8_mac_per_cycle`` for the
    preset's own setting (``cfg.fp8_pack`` FP8 MACs per PE per cycle with double-rate FP8, else
    one)."""
    if not PE_SETTINGS.exists():
        return {}
    d = json.loads(PE_SETTINGS.read_text())
    if d.get("preset") != cfg.name:
        return {}
    out = {}
    for r in d["settings"]:
        tag = f"p{r['fp32_passes']}_m{r['mul_stages']}_a{r['add_stages']}"
        out[f"pe_um2_{tag}"] = r["um2_sky130"]
        if r.get("fmax_mhz") is not None:
            out[f"pe_fmax_mhz_{tag}"] = r["fmax_mhz"]
        if (r["fp32_passes"], r["mul_stages"], r["add_stages"]) == (
                cfg.fp32_passes, cfg.mul_stages, cfg.add_stages):
            out["pe_um2"] = r["um2_sky130"]
            # a double-rate FP8 PE does cfg.fp8_pack FP8 MACs per cycle
            out["pe_um2_per_fp8_mac_per_cycle"] = r["um2_sky130"] / max(1, cfg.fp8_pack)
    return out


if __name__ == "__main__":
    import sys
    from rtl.config import preset_from_env
    print(json.dumps(run(preset_from_env()), indent=2))
    sys.exit(0)
