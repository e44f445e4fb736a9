# SPDX-License-Identifier: Apache-2.0
"""``make bench BENCH=activation``: the Scalar engine's accuracy contract and the function
unit's throughput (``build/bench/activation.json``, ``build/bench/activation_accuracy.csv``).

Accuracy: for every function, the golden model (= the hardware bit for bit, see
``tests/test_act_function.py``) against the float64 reference over **every** BF16 input (BF16
output: RNE of the FP32 result) and over 1,048,576 FP32 inputs plus every BF16 input (FP32
output); max ULP error in the output format (``golden.activation.ulp_error``). The CSV has one
row per function and output format: ``function, format, domain, inputs, max_ulp, worst_input``.

Throughput, the engine (amaranth.sim, ``small`` preset, ``rtl/scalar/engine.py``): ``STREAM``
ACTIVATIONs of 512 elements per partition offered back to back (checked bit for bit);
``scalar_elems_per_lane_cycle`` = 512 / the steady-state cycles per instruction (the spacing
of consecutive ``done``s), ``instruction_overhead_cycles`` = that spacing - 512 (the fixed cost
per instruction when instructions follow each other, as the public ~60-cycle figure is);
``engine_instruction_latency_cycles_512`` = one instruction alone, ``instr.valid`` to ``done``
(the pipeline fill, paid once by a stream). The function unit alone (``unit_*``, one lane,
``rtl/scalar/function.py``): 512 elements streamed after a table load; elements per cycle of
the input stream, and first-in to last-out minus 512.
"""

import csv
import time
from pathlib import Path

import numpy as np

from golden.activation import (DOMAINS, FUNCTIONS, evaluate, reference, table, table_image,
                               ulp_error)
from golden.formats import convert_rne_bits, decode
from rtl.config import BF16, FP32
from tb.scalar.rig import write_table

NAME = "activation"
OUT = Path(__file__).resolve().parent.parent / "build" / "bench"
N_FP32 = 1 << 20
FREE = 512
STREAM = 4                           # instructions back to back for the engine figures


def _f64(bits):
    with np.errstate(invalid="ignore"):
        return np.asarray(bits, np.uint32).view(np.float32).astype(np.float64)


def fp32_inputs(seed=2026):
    """1,048,576 finite FP32 inputs (a quarter each: uniform bit patterns, uniform in
    [-20, 20], uniform in [-2, 2], uniform magnitudes 2^-30..2^30 with random sign)."""
    rng = np.random.default_rng(seed)
    k = N_FP32 // 4
    mag = np.exp2(rng.uniform(-30, 30, k)) * rng.choice([-1.0, 1.0], k)
    parts = [rng.integers(0, 1 << 32, k, dtype=np.uint32),
             np.asarray(rng.uniform(-20, 20, k), np.float32).view(np.uint32),
             np.asarray(rng.uniform(-2, 2, k), np.float32).view(np.uint32),
             np.asarray(mag, np.float32).view(np.uint32)]
    return np.concatenate(parts).astype(np.uint32)


def _domain_mask(name, x):
    v = _f64(x)
    ok = np.isfinite(v)
    d = DOMAINS[name]
    if d is not None:
        ok &= (v >= d[0]) & (v <= d[1])
    return ok


def accuracy_rows():
    all_bf16 = np.arange(1 << 16, dtype=np.uint32) << 16
    xf = np.concatenate([fp32_inputs(), all_bf16])
    rows = []
    for name in FUNCTIONS:
        tab = table(name)
        dom = "all finite" if DOMAINS[name] is None else f"[{DOMAINS[name][0]}, {DOMAINS[name][1]}]"
        xb = all_bf16[_domain_mask(name, all_bf16)]
        yb = convert_rne_bits(evaluate(tab, xb), BF16)
        eb = ulp_error(decode(yb, BF16).astype(np.float64), reference(name, _f64(xb)), BF16)
        x = xf[_domain_mask(name, xf)]
        e = ulp_error(_f64(evaluate(tab, x)), reference(name, _f64(x)), FP32)
        for fmt, xs, err in (("bf16", xb, eb), ("fp32", x, e)):
            i = int(np.argmax(err))
            rows.append({"function": name, "format": fmt, "domain": dom, "inputs": len(xs),
                         "max_ulp": round(float(err[i]), 4),
                         "worst_input": f"{_f64(xs[i]):.9g}", "segments": tab.segments})
    return rows


