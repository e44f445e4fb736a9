# SPDX-License-Identifier: Apache-2.0
"""Hierarchical area estimate of large arrays from synthesized smaller ones.

An N x N array keeps its hierarchy: one processing-element module instantiated ``pe_count(N)``
times plus the array's own logic (operand skew, edge registers, control), so for every additive
figure ``x`` (cells, flip-flops, transistors, um^2, LUTs, memory bits) yosys reports exactly

    x(N) = pe_count(N) * x_PE + edge_x(N).

``x_PE`` is read from the synthesized hierarchy (the PE does not depend on N). ``edge_x(N)`` is
measured at every synthesized size as ``x(N) - pe_count(N) * x_PE`` and fitted by a polynomial in N
of degree ``min(2, sizes - 1)`` (least squares); ``pe_count(N) = N^2`` is checked on every
synthesized size. The method is checked by fitting on all synthesized sizes but the largest and
comparing the prediction for the largest with its synthesis.
"""

from __future__ import annotations

import numpy as np

__all__ = ["METRICS", "edge_points", "fit_edge", "estimate", "check_estimate"]

#: Figures that add up over the hierarchy.
METRICS = ("cells", "flip_flops", "transistors", "nand2_equiv", "um2_sky130", "ecp5_luts",
           "memory_bits")
_MODULE_KEYS = {"nand2_equiv": "transistors"}


def _pe_value(res, pe_module, metric):
    """One PE with everything it instantiates."""
    m = res["modules"][pe_module]["tree"]
    if metric == "nand2_equiv":
        return m["transistors"] / 4
    return m[metric]


def edge_points(results, pe_module, metric):
    """``{N: (pe_count, pe_value, edge_value)}`` from synthesized array results keyed by N.

    A result's own ``pe_module`` entry (the PE module may be named per configuration) wins over
    the ``pe_module`` argument.
    """
    pts = {}
    for n, res in sorted(results.items()):
        pe_module = res.get("pe_module") or pe_module
        if pe_module not in res["modules"]:
            raise ValueError(f"array result at N={n} has no module {pe_module!r}; modules: "
                             f"{sorted(res['modules'])}")
        count = res["modules"][pe_module]["count"]
        if count != n * n:
            raise ValueError(f"array N={n} instantiates {pe_module!r} {count} times, not N^2")
        pe = _pe_value(res, pe_module, metric)
        pts[n] = (count, pe, res[metric] - count * pe)
    return pts


def fit_edge(points, degree=None):
    """Polynomial coefficients (highest first) of edge(N) fitted to ``{N: (_, _, edge)}``."""
    ns = np.array(sorted(points), dtype=float)
    ys = np.array([points[int(n)][2] for n in ns], dtype=float)
    deg = min(2, len(ns) - 1) if degree is None else degree
    if deg < 0:
        raise ValueError("need at least one synthesized size to fit the edge logic")
    return np.polyfit(ns, ys, deg) if deg > 0 else np.array([ys.mean()])


def _pe_standalone(res, metric):
    if metric == "nand2_equiv":
        return res["transistors"] / 4
    return res[metric]


def estimate(results, pe_module, sizes, metrics=METRICS, pe_results=None):
    """Estimated figures ``{N: {metric: value}}`` for ``sizes`` from synthesized ``results``.

    ``results`` maps synthesized N to a flow result (with ``modules``). ``pe_results`` maps a
    target N to the flow result of the PE synthesized alone at that size's configuration (its
    ports may depend on N, e.g. a column index); without it the PE of the largest synthesized
    size is used.
    """
    out = {n: {} for n in sizes}
    nmax = max(results)
    pe_results = pe_results or {}
    for metric in metrics:
        pts = edge_points(results, pe_module, metric)
        coef = fit_edge(pts)
        for n in sizes:
            pe = (_pe_standalone(pe_results[n], metric) if n in pe_results else pts[nmax][1])
            out[n][metric] = n * n * pe + float(np.polyval(coef, n))
    return out


def check_estimate(results, pe_module, metrics=METRICS):
    """Fit on all sizes but the largest, predict the largest: ``(N, {metric: (est, synth, rel)})``."""
    if len(results) < 2:
        raise ValueError("the estimate check needs at least two synthesized sizes")
    nmax = max(results)
    fit = {n: r for n, r in results.items() if n != nmax}
    # the PE of the predicted size as synthesized inside it (the same module synthesized alone)
    pe_mod = results[nmax].get("pe_module") or pe_module
    pe_tree = results[nmax]["modules"][pe_mod]["tree"]
    pe_res = {nmax: {**pe_tree}}
    est = estimate(fit, pe_module, [nmax], metrics, pe_results=pe_res)[nmax]
    out = {}
    for m in metrics:
        syn = results[nmax][m]
        rel = abs(est[m] - syn) / syn if syn else (0.0 if est[m] == 0 else float("inf"))
        out[m] = (est[m], syn, rel)
    return nmax, out
