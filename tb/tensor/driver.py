# SPDX-License-Identifier: Apache-2.0
"""cocotb side of :class:`tb.tensor.harness.TensorHarness`: preload a :class:`Program`, run it
unattended, read back the result beats and the cycle counters."""

import time

import numpy as np
from cocotb.triggers import RisingEdge

from tb.base import TB

__all__ = ["EngineDriver"]


class EngineDriver(TB):
    """Preload / start / await ``done`` on a ``TensorHarness`` top level (harness memory
    depths from ``params["depths"]``)."""

    def __init__(self, dut):
        super().__init__(dut)
        self.depths = self.params["depths"]

    async def reset(self):
        await super().reset(start=0, bubbles=0, n_cmd=0, n_st=0, n_mv=0)

    @classmethod
    def setup(cls, dut, salt):
        """``(cfg, params, seed, rng, driver)`` of one test: its seed is the run's seed plus
        ``salt`` (so the tests of one run draw different programs; the seed is in every
        failure message)."""
        drv = cls(dut)
        seed = drv.seed + salt
        return drv.cfg, drv.params, seed, np.random.default_rng(seed), drv

    async def run_checked(self, prog, seed, what, bubbles, err=None):
        """Reset, run ``prog`` with ``bubbles`` and check every read-out beat bit for bit
        (:func:`compare`); ``err``: the error code the program must end with (else none)."""
        await self.reset()
        out = await self.run(prog, bubbles=bubbles)
        if err is None:
            assert out["err"] == 0, (f"seed={seed} {what}: unexpected error code "
                                     f"{out['err_code']}")
        else:
            assert (out["err"], out["err_code"]) == (1, err), \
                f"seed={seed} {what}: err={out['err']} code={out['err_code']}, expected {err}"
        compare(out["beats"], prog, seed, what)
        return out

    def clear_psum(self):
        """Zero every PSUM entry through the simulator (the golden model starts at zero; PSUM
        is a memory, not cleared by reset)."""
        for b in range(self.cfg.psum_banks):
            mem = getattr(self.dut.dut.psum, f"bank{b}")
            for i in range(self.cfg.psum_bank_fp32):
                mem[i].value = 0

    async def run(self, prog, *, bubbles=False, timeout_cycles=None):
        """Run ``prog``; return a dict with ``beats`` (result words as lists of FP32 ints) and
        the counters ``cycles``, ``t_first_in``, ``t_first_mv``, ``t_last_write``,
        ``mv_beats``, ``err``, ``err_code``."""
        dut = self.dut
        self.clear_psum()
        for name, words in (("cmd", prog.cmds), ("st", prog.st), ("mv", prog.mv)):
            if len(words) > self.depths[name]:
                raise ValueError(f"program needs {len(words)} {name} words, harness holds "
                                 f"{self.depths[name]}")
            mem = getattr(dut, f"{name}_mem")
            for i, w in enumerate(words):
                mem[i].value = int(w)
        n_exp = len(prog.expected_beats())
        if n_exp > self.depths["res"]:
            raise ValueError(f"program reads {n_exp} beats, harness holds {self.depths['res']}")
        dut.n_cmd.value = len(prog.cmds)
        dut.n_st.value = len(prog.st)
        dut.n_mv.value = len(prog.mv)
        dut.bubbles.value = int(bubbles)
        dut.start.value = 1
        await RisingEdge(dut.clk)
        dut.start.value = 0
        await RisingEdge(dut.clk)
        limit = timeout_cycles or (20 * (len(prog.mv) + len(prog.st) + n_exp)
                                   + 200 * (len(prog.cmds) + 10) + 10000)
        # await done in chunks of simulated time (no per-cycle Python), bounded
        t0, c0 = time.monotonic(), time.process_time()
        try:
            await self.wait_high(dut.done, cycles=limit, what="tensor program (done)")
        except AssertionError as e:
            raise AssertionError(f"{e} (commands taken: {int(dut.cmd_idx.value)}/"
                                 f"{len(prog.cmds)})") from None
        run_seconds = time.monotonic() - t0
        cpu_seconds = time.process_time() - c0
        mem = dut.res_mem
        C = self.cfg.pe_cols
        n_res = int(dut.n_res.value)
        beats = []
        for i in range(n_res):
            w = int(mem[i].value)
            beats.append([(w >> (32 * c)) & 0xFFFFFFFF for c in range(C)])
        out = {"beats": beats, "run_seconds": run_seconds, "cpu_seconds": cpu_seconds}
        for s in ("cycles", "t_first_in", "t_first_mv", "t_last_write", "mv_beats", "err",
                  "err_code"):
            out[s] = int(getattr(dut, s).value)
        await RisingEdge(dut.clk)
        return out


def compare(beats, prog, seed, what=""):
    """Assert bit-exact equality of result beats with the program's golden read-out."""
    exp = prog.expected_beats()
    assert len(beats) == len(exp), (f"seed={seed} {what}: {len(beats)} result beats, "
                                    f"expected {len(exp)}")
    i = 0
    for bank, _n, bb in prog.reads:
        for j, e in enumerate(bb):
            got = beats[i]
            if got != e:
                bad = [(m, hex(got[m]), hex(e[m])) for m in range(len(e)) if got[m] != e[m]]
                raise AssertionError(f"seed={seed} {what}: read bank {bank} entry n={j}: "
                                     f"lanes (m, got, expected) {bad[:8]}")
            i += 1
