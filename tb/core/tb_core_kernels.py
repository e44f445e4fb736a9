# SPDX-License-Identifier: Apache-2.0
"""cocotb: kernels (``tb/core/kernels.py``) on the whole core. For each kernel named in the
parameters, the host loads the DRAM image and the per-engine queues, runs them to the idle
interrupt, and every output in DRAM is compared bit for bit with the expected codes. Recorded:
cycles, each engine's busy cycles (the ``Q_BUSY`` counters) and the activity timeline."""

from __future__ import annotations

import time

import cocotb
import numpy as np

from rtl import isa
from rtl.core.neuroncore import ENGINES_BUILT
from golden.kernel import DramTensor
from tb.core.kernels import build_case, dram_traffic
from tb.core.driver import CoreTB


async def run_kernel(tb, case):
    """Run one :class:`~tb.core.kernels.KernelCase`; returns its record."""
    kp = case.kp
    queues = kp.place_queues()
    if kp.dram_base + len(kp.dram) > tb.ram.size:
        raise ValueError(f"kernel {case.name}: DRAM image of {len(kp.dram)} bytes at "
                         f"{kp.dram_base:#x} does not fit the {tb.ram.size}-byte AxiRam")
    tb.ram.write(kp.dram_base, bytes(kp.dram))
    await tb.soft_reset()
    log = []
    mon = cocotb.start_soon(tb.trace(log))
    c0 = await tb.counters()
    w0 = time.monotonic()
    cycles, err = await tb.run_queues(queues, case.name, dram_base=kp.dram_base,
                                      dram_limit=kp.dram_base + len(kp.dram))
    wall = time.monotonic() - w0
    mon.cancel()
    c1 = await tb.counters()
    if err >> 31:
        pc, info = await tb.rd("ERR_PC"), await tb.rd("ERR_INFO")
        raise AssertionError(tb.fail_text(case.name, f"error {err:#x} at index {pc}, info "
                                                     f"{info:#x}"))
    image = tb.ram.read(kp.dram_base, len(kp.dram))
    outputs = {}
    for name, where in kp.outputs.items():
        if not isinstance(where, DramTensor):
            raise ValueError(f"kernel {case.name}: output {name} must be a DRAM tensor to be "
                             f"read back from the core")
        outputs[name] = where.read(image, kp.dram_base)
    for name, want in case.expected.items():
        want = np.asarray(want)
        tb.check_equal(f"{case.name} {name}", outputs[name].ravel(), want.ravel(),
                       lambda j, n=want.shape[-1], t=name: f"{t}[{j // n}, {j % n}]")
    check = case.check(outputs)
    busy = {e: (c1[e] - c0[e]) & 0xFFFFFFFF for e in ENGINES_BUILT}
    busy["dma"] = (c1["dma"] - c0["dma"]) & 0xFFFFFFFF
    t0 = log[0][0] if log else 0
    # retire times per engine: the toggles of the trace's retire bits
    ne = len(isa.ENGINES)
    retires, prev = {e: [] for e in ENGINES_BUILT}, 0
    for c, v in log:
        for e in ENGINES_BUILT:
            b = ne + 1 + isa.ENGINES.index(e)
            if (v ^ prev) >> b & 1:
                retires[e].append(c - t0)
        prev = v
    return {"kernel": case.name, "cycles": cycles, "busy": busy,
            "instructions": kp.instructions(), "flops": case.flops,
            "dram_bytes": dram_traffic(kp), "checked": {n: int(np.asarray(v).size)
                                                        for n, v in case.expected.items()},
            "worst_vs_bound": {n: q for n, (_, q) in check.items()},
            "timeline": [(c - t0, v & ((2 << ne) - 1)) for c, v in log], "retires": retires,
            "trace": [(c - tb.start_cycle, v) for c, v in log if c >= tb.start_cycle],
            "wall_seconds": wall}


@cocotb.test()
async def core_kernels(dut):
    """Every kernel of the ``kernels`` parameter ([{"name", "seed", ...params}]) runs to idle
    with its outputs bit for bit equal to the expected ones."""
    tb = CoreTB(dut)
    await tb.reset()
    for spec in tb.params.get("kernels", [{"name": "gemm"}]):
        spec = dict(spec)
        name, seed = spec.pop("name"), spec.pop("seed", tb.seed)
        rec = await run_kernel(tb, build_case(name, tb.cfg, seed, **spec))
        tb.record(**rec)
