# SPDX-License-Identifier: Apache-2.0
"""Run a whole tensor-engine program from preloaded memories, unattended (no per-cycle Python).

The testbench writes the command words, stationary beats and moving beats straight into the
memories ``cmd_mem``, ``st_mem``, ``mv_mem``, sets the counts, pulses ``start`` and awaits
``done``; result beats land in ``res_mem``. With ``bubbles`` set, every stream source drops
``valid`` and the result sink drops ``ready`` on pseudo-random cycles (independent LFSR bits),
which exercises every back-pressure path of the engine.
"""

from amaranth.hdl import Module, Signal, Cat
from amaranth.lib import memory, wiring
from amaranth.lib.wiring import In, Out

from rtl.tensor.engine import TensorEngine

__all__ = ["TensorHarness"]


class TensorHarness(wiring.Component):
    """Memories -> :class:`TensorEngine` streams -> memory, with cycle counters.

    Parameters
    ----------
    cfg : CoreConfig
    cmd_depth, st_depth, mv_depth, res_depth : int
        Memory depths (commands, stationary beats, moving beats, result beats).

    Members
    -------
    start : In(1)
    n_cmd, n_st, n_mv : In(32)
        Entries to stream from each memory.
    bubbles : In(1)
        Random stalls on every stream (source valid and sink ready).
    done : Out(1)
        All commands taken, the engine idle, every result stored.
    cycles : Out(32)
        Cycles from ``start`` to ``done``.
    t_first_in : Out(32)
        Cycle (counted from ``start``) of the first stationary or moving beat accepted.
    t_first_mv : Out(32)
        Cycle of the first moving beat entering the array.
    t_last_write : Out(32)
        Cycle of the last PSUM write.
    n_res : Out(32)
        Result beats stored.
    mv_beats : Out(32)
        Moving (and identity) beats that entered the array.
    err, err_code : Out
        The engine's error status.
    """

    def __init__(self, cfg, *, cmd_depth=64, st_depth=256, mv_depth=1024, res_depth=1024):
        self.cfg = cfg
        self.engine = TensorEngine(cfg)
        self.tl = self.engine.tl
        self.depths = dict(cmd=cmd_depth, st=st_depth, mv=mv_depth, res=res_depth)
        super().__init__({
            "start": In(1), "n_cmd": In(32), "n_st": In(32), "n_mv": In(32), "bubbles": In(1),
            "done": Out(1), "cycles": Out(32), "t_first_in": Out(32), "t_first_mv": Out(32),
            "t_last_write": Out(32), "n_res": Out(32), "mv_beats": Out(32),
            "err": Out(1), "err_code": Out(3),
        })

    def elaborate(self, platform):
        m = Module()
        m.submodules.dut = dut = self.engine
        tl = self.tl
        d = self.depths
        running = Signal()
        lfsr = Signal(32, init=0xACE1_1234)
        m.d.sync += lfsr.eq(Cat(lfsr[1:], lfsr[0] ^ lfsr[10] ^ lfsr[30] ^ lfsr[31]))

        def source(name, stream, width, depth, count, stall):
            mem = memory.Memory(shape=width, depth=depth, init=[])
            m.submodules[f"{name}_mem"] = mem
            rd = mem.read_port(domain="comb")
            idx = Signal(32, name=f"{name}_idx")
            m.d.comb += [
                rd.addr.eq(idx),
                stream.payload.eq(rd.data),
                stream.valid.eq(running & (idx < count) & ~(self.bubbles & stall)),
            ]
            with m.If(stream.valid & stream.ready):
                m.d.sync += idx.eq(idx + 1)
            with m.If(self.start):
                m.d.sync += idx.eq(0)
            return idx

        cmd_idx = source("cmd", dut.cmd, tl.cmd.size, d["cmd"], self.n_cmd,
                         lfsr[0] & lfsr[1])
        source("st", dut.st, tl.lanes_st.size, d["st"], self.n_st, lfsr[2] & lfsr[3])
        source("mv", dut.mv, tl.lanes_in.size, d["mv"], self.n_mv, lfsr[4] & lfsr[5])

        res_mem = memory.Memory(shape=tl.lanes_out.size, depth=d["res"], init=[])
        m.submodules.res_mem = res_mem
        wp = res_mem.write_port()
        m.d.comb += [
            dut.res.ready.eq(~(self.bubbles & lfsr[6] & lfsr[7])),
            wp.addr.eq(self.n_res), wp.data.eq(dut.res.payload),
            wp.en.eq(dut.res.valid & dut.res.ready),
            self.err.eq(dut.err), self.err_code.eq(dut.err_code),
        ]
        with m.If(dut.res.valid & dut.res.ready):
            m.d.sync += self.n_res.eq(self.n_res + 1)

        seen_in = Signal()
        seen_mv = Signal()
        in_fire = (dut.st.valid & dut.st.ready) | (dut.mv.valid & dut.mv.ready) | dut.mv_fire
        with m.If(running):
            m.d.sync += self.cycles.eq(self.cycles + 1)
            with m.If(in_fire & ~seen_in):
                m.d.sync += [seen_in.eq(1), self.t_first_in.eq(self.cycles)]
            with m.If(dut.mv_fire & ~seen_mv):
                m.d.sync += [seen_mv.eq(1), self.t_first_mv.eq(self.cycles)]
            with m.If(dut.mv_fire):
                m.d.sync += self.mv_beats.eq(self.mv_beats + 1)
            with m.If(dut.psum_we):
                m.d.sync += self.t_last_write.eq(self.cycles)
            with m.If((cmd_idx == self.n_cmd) & ~dut.busy & ~self.start):
                m.d.sync += [running.eq(0), self.done.eq(1)]
        with m.If(self.start):
            m.d.sync += [running.eq(1), self.done.eq(0), self.cycles.eq(0), seen_in.eq(0),
                         seen_mv.eq(0), self.n_res.eq(0), self.mv_beats.eq(0),
                         self.t_first_in.eq(0), self.t_first_mv.eq(0),
                         self.t_last_write.eq(0)]
        return m
