# SPDX-License-Identifier: Apache-2.0
"""``KIND=activation``: every FP32 input of every activation function against the reference.

The 2**32 input bit patterns are cut into ``n`` equal ranges (``n`` a power of two, default
4,096: 2**20 inputs per task); task ``i`` evaluates inputs ``[i * span, (i + 1) * span)`` with
the golden table evaluator (:func:`golden.activation.evaluate`, the hardware's arithmetic) for
each function and measures the error in FP32 ULPs at the float64 reference
(:func:`golden.activation.reference`, :func:`golden.activation.ulp_error`). It returns, per
function, the largest error and its first input, the count of finite inputs over the bound
(2 ULP, docs/scalar.md §2) and the count of non-finite results where the reference is finite or
the reverse (``ulp_error`` = inf). The reference's own error (float64: about 2**-52 relative,
``erf``/``erfc`` from libm within a few float64 ULPs) is below 2**-20 FP32 ULP, so a maximum is
exact to the three decimals the table states.

Parameters: ``functions`` (comma-separated names, default all 17).
"""

from __future__ import annotations

import numpy as np

from golden.activation import FUNCTIONS, evaluate, reference, table, ulp_error

#: docs/scalar.md §2: the FP32 error bound of every function.
BOUND = 2.0
#: inputs evaluated at once (memory: a few arrays of this many float64)
CHUNK = 1 << 18
#: upper bound of the reference's error in FP32 ULPs (float64 reference; see the docstring)
REF_ERROR_ULP = 2.0 ** -20


def functions(params):
    f = params.get("functions") or FUNCTIONS
    names = f.split(",") if isinstance(f, str) else list(f)
    for name in names:
        if name not in FUNCTIONS:
            raise ValueError(f"activation function must be one of {list(FUNCTIONS)}, "
                             f"not {name!r}")
    return names


def span(n):
    if isinstance(n, bool) or not isinstance(n, int) or n < 1 or n > 1 << 32 or n & (n - 1):
        raise ValueError(f"activation tasks must be a power of two in [1, 2**32], not {n!r}")
    return (1 << 32) // n


def run(params, index, ss):
    """Task ``index``: the inputs ``[index * span, (index + 1) * span)`` of every function."""
    n = int(params["n"])
    s = span(n)
    lo = index * s
    out = {"first": lo, "inputs": 0, "functions": {}}
    for name in functions(params):
        tab = table(name)
        worst, worst_x, over, nonfinite = 0.0, None, 0, 0
        for a in range(lo, lo + s, CHUNK):
            x = np.arange(a, min(a + CHUNK, lo + s), dtype=np.uint64).astype(np.uint32)
            with np.errstate(invalid="ignore", over="ignore"):
                xf = x.view(np.float32).astype(np.float64)
            y = evaluate(tab, x).view(np.float32).astype(np.float64)
            e = ulp_error(y, reference(name, xf))
            fin = np.isfinite(xf)
            nonfinite += int(np.count_nonzero(np.isinf(e) & fin))
            ef = np.where(fin & np.isfinite(e), e, 0.0)
            over += int(np.count_nonzero(ef > BOUND))
            j = int(np.argmax(ef))
            if ef[j] > worst:
                worst, worst_x = float(ef[j]), int(x[j])
        out["functions"][name] = {"max_ulp": worst, "worst_input": worst_x, "over_bound": over,
                                  "nonfinite_mismatch": nonfinite}
        out["inputs"] += s
    out["mismatches"] = sum(v["over_bound"] + v["nonfinite_mismatch"]
                            for v in out["functions"].values())
    if out["mismatches"]:
        out["status"] = "fail"
    return out


def summarize(results):
    """Per function: the largest error over the tasks run and its input, inputs over the bound;
    the (function, input) pairs evaluated, their rate per CPU second, and the fraction of 2**32
    covered."""
    per = {}
    for r in results:
        for name, v in r.get("functions", {}).items():
            p = per.setdefault(name, {"max_ulp": 0.0, "worst_input": None, "over_bound": 0,
                                      "nonfinite_mismatch": 0})
            if v["max_ulp"] > p["max_ulp"]:
                p["max_ulp"], p["worst_input"] = v["max_ulp"], v["worst_input"]
            p["over_bound"] += v["over_bound"]
            p["nonfinite_mismatch"] += v["nonfinite_mismatch"]
    for p in per.values():
        p["worst_input_hex"] = None if p["worst_input"] is None else f"0x{p['worst_input']:08X}"
    inputs = sum(r.get("inputs", 0) for r in results)
    cpu = sum(r.get("cpu_seconds", 0.0) for r in results)
    nf = max(1, len(per))
    return {"functions": per, "inputs": inputs,
            "inputs_per_cpu_second": round(inputs / cpu) if cpu else None,
            "fraction_of_fp32": inputs / nf / float(1 << 32),
            "reference_error_ulp": REF_ERROR_ULP, "bound_ulp": BOUND}
