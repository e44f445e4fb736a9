# SPDX-License-Identifier: Apache-2.0
"""Unit tests in Amaranth's own simulator: one simulator per design, reused across tests."""

__all__ = ["SimBench"]


class SimBench:
    """One ``amaranth.sim.Simulator`` per design, reused by every test of a module: building the
    simulator is most of the cost (seconds for a 4 x 4 array). :meth:`run` resets it (every
    signal and memory back to its initial value) and runs one testbench ``job(ctx)``."""

    def __init__(self, dut):
        from amaranth.sim import Simulator
        self.dut = dut
        self.sim = Simulator(dut)
        self.sim.add_clock(1e-8)
        self.sim.add_testbench(self._main)
        self._job = None
        self._fresh = True

    async def _main(self, ctx):
        if self._job is not None:
            await self._job(ctx)

    def run(self, job):
        self._job = job
        if not self._fresh:
            self.sim.reset()
        self._fresh = False
        try:
            self.sim.run()
        finally:
            self._job = None
