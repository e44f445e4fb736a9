# SPDX-License-Identifier: Apache-2.0
"""Shared cocotb plumbing for the arithmetic testbenches: stream, time, record metrics."""

import json
import time

import numpy as np

from tb import env
from tb.fp_arith import designs
from tb.fp_arith.vectors import pack, unpack
from tb.vectors import VectorTB


class Stream:
    """Streams packed vectors through the ``VectorHarness`` top of ``unit``.

    Reads the config and params the runner passed, rebuilds the DUT object (layouts, latency),
    and records cases and simulation seconds per run to ``params["metrics"]`` (JSON lines).
    """

    def __init__(self, dut, unit):
        self.cfg, self.p = env.config(), env.params()
        self.seed = self.p["seed"]
        self.design = designs.rebuild(unit, self.cfg)
        self.tb = VectorTB(dut, designs.DEPTH)
        self.log = dut._log
        self.unit = unit

    def rng(self, salt):
        """A numpy generator for one part of the test, reproducible from the seed."""
        return np.random.default_rng([self.seed, salt])

    async def run(self, what, bubbles=False, **fields):
        """Stream one set of inputs (numpy arrays per input field); the output fields."""
        words = pack(self.design.in_layout, **fields)
        t0 = time.monotonic()
        c0 = self.tb.total_cycles
        out = await self.tb.run(words, bubbles=bubbles)
        dt = time.monotonic() - t0
        self.record(what, len(words), dt, self.tb.total_cycles - c0, bubbles)
        return unpack(self.design.out_layout, out)

    def record(self, what, cases, seconds, cycles, bubbles):
        rate = cases / seconds if seconds else float("inf")
        self.log.info("%s %s: %d cases in %.2f s (%.0f cases/s, %d cycles, bubbles=%s)",
                      self.unit, what, cases, seconds, rate, cycles, bubbles)
        path = self.p.get("metrics")
        if path:
            with open(path, "a") as fh:
                fh.write(json.dumps({"unit": self.unit, "test": what, "cases": cases,
                                     "seconds": seconds, "cycles": cycles,
                                     "bubbles": bubbles}) + "\n")

    def fail_text(self, what, nbad, total, lines, bubbles=False):
        return (f"seed={self.seed} {self.unit} {what} (bubbles={bubbles}): {nbad}/{total} "
                f"mismatches with golden, first:\n{lines}")
