# SPDX-License-Identifier: Apache-2.0
"""cocotb: one kernel of ``tb/core/run_kernel.py`` on the whole core, with nothing of the kernel
in this module. The parameters name a DRAM image file (tensors, descriptors and the per-engine
queues, as :meth:`golden.kernel.KernelProgram.place_queues` laid them out) and a JSON file to
write; the host loads the image, runs the queues to the idle or error interrupt while tracing
the core's ``activity`` port, and writes the cycles, the first error (``ERR_CODE``,
``ERR_PC``, ``ERR_INFO``), the trace and the final bytes of every output region. The caller
compares those bytes with the golden simulator's (no expected value reaches this module)."""

from __future__ import annotations

import json
import resource
import time

_LOADED = time.time()       # wall clock when the simulator's Python imported this module
from pathlib import Path

import cocotb

from rtl import isa
from tb.core.driver import MAX_CYCLES, CoreTB


@cocotb.test()
async def run_kernel(dut):
    """Run the image of the ``image`` parameter; write the record to ``out``."""
    started = time.time()       # wall clock at the first simulated cycle (the warm overhead)
    ru = resource.getrusage(resource.RUSAGE_SELF)
    cpu = ru.ru_utime + ru.ru_stime     # this process's CPU seconds to that cycle
    tb = CoreTB(dut)
    p = tb.params
    await tb.reset()
    image = Path(p["image"]).read_bytes()
    base = int(p["dram_base"])
    tb.ram.write(base, image)
    queues = {e: tuple(q) for e, q in p["queues"].items()}
    log = []
    mon = cocotb.start_soon(tb.trace(log))
    w0 = time.monotonic()
    cycles, err = await tb.run_queues(queues, p.get("name", "kernel"), dram_base=base,
                                      dram_limit=base + len(image),
                                      max_cycles=max(MAX_CYCLES, int(p.get("max_cycles", 0))))
    wall = time.monotonic() - w0
    mon.cancel()
    t0 = tb.start_cycle
    rec = {"cycles": cycles, "wall_seconds": wall, "started": started, "loaded": _LOADED, "cpu_to_start": cpu,
           "trace": [(c - t0, v) for c, v in log if c >= t0], "error": None, "outputs": {}}
    if err >> 31:
        src = err >> isa.ERROR_BITS & 0b111
        rec["error"] = {"code": err & ((1 << isa.ERROR_BITS) - 1), "source": src,
                        "pc": await tb.rd("ERR_PC"), "info": await tb.rd("ERR_INFO")}
    else:
        for name, (addr, nbytes) in p["outputs"].items():
            rec["outputs"][name] = tb.ram.read(addr, nbytes).hex()
    Path(p["out"]).write_text(json.dumps(rec))
