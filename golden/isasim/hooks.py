# SPDX-License-Identifier: Apache-2.0
"""The engine-opcode registry of the golden ISA simulator (:data:`OP_HOOKS`,
:func:`register_op`) and what the engine hooks share: access footprints, the decoders' AP
form check and their view of an encoded AP."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from golden.ap import AP, ELEM_BYTES, extent
from golden.isasim.errors import E_AP_FORM, Fault
from rtl.isa import OPS_BY_NAME, APEnc

__all__ = ["OpHook", "OP_HOOKS", "register_op", "SLOT_INDEX", "ZERO_AP", "footprint",
           "footprints_overlap", "elems_per_partition", "ap_access", "decoder_form",
           "decoder_ap", "dtype_code_of"]

#: AP slot name -> ERR_INFO of an AP/format/shape error.
SLOT_INDEX = {"ap0": 0, "ap1": 1, "ap2": 2}
#: An all-zero AP slot (memory code 0).
ZERO_AP = APEnc(mem=0, start=0, count=0, dtype="fp32", offset=0, dims=())


@dataclass(frozen=True)
class OpHook:
    """How the simulator runs one engine opcode.

    ``execute(sim, ins) -> None`` checks everything first (raising :class:`Fault`), then reads
    and writes ``sim``. ``timing(sim, ins, issue) -> (start, done[, macs[, complete]])`` gives
    the cycle the engine starts it, the cycle its last write is visible, its MACs and the cycle
    it completes to its sequencer (default ``done``; the tensor engine's instructions without a
    post complete at dispatch) (``None``: :meth:`IsaSim.default_timing`).
    ``access(sim, ins) -> [(kind, mem, parts, lo, hi)]`` its footprint for :func:`find_races`
    (``None``: the APs, a ``dst``/``psum`` role written, the others read)."""
    name: str
    execute: Callable
    timing: Callable | None = None
    access: Callable | None = None


#: Engine opcodes the simulator can run: name -> :class:`OpHook`.
OP_HOOKS: dict = {}


def register_op(name, execute, timing=None, access=None):
    """Register (or replace) the hook of engine opcode ``name`` (a :data:`rtl.isa.OPS_BY_NAME`
    name of an engine's own range); returns the :class:`OpHook`."""
    op = OPS_BY_NAME.get(name)
    if op is None or op.engine is None:
        raise ValueError(f"register_op name must be an engine opcode of rtl.isa, not {name!r}")
    hook = OpHook(name, execute, timing, access)
    OP_HOOKS[name] = hook
    return hook


def footprint(kind, ap):
    """``(kind, mem, (p_lo, p_hi), lo, hi)`` of a checked :class:`golden.ap.AP` (``kind``:
    ``"r"`` or ``"w"``; ``lo``/``hi`` its closed-form byte extent in each partition)."""
    lo, hi = extent(ap)
    return (kind, ap.memory, (ap.start_partition, ap.start_partition + ap.num_partitions - 1),
            lo, hi)


def footprints_overlap(a, b):
    """Do two footprints ``(kind, mem, parts, lo, hi)`` share a byte: the same memory, a
    common partition (``parts`` ``None``, DRAM, meets every footprint of DRAM) and
    intersecting byte ranges, whatever their kinds. This is the scalar engine's read-after-write
    test (``rtl/scalar/engine.py``: a read waits while the destination still being written
    shares a memory, a partition and bytes with it); :func:`golden.isasim.races.conflict` adds
    "one of them writes"."""
    if a[1] != b[1]:
        return False
    if a[2] is not None and b[2] is not None and (a[2][1] < b[2][0] or b[2][1] < a[2][0]):
        return False
    return not (a[4] < b[3] or b[4] < a[3])


def elems_per_partition(a):
    """Elements per partition of an encoded AP (the product of its active ``num``)."""
    n = 1
    for _s, k in a.dims:
        if k == 0:
            break
        n *= k
    return n


def ap_access(sim, ins, slots=None, elem_bytes=None):
    op = OPS_BY_NAME[ins.op]
    out = []
    for slot, role in op.aps.items():
        enc = ins.aps.get(slot)
        if enc is None or (slots is not None and slot not in slots):
            continue
        eb = (elem_bytes or {}).get(slot, ELEM_BYTES[enc.dtype])
        ap = AP(memory=enc.mem, start_partition=enc.start, num_partitions=enc.count,
                offset=enc.offset, elem_bytes=eb, dims=enc.dims)
        out.append(footprint("w" if role in ("dst", "psum") else "r", ap))
    return out


# --- the vector and scalar decoders (docs/vector.md, docs/scalar.md; the decoders of
# --- rtl/core/engine_decode.py) ------------------------------------------------------------------
#
# Both decoders map the 128-byte instruction field for field onto the engines' decoded
# instructions, and report an AP with a dimension beyond ``cfg.ap_dims`` (any of the three
# slots) as E_AP_FORM before the engine sees the instruction. They do not drive the completion's
# ``info``, so ERR_INFO is 0 for every vector and scalar error.

def decoder_form(sim, ins, slots=("ap0", "ap1", "ap2")):
    """The decoders' own check: E_AP_FORM (info 0) for an AP of ``slots`` (the ones the
    instruction uses) using a dimension slot ``>= cfg.ap_dims``."""
    nd = sim.cfg.ap_dims
    for slot in slots:
        enc = ins.aps.get(slot)
        if enc is not None and any(n for _s, n in enc.dims[nd:]):
            raise Fault(E_AP_FORM, 0, f"{slot} uses a dimension beyond ap_dims = {nd}")


def decoder_ap(sim, enc, elem_bytes=4):
    """:class:`golden.ap.AP` of an encoded AP as the decoder drives the AP generator: the
    ``cfg.ap_dims`` first dimensions (``elem_bytes``: a placeholder when the engine sets it
    from the dtype)."""
    enc = enc or ZERO_AP
    return AP(memory=enc.mem, start_partition=enc.start, num_partitions=enc.count,
              offset=enc.offset, elem_bytes=elem_bytes, dims=enc.dims[:sim.cfg.ap_dims])


def dtype_code_of(enc):
    from rtl.isa import dtype_code
    return dtype_code((enc or ZERO_AP).dtype)


