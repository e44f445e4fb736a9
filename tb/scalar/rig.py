# SPDX-License-Identifier: Apache-2.0
"""amaranth.sim rigs of the Scalar engine (every wait bounded): :class:`EngineRig`, the
:class:`rtl.scalar.engine.ScalarEngine` on an SBUF and a PSUM unit (backdoor preload/dump of both
memories, a table load, instructions in, status out), and :class:`FunctionDriver`, the
:class:`rtl.scalar.function.FunctionUnit` alone (load a table image, stream elements one per
cycle, collect the results)."""

import numpy as np
from amaranth.hdl import Elaboratable, Module
from amaranth.lib import wiring

from rtl.mem.sbuf import SBUF as SbufMem
from rtl.scalar.engine import ScalarEngine
from rtl.tensor.psum import PsumUnit
from rtl.scalar.isa import instr_layout
from tb.mem.rig import dump_sbuf, preload_sbuf

__all__ = ["EngineRig", "run_program", "pack_instr", "FunctionDriver", "write_table"]


class EngineRig(Elaboratable):
    """The engine on an SBUF (row ports ``act_rd``, ``act_wr`` and a priority port ``hog`` a
    testbench drives to steal bank cycles) and a PSUM unit (``act_rd``, ``act_wr``)."""

    def __init__(self, cfg):
        self.cfg = cfg
        self.sbuf = SbufMem(cfg, row_ports=("hog", "act_rd", "act_wr"), priority=("hog",))
        self.psum = PsumUnit(cfg, use_instances=False, row_ports=("act_rd", "act_wr"))
        self.eng = ScalarEngine(cfg, sbuf_latency=self.sbuf.signature.latency,
                                psum_latency=self.psum.signature.row_latency)

    def elaborate(self, platform):
        m = Module()
        m.submodules.sbuf, m.submodules.psum, m.submodules.eng = self.sbuf, self.psum, self.eng
        wiring.connect(m, self.eng.sbuf_rd, self.sbuf.act_rd)
        wiring.connect(m, self.eng.sbuf_wr, self.sbuf.act_wr)
        wiring.connect(m, self.eng.psum_rd, self.psum.act_rd)
        wiring.connect(m, self.eng.psum_wr, self.psum.act_wr)
        return m


def _ap(cfg, ap):
    if ap is None:
        return {"mem": 0, "start": 0, "count": 0, "esize": 0, "offset": 0,
                "dims": [{"step": 0, "num": 0}] * cfg.ap_dims}
    return {"mem": ap.memory, "start": ap.start_partition, "count": ap.num_partitions,
            "esize": ap.esize, "offset": ap.offset,
            "dims": [{"step": s, "num": n} for s, n in ap.slots(cfg.ap_dims)]}


def pack_instr(cfg, ins):
    """The engine's instruction payload (an int of ``instr_layout(cfg)``) from a
    ``golden.activation.ActInstr``."""
    return instr_layout(cfg).const({
        "opcode": ins.opcode, "func": ins.func, "reduce_cmd": ins.reduce_cmd, "sr": int(ins.sr),
        "dst": _ap(cfg, ins.dst), "src": _ap(cfg, ins.src), "scale_ap": _ap(cfg, ins.scale_ap),
        "bias_ap": _ap(cfg, ins.bias_ap), "dst_dtype": ins.dst_dtype,
        "src_dtype": ins.src_dtype, "scale_dtype": ins.scale_dtype,
        "bias_dtype": ins.bias_dtype, "scale_src": int(ins.scale_ap is not None),
        "bias_src": int(ins.bias_ap is not None), "scale": ins.scale, "bias": ins.bias,
    }).as_value().value


