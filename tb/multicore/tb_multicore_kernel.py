# SPDX-License-Identifier: Apache-2.0
"""cocotb: one multi-core kernel of ``tb/multicore/run_kernel.py`` on the multi-core top, with
nothing of the kernel in this module. The parameters name, per core, a DRAM image file
(tensors, descriptors and the per-engine queues, as
:meth:`golden.kernel.KernelProgram.place_queues` laid them out), its queues and output regions,
and a JSON file to write; the host loads every core's image, starts every core's queues and
runs them all to each core's idle or error interrupt while tracing every core's ``activity``
port and the valid of its ring TX link, and writes per core the cycles, the doorbell cycle,
the first error, the trace, the cycles of the TX flits and the final bytes of every output
region. The caller compares those bytes with the golden simulator's (no expected value
reaches this module)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import cocotb
from cocotb.triggers import ClockCycles, ReadOnly, RisingEdge

from rtl import isa
from tb.base import CLOCK_NS
from tb.core.driver import MAX_CYCLES
from tb.multicore.driver import MultiCoreTB


def tx_valid(dut, name):
    """The top-level signal ``name`` (core i's ring TX valid, named by the runner from the
    build's Verilog; an escaped Verilog name as VPI spells it), or ``None``."""
    if not name:
        return None
    for key in (name, f"\\{name} ", f"\\{name}\\"):
        try:
            return dut[key]
        except KeyError:
            continue
    return None


async def _changes(dut, sig, log):
    """Append ``(cycle, value)`` to ``log`` at every change of ``sig``, sampled at every rising
    clock edge (a combinational wire inside the top: no value-change callback for it)."""
    prev = 0
    while True:
        await RisingEdge(dut.clk)
        await ReadOnly()
        v = int(sig.value)
        if v != prev:
            log.append((int(cocotb.utils.get_sim_time("ns") // CLOCK_NS), v))
            prev = v


@cocotb.test()
async def run_multicore_kernel(dut):
    """Run every core's image of the ``cores`` parameter; write the record to ``out``."""
    tb = MultiCoreTB(dut)
    p = tb.params
    await tb.reset(link_down=0)
    cores = p["cores"]
    if len(cores) != tb.n:
        raise ValueError(f"the kernel has {len(cores)} ranks, the top {tb.n} cores")
    for c in tb.cores:              # as tb_multicore.py: semaphores and queues cleared
        await c.soft_reset()
    logs, flits, mons = [], [], []
    for i, (c, q) in enumerate(zip(tb.cores, cores)):
        c.ram.write(int(q["dram_base"]), Path(q["image"]).read_bytes())
        logs.append([])
        flits.append([])
        mons.append(cocotb.start_soon(c.trace(logs[i])))
        sig = tx_valid(dut, q.get("tx_valid"))
        if sig is not None:
            mons.append(cocotb.start_soon(_changes(dut, sig, flits[i])))
    limit = max(MAX_CYCLES, int(p.get("max_cycles", 0)))
    w0 = time.monotonic()

    async def one(i):
        c, q = tb.cores[i], cores[i]
        base = int(q["dram_base"])
        queues = {e: tuple(v) for e, v in q["queues"].items()}
        return await c.run_queues(queues, f"{p.get('name', 'kernel')} core {i}", dram_base=base,
                                  dram_limit=base + int(q["dram_bytes"]), max_cycles=limit)

    tasks = [cocotb.start_soon(one(i)) for i in range(tb.n)]
    res = [await t for t in tasks]
    await ClockCycles(dut.clk, 2)
    wall = time.monotonic() - w0
    for m in mons:
        m.cancel()
    rec = {"wall_seconds": wall, "cores": []}
    for i, (c, q, (cycles, err)) in enumerate(zip(tb.cores, cores, res)):
        t0 = c.start_cycle
        r = {"cycles": cycles, "start_cycle": t0, "trace": [(cy - t0, v) for cy, v in logs[i]
                                                             if cy >= t0],
             "tx_valid": ([(cy - t0, v) for cy, v in flits[i]]
                         if tx_valid(dut, q.get("tx_valid")) is not None else None),
             "error": None, "outputs": {}}
        if err >> 31:
            r["error"] = {"code": err & ((1 << isa.ERROR_BITS) - 1),
                          "source": err >> isa.ERROR_BITS & 0b111,
                          "pc": await c.rd("ERR_PC"), "info": await c.rd("ERR_INFO")}
        else:
            for name, (addr, nbytes) in q["outputs"].items():
                r["outputs"][name] = c.ram.read(addr, nbytes).hex()
        rec["cores"].append(r)
    Path(p["out"]).write_text(json.dumps(rec))
