# SPDX-License-Identifier: Apache-2.0
"""``make bench BENCH=formats``: throughput of every floating-point unit's testbench and the
cold Verilator build time of each (``build/bench/formats.json``).

Metrics: ``cases_per_second`` (all units' checked vectors over the time spent streaming them:
harness memory writes, simulation, read-back; golden model excluded) and
``verilator_build_seconds`` (sum of the cold builds), then the per-unit figures of
:mod:`bench.formats_arith` (multiplier, FMA, adder) and :mod:`bench.formats_convert`
(converter, widener).
"""

from bench import formats_arith, formats_convert

NAME = "formats"


def run(cfg):
    parts = [formats_arith.run(cfg), formats_convert.run(cfg)]
    out = {}
    for p in parts:
        out.update({k: v for k, v in p.items()
                    if k not in ("cases_per_second", "verilator_build_seconds")})
    cases = sum(p[k] for p in parts for k in p if k.endswith("_cases"))
    secs = sum(p[k] / p[k + "_per_second"] for p in parts for k in p if k.endswith("_cases"))
    out["cases_per_second"] = cases / secs
    out["verilator_build_seconds"] = sum(p["verilator_build_seconds"] for p in parts)
    return out