def run_program(bench, rig, image, instrs, sbuf_bytes, *, limit=4000, cycles=None, rng=None,
                p_hog=0.0, p_done=1.0, p_instr=1.0):
    """Load ``image`` (table words through ``tw``; ``None``: no load), preload SBUF with
    ``sbuf_bytes``, stream the instructions (each offered as soon as the previous one was
    taken: the engine overlaps them); returns ``(statuses, sbuf after, accumulators)``.
    ``cycles`` (a list) receives, per instruction, the cycle (counted from the first
    ``instr.valid``) in which its ``done`` was taken. With ``rng``: the SBUF hog port reads a
    random row of every partition in a cycle with probability ``p_hog`` (the engine's SBUF
    requests lose those cycles), ``done.ready`` is high with probability ``p_done`` and an
    instruction is offered with probability ``p_instr``. Bounded: ``limit`` cycles per
    instruction (a hang gives ``None`` statuses)."""
    cfg, eng = rig.cfg, rig.eng
    res = {}

    async def job(ctx):
        preload_sbuf(ctx, rig.sbuf, sbuf_bytes)
        for addr, word in sorted((image or {}).items()):
            ctx.set(eng.tw.valid, 1)
            ctx.set(eng.tw.payload.addr, addr)
            ctx.set(eng.tw.payload.data, word)
            await ctx.tick()
        ctx.set(eng.tw.valid, 0)
        statuses, done_at = [], []
        hog = rig.sbuf.hog.req
        hog_lay = hog.payload.shape()
        full = (1 << cfg.partitions) - 1
        packed = [pack_instr(cfg, ins) for ins in instrs]
        k = 0
        for c in range(limit * max(1, len(instrs))):        # bounded: a hang fails
            offer = k < len(instrs) and (rng is None or rng.random() < p_instr)
            ctx.set(eng.instr.valid, int(offer))
            if offer:
                ctx.set(eng.instr.payload.as_value(), packed[k])
            stall = rng is not None and rng.random() < p_hog
            ctx.set(hog.valid, int(stall))
            if stall:
                ctx.set(hog.payload, hog_lay.const(
                    {"addr": int(rng.integers(1 << len(hog.payload.addr))), "mask": full,
                     "we": 0}))
            ready = rng is None or rng.random() < p_done
            ctx.set(eng.done.ready, int(ready))
            took = offer and ctx.get(eng.instr.ready)      # handshakes at the coming edge
            if ready and ctx.get(eng.done.valid):
                statuses.append(ctx.get(eng.done.payload.status))
                done_at.append(c)
            await ctx.tick()
            k += int(took)
            if len(statuses) == len(instrs):
                break
        ctx.set(eng.instr.valid, 0)
        ctx.set(eng.done.ready, 0)
        ctx.set(hog.valid, 0)
        statuses += [None] * (len(instrs) - len(statuses))
        res["st"], res["cycles"] = statuses, done_at
        res["sbuf"] = dump_sbuf(ctx, rig.sbuf)
        res["acc"] = np.array([ctx.get(eng.acc[p]) for p in range(cfg.partitions)], np.uint32)
    bench.run(job)
    if cycles is not None:
        cycles.extend(res["cycles"])
    return res["st"], res["sbuf"], res["acc"]


async def write_table(ctx, dut, image):
    """Write a table image (``{address: word}``, :func:`golden.activation.table_image`) into a
    function unit's table port ``dut.tw``, one word a cycle."""
    for addr, word in sorted(image.items()):
        ctx.set(dut.tw.valid, 1)
        ctx.set(dut.tw.payload.addr, addr)
        ctx.set(dut.tw.payload.data, word)
        await ctx.tick()
    ctx.set(dut.tw.valid, 0)


class FunctionDriver:
    """Runs jobs on a :class:`tb.amsim.SimBench` of a ``FunctionUnit``."""

    def __init__(self, bench):
        self.bench = bench
        self.dut = bench.dut

    def run(self, image, xs, *, gap=None):
        """Load ``image`` ({addr: word}) then stream ``xs`` (uint32); returns the outputs in
        order (``np.uint32``). ``gap``: optional bool array, True = an idle cycle before that
        element (valid low), to check that valid, not position, carries the data."""
        dut = self.dut
        xs = [int(v) for v in np.asarray(xs, np.uint32)]
        gaps = [False] * len(xs) if gap is None else [bool(g) for g in gap]
        lat = dut.signature.latency
        out = []

        async def job(ctx):
            await write_table(ctx, dut, image)
            sched = []
            for x, g in zip(xs, gaps):
                if g:
                    sched.append(None)
                sched.append(x)
            for c in range(len(sched) + lat + 4):       # bounded: latency + slack
                x = sched[c] if c < len(sched) else None
                ctx.set(dut.i.valid, x is not None)
                ctx.set(dut.i.payload.x, 0 if x is None else x)
                await ctx.tick()
                if ctx.get(dut.o.valid):
                    out.append(ctx.get(dut.o.payload.y))
        self.bench.run(job)
        return np.array(out, dtype=np.uint32)
