# SPDX-License-Identifier: Apache-2.0
"""Programs that pin the scalar engine's read-after-write rule (``rtl/scalar/engine.py``: a read
waits while the destination of the instruction before it, still being written, shares a memory,
a partition and bytes with it; ``golden.isasim.hooks.footprints_overlap``), for the golden
simulator alone (``tests/golden/test_isasim_scalar_hazard.py``) and against the core
(``tb/core/tb_scalar_hazard.py``).

Each program: an FP32 tile ``a`` and a tile ``y`` loaded from DRAM, the identity table, then two
back-to-back activations on the scalar engine: the first writes partitions ``[0, P/2)`` of
``y`` from ``a``; the second writes ``z`` from

* ``"overlap"``: the same partitions and bytes of ``y`` (the first one's destination): it waits;
* ``"other_partitions"``: the same bytes of ``y`` in partitions ``[P/2, P)``: it does not;
* ``"other_bytes"``: partitions ``[0, P/2)`` of ``a`` (no byte in common): it does not.

``y`` and ``z`` are stored to DRAM. The figure is ``gap``: the cycles between the two
activations' retires."""

from __future__ import annotations

import dataclasses

import numpy as np

from golden.activation import FUNCTION_IDS
from golden.kernel import Kernel
from rtl.isa import Instr

__all__ = ["VARIANTS", "hazard_program", "act_gap"]

VARIANTS = ("overlap", "other_partitions", "other_bytes")


def hazard_program(cfg, variant, seed=0, n=64, dram_base=0):
    """The :class:`golden.kernel.KernelProgram` of ``variant`` (one of :data:`VARIANTS`): FP32
    tiles of ``n`` elements per partition over every partition."""
    if variant not in VARIANTS:
        raise ValueError(f"variant must be one of {VARIANTS}, not {variant!r}")
    P = cfg.partitions
    if P < 2:
        raise ValueError(f"hazard_program needs cfg.partitions >= 2, not {P}")
    h = P // 2
    rng = np.random.default_rng(seed)
    k = Kernel(cfg, dram_bytes=1 << 16, dram_base=dram_base)
    x = k.dram_tensor("x", codes=rng.standard_normal((P, n)).astype(np.float32).view(np.uint32),
                      dtype="fp32")
    x2 = k.dram_tensor("x2", codes=rng.standard_normal((P, n)).astype(np.float32).view(np.uint32),
                       dtype="fp32")
    a, y, z = (k.sbuf_tile(P, n, "fp32", name) for name in ("a", "y", "z"))
    k.load(a, x)
    k.load(y, x2)
    k.memset(z, 0.0)
    k.load_table("identity")

    def rows(t, lo):
        return dataclasses.replace(t.ap(), start=lo, count=h)
    src = {"overlap": rows(y, 0), "other_partitions": rows(y, h), "other_bytes": rows(a, 0)}
    dst2 = rows(z, h if variant == "other_partitions" else 0)
    fid = FUNCTION_IDS["identity"]
    for dst, s, reads, writes in ((rows(y, 0), rows(a, 0), [a], [y]),
                                  (dst2, src[variant], [y, a], [z])):
        k.instr(Instr(op="activation", aps={"ap0": dst, "ap1": s}, imm={"func": fid}),
                reads=reads, writes=writes)
    oy = k.dram_tensor("y_out", (P, n), "fp32")
    oz = k.dram_tensor("z_out", (P, n), "fp32")
    k.store(oy, y)
    k.store(oz, z)
    k.output("y", oy)
    k.output("z", oz)
    return k.build()


def act_gap(ops, retires):
    """Cycles between the retires of the last two ``activation`` instructions of the scalar
    engine: ``ops`` its opcodes in program order, ``retires`` their retire cycles."""
    idx = [i for i, op in enumerate(ops) if op == "activation"]
    if len(idx) < 2 or len(retires) != len(ops):
        raise ValueError(f"act_gap needs two activations and one retire per instruction, not "
                         f"{ops} with {len(retires)} retires")
    return retires[idx[-1]] - retires[idx[-2]]
