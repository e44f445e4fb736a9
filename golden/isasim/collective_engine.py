# SPDX-License-Identifier: Apache-2.0
"""Collective engine hooks of the golden ISA simulator: the CC queue's opcodes of :mod:`rtl.isa`
(``all_reduce``, ``reduce_scatter``, ``all_gather``, ``all_to_all``, ``send_recv``;
docs/collectives.md §12).

The source (``ap1``) and the destination (``ap0``) are read and written partition-major: the
``k``-th element of a rank's buffer is element ``k % e`` of partition ``start + k // e`` (``e``
elements per partition). The data of every rank is combined by
:mod:`golden.collective.algos` (FP32 partial sums, one RNE rounding into ``ap0``'s dtype).

A simulator on its own (``sim.ring`` is ``None``) is a ring of one rank: the collective is a
local copy (all-reduce and reduce-scatter: widened to FP32 and rounded once into the
destination's dtype), timed like an element stream (:meth:`IsaSim.default_timing`). With a
ring attached (:class:`golden.collective.multicore.MultiCoreSim` sets ``sim.ring`` and
``sim.rank``), the hook checks the instruction on its own rank, then hands a
:class:`CCRequest` to ``sim.ring.join``, which returns this rank's output codes and the
collective's ``(start, done)`` cycles, or raises the :class:`Fault` every rank reports.

Checks, in order (ERR_INFO 0 unless said): ``E_OPCODE`` a reduce ``op`` other than
``ALU_ADD``/``ALU_MAX``/``ALU_MIN``; ``E_SHAPE`` ``send_recv``'s ``d >= n``; ``E_FORMAT``
(info: the AP slot) a reduction's dtype not FP32, BF16 or FP16, or a move's (gather,
all-to-all, send_recv) not one of those or FP8, or its ``ap0`` dtype not ``ap1``'s; the APs
(:meth:`IsaSim.check_ap`, info the slot); ``E_SHAPE`` sizes that do not fit ``n`` ranks of
``N`` source elements: ``all_reduce``/``send_recv`` ``ap0`` has ``N``; ``reduce_scatter`` the
rank's chunk (:func:`golden.collective.schedule.chunk_bounds`); ``all_gather`` ``n N``;
``all_to_all`` ``N``, a multiple of ``n``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from golden.collective import algos
from golden.collective.schedule import chunk_bounds
from golden.isasim.errors import E_FORMAT, E_OPCODE, E_SHAPE, Fault
from golden.isasim.hooks import SLOT_INDEX, ZERO_AP, ap_access, register_op
from rtl.isa import ALU_ADD, ALU_MAX, ALU_MIN, ALU_NAMES, OPS_BY_NAME

__all__ = ["CC_REDUCE_OPS", "CCRequest", "cc_request", "run_local", "COLLECTIVE_OF"]

#: Reduce ``op`` immediate (an ``rtl.isa`` ALU code) -> :data:`golden.collective.algos.REDUCE_OPS`
#: name.
CC_REDUCE_OPS = {ALU_ADD: "add", ALU_MAX: "max", ALU_MIN: "min"}
#: CC opcode name -> the name of its collective in :mod:`golden.collective.perf`.
COLLECTIVE_OF = {"all_reduce": "all_reduce", "reduce_scatter": "reduce_scatter",
                 "all_gather": "all_gather", "all_to_all": "all_to_all",
                 "send_recv": "permute"}
_REDUCING = ("all_reduce", "reduce_scatter")


@dataclass(frozen=True)
class CCRequest:
    """One rank's collective instruction, checked, as the ring receives it.

    ``rank``; ``op`` (the opcode name); ``reduce`` (``"add"``, ``"max"``, ``"min"`` or
    ``None``); ``stream``; ``d`` (send_recv's offset, else 0); ``src_dtype``, ``dst_dtype``;
    ``src_elems``, ``dst_elems`` (elements of the whole buffer); ``codes`` (the source's
    element codes, flat, partition-major); ``ready`` (the cycle this rank's engine can start
    it).
    """

    rank: int
    op: str
    reduce: str | None
    stream: int
    d: int
    src_dtype: str
    dst_dtype: str
    src_elems: int
    dst_elems: int
    codes: np.ndarray
    ready: int


def _elems(ap):
    n = ap.num_partitions
    for _s, k in ap.dims:
        if k == 0:
            break
        n *= k
    return n


def cc_request(sim, ins, n, rank, ready=0):
    """Check ``ins`` (a CC instruction of rank ``rank`` on a ring of ``n``) as the module
    docstring lists, read its source; ``(CCRequest, dst AP)`` or :class:`Fault`."""
    red = None
    if ins.op in _REDUCING:
        code = ins.imm.get("op", 0)
        if code not in CC_REDUCE_OPS:
            name = ALU_NAMES[code] if code < len(ALU_NAMES) else code
            raise Fault(E_OPCODE, 0, f"{ins.op} op must be one of {dict(CC_REDUCE_OPS)}, "
                                     f"not {code} ({name})")
        red = CC_REDUCE_OPS[code]
    d = ins.imm.get("d", 0)
    if d >= n:
        raise Fault(E_SHAPE, 0, f"send_recv d must be in [0, {n - 1}] on a ring of {n}, "
                                f"not {d}")
    denc, senc = ins.aps.get("ap0", ZERO_AP), ins.aps.get("ap1", ZERO_AP)
    allowed = algos.REDUCE_DTYPES if red is not None else algos.MOVE_DTYPES
    for slot, enc in (("ap1", senc), ("ap0", denc)):
        if enc.dtype not in allowed:
            raise Fault(E_FORMAT, SLOT_INDEX[slot], f"{ins.op} {slot} dtype must be one of "
                                                    f"{list(allowed)}, not {enc.dtype}")
    if red is None and denc.dtype != senc.dtype:
        raise Fault(E_FORMAT, SLOT_INDEX["ap0"], f"{ins.op} moves codes: ap0 dtype must be "
                                                 f"ap1's {senc.dtype}, not {denc.dtype}")
    dst, src = sim.check_ap(denc, "ap0"), sim.check_ap(senc, "ap1")
    ns, nd = _elems(src), _elems(dst)
    if ins.op == "reduce_scatter":
        lo, hi = chunk_bounds(ns, n)[rank]
        want = hi - lo
    elif ins.op == "all_gather":
        want = n * ns
    else:
        want = ns
    if ins.op == "all_to_all" and ns % n:
        raise Fault(E_SHAPE, 0, f"all_to_all ap1 elements must be a multiple of the ring "
                                f"size {n}, not {ns}")
    if nd != want:
        raise Fault(E_SHAPE, 0, f"{ins.op} ap0 must have {want} elements for {ns} source "
                                f"elements on a ring of {n} (rank {rank}), not {nd}")
    codes = sim.read_ap(src).reshape(-1)
    req = CCRequest(rank=rank, op=ins.op, reduce=red, stream=ins.imm.get("stream", 0), d=d,
                    src_dtype=senc.dtype, dst_dtype=denc.dtype, src_elems=ns, dst_elems=nd,
                    codes=codes, ready=ready)
    return req, dst


def run_local(reqs, n):
    """Output codes of every rank (a list, rank order) of the agreeing, checked requests
    ``reqs`` (rank order, ``n`` of them), from :mod:`golden.collective.algos`."""
    r0 = reqs[0]
    data = [q.codes for q in reqs]
    if r0.op == "all_reduce":
        res = algos.all_reduce(data, r0.src_dtype, r0.reduce, out_dtype=r0.dst_dtype)
    elif r0.op == "reduce_scatter":
        res = algos.reduce_scatter(data, r0.src_dtype, r0.reduce, out_dtype=r0.dst_dtype)
    elif r0.op == "all_gather":
        res = algos.all_gather(data, r0.src_dtype)
    elif r0.op == "all_to_all":
        res = algos.all_to_all(data, r0.src_dtype)
    else:
        res = algos.permute(data, r0.src_dtype, [(r + r0.d) % n for r in range(n)])
    return [np.asarray(o).reshape(-1) for o in res.outputs]


def _cc_execute(sim, ins):
    ring = sim.ring
    st = sim.engine_state.setdefault("cc", {"free": 0})
    if ring is None:
        req, dst = cc_request(sim, ins, 1, 0)
        out = run_local([req], 1)[0]
        st["span"] = None
    else:
        ready = max(getattr(sim, "cur_issue", 0), st["free"])
        req, dst = cc_request(sim, ins, ring.n, sim.rank, ready)
        out, start, done = ring.join(req)
        st["span"] = (start, done)
    sim.write_ap(dst, np.asarray(out, np.uint32).reshape(dst.num_partitions, -1))


def _cc_timing(sim, ins, issue):
    st = sim.engine_state.setdefault("cc", {"free": 0})
    span = st.get("span")
    if span is None:                # a ring of one: a local element stream
        return sim.default_timing("cc", ins, issue)
    st["free"] = span[1]            # one collective at a time
    return span


for _name in COLLECTIVE_OF:
    assert OPS_BY_NAME[_name].engine == "cc", _name
    register_op(_name, _cc_execute, _cc_timing, ap_access)