def throughput(cfg, name="exp"):
    from rtl.scalar.function import FunctionUnit
    from tb.amsim import SimBench
    dut = FunctionUnit(cfg)
    bench = SimBench(dut)
    x = np.asarray(np.random.default_rng(1).uniform(-10, 10, FREE), np.float32).view(np.uint32)
    img = table_image(table(name), cfg)
    res = {}

    async def job(ctx):
        await write_table(ctx, dut, img)
        outs, taken, last_out = [], 0, None
        for c in range(FREE + dut.signature.latency + 16):     # bounded
            feed = taken < FREE
            ctx.set(dut.i.valid, feed)
            ctx.set(dut.i.payload.x, int(x[taken]) if feed else 0)
            await ctx.tick()
            if feed:
                taken += 1
                if taken == FREE:
                    res["in_cycles"] = c + 1
            if ctx.get(dut.o.valid):
                outs.append(ctx.get(dut.o.payload.y))
                last_out = c + 1
        res["outs"], res["last_out"] = outs, last_out
    t0 = time.monotonic()
    bench.run(job)
    secs = time.monotonic() - t0
    assert (np.array(res["outs"], np.uint32) == evaluate(table(name), x)).all(), "not bit-exact"
    overhead = res["last_out"] - FREE
    return {"scalar_elems_per_lane_cycle": FREE / res["in_cycles"],
            "instruction_overhead_cycles": overhead,
            "scalar_elems_per_lane_cycle_with_fill": FREE / (FREE + overhead),
            "function_unit_latency_cycles": dut.signature.latency,
            "sim_seconds": round(secs, 2)}


def engine_throughput():
    """ACTIVATIONs of 512 elements per partition (FP32 SBUF -> BF16 SBUF, reset_reduce) on the
    small preset's engine (P = 4 lanes; the lanes run in parallel, so per-lane figures do not
    depend on P), checked bit for bit against golden.activation.execute: one alone (its
    latency, instr.valid -> done) and STREAM back to back (the engine overlaps them; the
    steady-state cost per instruction is the spacing of their ``done``s)."""
    from golden.activation import FUNCTION_IDS, REDUCE_RESET_REDUCE, ActInstr, execute
    from golden.ap import AP, PSUM, SBUF
    from rtl.config import get_preset
    from tb.amsim import SimBench
    from tb.scalar.rig import EngineRig, run_program
    small = get_preset("small")
    P = small.partitions
    rng = np.random.default_rng(3)
    sb = np.zeros((P, small.sbuf_bytes_per_partition), np.uint8)
    sb[:, :4 * FREE] = rng.uniform(-4, 4, (P, FREE)).astype(np.float32).view(np.uint8)
    ins = ActInstr(func=FUNCTION_IDS["exp"], src=AP(memory=SBUF, num_partitions=P,
                                                          dims=((1, FREE),)),
                   dst=AP(memory=SBUF, num_partitions=P, offset=4 * FREE, elem_bytes=2,
                          dims=((1, FREE),)), dst_dtype=2, reduce_cmd=REDUCE_RESET_REDUCE)
    rig = EngineRig(small)
    bench = SimBench(rig)
    out = {}
    for k in (1, STREAM):
        cyc = []
        prog = [ins] * k
        st, sb_out, acc = run_program(bench, rig, table_image(table("exp"), small), prog, sb,
                                      cycles=cyc)
        mems = {SBUF: sb.copy(), PSUM: np.zeros((P, small.psum_bytes_per_partition), np.uint8)}
        acc_g = np.zeros(P, np.uint32)
        assert st == [execute(small, i, mems, acc_g) for i in prog] \
            and (mems[SBUF] == sb_out).all() and (acc == acc_g).all(), "engine not bit-exact"
        out[k] = cyc
    single = out[1][0] + 1                       # cycles from instr.valid to done, inclusive
    per = (out[STREAM][-1] - out[STREAM][0]) / (STREAM - 1)
    return {"scalar_elems_per_lane_cycle": round(FREE / per, 4),
            "instruction_overhead_cycles": round(per - FREE, 2),
            "engine_instruction_latency_cycles_512": single,
            "engine_stream_cycles": out[STREAM][-1] + 1,
            "scalar_elems_per_lane_cycle_single": round(FREE / single, 4)}


def run(cfg):
    rows = accuracy_rows()
    OUT.mkdir(parents=True, exist_ok=True)
    with open(OUT / "activation_accuracy.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    fp32 = [r["max_ulp"] for r in rows if r["format"] == "fp32"]
    bf16 = [r["max_ulp"] for r in rows if r["format"] == "bf16"]
    unit = throughput(cfg)
    unit = {("unit_" + k if not k.startswith("function_unit") else k): v
            for k, v in unit.items()}
    return {**engine_throughput(), **unit,
            "max_ulp_fp32_worst_function": max(fp32), "max_ulp_bf16_worst_function": max(bf16),
            "functions_within_goal": sum(
                all(r["max_ulp"] <= (2.0 if r["format"] == "fp32" else 1.0)
                    for r in rows if r["function"] == n) for n in FUNCTIONS),
            "table_segments_max": max(r["segments"] for r in rows)}
