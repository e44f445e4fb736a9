# SPDX-License-Identifier: Apache-2.0
"""Shared cocotb plumbing for the conversion testbenches: stream, compare, record metrics."""

import json
import time

import numpy as np

from tb import env
from tb.vectors import VectorTB
from tb.fp_convert.vectors import check_pack, unpack, first_mismatches


class StreamChecker:
    """Streams packed vectors through a ``VectorHarness`` top and compares with golden.

    Parameters
    ----------
    dut : cocotb handle of the harness top.
    design : the Python DUT object rebuilt from the same config and params (layouts).
    out_field : name of the output field compared.
    """

    def __init__(self, dut, design, out_field):
        self.cfg, self.p = env.config(), env.params()
        self.seed = self.p["seed"]
        self.design = design
        self.out_field = out_field
        self.tb = VectorTB(dut, self.p["depth"])
        self.log = dut._log

    def rng(self, salt):
        """A generator for one test, reproducible from the printed seed."""
        return np.random.default_rng([self.seed, salt])

    async def check(self, what, want, describe, bubbles=False, **fields):
        """Run one stream (``fields`` = numpy arrays per input field), compare with ``want``."""
        words = check_pack(self.design.in_layout, **fields)
        t0 = time.monotonic()
        out = await self.tb.run(words, bubbles=bubbles)
        dt = time.monotonic() - t0
        got = unpack(self.design.out_layout, out, self.out_field)
        nbad, txt = first_mismatches(got, want, describe)
        assert nbad == 0, (f"seed={self.seed} {what} (bubbles={bubbles}): {nbad}/{len(want)} "
                           f"mismatches with golden, first:\n{txt}")
        self.record(what, len(want), dt)

    def record(self, what, cases, seconds):
        rate = cases / seconds if seconds else float("inf")
        self.log.info("%s: %d cases bit-exact in %.2f s (%.0f cases/s)", what, cases, seconds,
                      rate)
        path = self.p.get("metrics")
        if path:
            with open(path, "a") as fh:
                fh.write(json.dumps({"test": what, "cases": cases, "seconds": seconds}) + "\n")
