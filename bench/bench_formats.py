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
    out = {**formats_arith.run(cfg), **formats_convert.run(cfg)}
    units = [k[:-len("_cases")] for k in out if k.endswith("_cases")]
    cases = sum(out[f"{u}_cases"] for u in units)
    secs = sum(out[f"{u}_cases"] / out[f"{u}_cases_per_second"] for u in units)
    return {"cases_per_second": cases / secs,
            "verilator_build_seconds": sum(out[f"{u}_verilator_build_seconds"] for u in units),
            **out}
