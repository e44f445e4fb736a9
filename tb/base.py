# SPDX-License-Identifier: Apache-2.0
"""The one testbench base of every cocotb module (in the manner of cocotbext-axi's ``TB``).

:class:`TB` gives each test the config and parameters the runner passed
(:mod:`tb.env`), the clock and reset, generators reproducible from the printed seed, a bounded
wait that fails with a message naming what it waited for (no test can hang), failure texts that
carry the seed, and a metrics record (JSON lines) for the benchmarks.
"""

from __future__ import annotations

import json

import numpy as np
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, First, ReadOnly, RisingEdge, Timer

from tb import env

__all__ = ["TB", "CLOCK_NS"]

#: Clock period of every testbench (ns).
CLOCK_NS = 10


class TB:
    """Common state and helpers of a testbench on the top level ``dut``.

    Attributes
    ----------
    dut : cocotb handle of the top level (ports ``clk``, ``rst``).
    cfg : CoreConfig
        The config the design was built from.
    params : dict
        The runner's parameters (``seed`` among them).
    seed : int
    log : logging.Logger
    """

    def __init__(self, dut):
        self.dut = dut
        self.cfg = env.config()
        self.params = env.params()
        self.seed = int(self.params.get("seed", 0))
        self.log = dut._log
        self._clock = False

    # --- reproducible stimulus ------------------------------------------------------------
    def rng(self, *salt):
        """A numpy generator for one part of a test, reproducible from the seed."""
        return np.random.default_rng([self.seed, *salt])

    # --- clock, reset, waits --------------------------------------------------------------
    async def reset(self, cycles=2, **idle):
        """Start the clock (once), hold ``rst`` for ``cycles`` cycles with the inputs named in
        ``idle`` set to their values, release it and wait one more cycle."""
        dut = self.dut
        if not self._clock:
            # the clock toggles in the simulator's GPI layer (C++), not in a Python coroutine
            # woken twice a cycle: cocotb's default without COCOTB_TRUST_INERTIAL_WRITES is the
            # Python one, which cost the default tensor bench most of its wall time
            self._clock = Clock(dut.clk, CLOCK_NS, unit="ns", impl="gpi")
            self._clock.start()
        dut.rst.value = 1
        for name, value in idle.items():
            getattr(dut, name).value = value
        await ClockCycles(dut.clk, cycles)
        dut.rst.value = 0
        await RisingEdge(dut.clk)

    async def wait_high(self, signal, *, cycles, what):
        """Wait until ``signal`` is 1, at most ``cycles`` clock cycles; fail naming ``what``
        and the seed otherwise. One trigger for the whole wait (the signal's rising edge or
        the time limit, whichever comes first): no per-cycle Python. Ends in the read-only
        phase of the time step where ``signal`` was seen high."""
        await ReadOnly()                # values settled in this time step
        if int(signal.value):
            return
        limit = Timer(cycles * CLOCK_NS, unit="ns")
        fired = await First(RisingEdge(signal), limit)
        await ReadOnly()
        if fired is limit or not int(signal.value):
            raise AssertionError(self.fail_text(
                what, f"not done within {cycles} cycles (a hung or broken valid/done path)"))

    # --- results -------------------------------------------------------------------------
    def fail_text(self, what, detail):
        """A failure message with the seed (rerun with ``--seed``)."""
        return f"seed={self.seed} {what}: {detail}"

    def check_equal(self, what, got, want, describe, limit=8):
        """Assert ``got == want`` element-wise; the message lists the first mismatches as
        ``describe(i)`` lines with both values."""
        got, want = np.asarray(got), np.asarray(want)
        if len(got) != len(want):
            raise AssertionError(self.fail_text(what, f"{len(got)} results for {len(want)} "
                                                      f"expected"))
        bad = np.flatnonzero(got != want)
        if len(bad):
            lines = "\n".join(f"  {describe(int(j))}: got {int(got[j]):#x}, "
                              f"want {int(want[j]):#x}" for j in bad[:limit])
            raise AssertionError(self.fail_text(
                what, f"{len(bad)}/{len(want)} mismatches with golden, first:\n{lines}"))
        return len(want)

    def record(self, **row):
        """Log ``row`` and append it to the ``metrics`` JSON-lines file if the runner gave
        one (benchmarks read it)."""
        self.log.info(" ".join(f"{k}={v}" for k, v in row.items()))
        path = self.params.get("metrics")
        if path:
            with open(path, "a") as fh:
                fh.write(json.dumps(row) + "\n")
