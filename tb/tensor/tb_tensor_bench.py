# SPDX-License-Identifier: Apache-2.0
"""cocotb module of ``bench/bench_tensor_engine.py`` and ``tb/demo_tensor.py``: timed GEMM
scenarios on the harness, results checked bit for bit, metrics written as JSON.

Parameters: ``seed``, ``depths``, ``out`` (JSON path), ``scenarios`` (names, see ``SCENARIOS``).
"""

import json

import cocotb
import numpy as np

from tb.tensor.driver import EngineDriver, compare
from tb.tensor.program import Program, rand_codes


def gemm_program(cfg, rng, *, tiles, fmt_s="bf16", fmt_x="bf16", n=None, mx=None,
                 packed=False):
    """``tiles`` back-to-back full-array matmuls (K = rows, M = cols, N = one bank), each with
    its own stationary, into banks ``i % psum_banks``; then one read of the last bank.
    ``packed``: the packed mode of the format (double-rate FP8, x4 MX), K = P x rows."""
    prog = Program(cfg, rng)
    R, C = cfg.pe_rows, cfg.pe_cols
    N = n or cfg.psum_bank_fp32
    for i in range(tiles):
        b = i % cfg.psum_banks
        if packed and mx:
            el = cfg.mx_element_formats[mx]
            K = cfg.mx_pack * R
            nb = -(-K // cfg.mx_block)
            prog.load_packed(rand_codes(rng, el, (K, C), 0.0), el.name, cfg.mx_pack,
                             scales=rng.integers(120, 134, (nb, C)))
            prog.matmul_mx_x4(rand_codes(rng, el, (K, N), 0.0), rng.integers(120, 134, (nb, N)),
                              mx, bank=b, s_mx_fmt=mx)
        elif packed:
            K = cfg.fp8_pack * R
            prog.load_packed(rand_codes(rng, cfg.fmt(fmt_s), (K, C), 0.0), fmt_s, cfg.fp8_pack)
            prog.matmul_fp8x2(rand_codes(rng, cfg.fmt(fmt_x), (K, N), 0.0), fmt_x, bank=b)
        elif mx:
            el = cfg.mx_element_formats[mx]
            nb = -(-R // cfg.mx_block)
            prog.load(rand_codes(rng, el, (R, C), 0.0), el.name,
                      scales=rng.integers(120, 134, (nb, C)))
            prog.matmul_mx(rand_codes(rng, el, (R, N), 0.0), rng.integers(120, 134, (nb, N)),
                           mx, bank=b, s_mx_fmt=mx)
        else:
            prog.load(rand_codes(rng, cfg.fmt(fmt_s), (R, C), 0.0), fmt_s)
            prog.matmul(rand_codes(rng, cfg.fmt(fmt_x), (R, N), 0.0), fmt_x, bank=b)
    prog.read((tiles - 1) % cfg.psum_banks, N)
    return prog


def scenarios(cfg):
    """name -> program keyword arguments."""
    out = {}
    if "bf16" in cfg.formats:
        out.update({"single_bf16": dict(tiles=1), "b2b_bf16": dict(tiles=8)})
    narrow = [f for f in cfg.formats if cfg.fmt(f).width == 8]
    # b2b_fp8 / b2b_mx: the fastest mode the config has (packed when it has it); the
    # *_unpacked twins run the same formats one element per PE step
    if narrow:
        out["b2b_fp8"] = dict(tiles=8, fmt_s=narrow[0], fmt_x=narrow[0],
                              packed=bool(cfg.fp8_pack))
        if cfg.fp8_pack:
            out["b2b_fp8_unpacked"] = dict(tiles=8, fmt_s=narrow[0], fmt_x=narrow[0])
    if "fp32" in cfg.formats:
        out["b2b_fp32"] = dict(tiles=8, fmt_s="fp32", fmt_x="fp32")
    if cfg.mx_formats:
        out["b2b_mx"] = dict(tiles=8, mx=cfg.mx_formats[0], packed=bool(cfg.mx_pack))
        if cfg.mx_pack:
            out["b2b_mx_unpacked"] = dict(tiles=8, mx=cfg.mx_formats[0])
    return out


@cocotb.test()
async def bench(dut):
    drv = EngineDriver(dut)
    cfg, p, seed = drv.cfg, drv.params, drv.seed
    rng = np.random.default_rng(seed)
    want = p.get("scenarios")
    R, C = cfg.pe_rows, cfg.pe_cols
    res = {}
    for name, kw in scenarios(cfg).items():
        if want and name not in want:
            continue
        prog = gemm_program(cfg, rng, **kw)
        await drv.reset()
        out = await drv.run(prog)
        wall = out["run_seconds"]
        compare(out["beats"], prog, seed, f"bench {name}")
        window = out["t_last_write"] - out["t_first_in"] + 1
        res[name] = {
            "macs": prog.macs, "window_cycles": window,
            "first_mv_to_last_write": out["t_last_write"] - out["t_first_mv"] + 1,
            "utilization": prog.macs / (R * C * window),
            "total_cycles": out["cycles"], "wall_seconds": wall,
            "sim_cycles_per_second": out["cycles"] / wall if wall > 0 else 0.0,
            # CPU time of the simulator process (model + cocotb): steadier than wall time on a
            # shared machine
            "cpu_seconds": out["cpu_seconds"],
            "sim_cycles_per_cpu_second": (out["cycles"] / out["cpu_seconds"]
                                          if out["cpu_seconds"] > 0 else 0.0),
        }
        dut._log.info(f"{name}: {res[name]}")
    with open(p["out"], "w") as fh:
        json.dump(res, fh, indent=2)
