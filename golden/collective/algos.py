# SPDX-License-Identifier: Apache-2.0
"""The collectives' multi-rank data model, bit-exact (docs/collectives.md §9-§10).

Each function takes one array of element *codes* per rank (``data[r]``, unsigned integers of
the ``dtype``'s width, as in memory), executes the ring schedule of
:mod:`golden.collective.schedule` transfer by transfer, and returns a
:class:`CollectiveResult`: the per-rank outputs (codes) and the schedule it ran.

Numerics (§10): codes are widened exactly to FP32 on entry; ``add`` is the FP32 adder
(RNE, subnormals, canonical NaN, ``x + (-x) = +0``), ``max``/``min`` the vector engine's
(NaN if either is NaN, ``-0 < +0``), both from :func:`golden.vector.alu`. Partial results
travel as FP32 and are rounded once, RNE, into ``out_dtype`` by the rank that owns the
finished chunk. Gathers, all-to-all and permute move codes unchanged.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from golden.collective.schedule import (all_gather_schedule, all_to_all_schedule, check_perm,
                                        check_ranks, chunk_bounds, permute_schedule,
                                        reduce_scatter_schedule)
from golden.formats import check_codes, convert_rne, convert_rne_bits, decode, decode_bits
from golden.vector import ALU_ADD, ALU_MAX, ALU_MIN, alu
from rtl.config import FORMATS
from rtl.isa import DTYPE_CODES, DTYPES, E_FORMAT, E_OPCODE, E_SHAPE

__all__ = ["REDUCE_OPS", "REDUCE_DTYPES", "MOVE_DTYPES", "CollectiveError", "CollectiveResult",
           "check_dtype", "reduce_fp32", "encode", "decode_codes", "reduce_scatter",
           "all_gather", "all_reduce", "all_to_all", "permute"]

#: Reduce operations and the ALU operation of each.
REDUCE_OPS = {"add": ALU_ADD, "max": ALU_MAX, "min": ALU_MIN}
#: Element formats a reduction accepts (inputs and ``out_dtype``).
REDUCE_DTYPES = ("fp32", "bf16", "fp16")
#: Element formats a gather, all-to-all or permute moves: the reduce formats and FP8.
MOVE_DTYPES = REDUCE_DTYPES + tuple(d for d in DTYPES if d.startswith("fp8"))


class CollectiveError(ValueError):
    """Bad collective arguments; ``code`` is the core's error code (``rtl.isa`` ``E_*``) the
    CC queue reports for the same fault: ``E_SHAPE`` (ranks disagree on size, sizes that do
    not split), ``E_FORMAT`` (dtype), ``E_OPCODE`` (reduce op)."""

    def __init__(self, message, code):
        super().__init__(message)
        self.code = code


class CollectiveResult(NamedTuple):
    """What a collective returns: ``outputs[r]`` (codes of rank ``r``) and the schedule."""

    outputs: list
    schedule: list


def check_dtype(dtype, allowed, field="dtype"):
    """The dtype name for ``dtype`` (a name of ``rtl.isa.DTYPES`` or its code), or a
    :class:`CollectiveError` (``E_FORMAT``) naming ``field`` unless it is in ``allowed``."""
    name = dtype
    if isinstance(dtype, np.dtype) or (isinstance(dtype, type) and issubclass(dtype, np.generic)):
        name = np.dtype(dtype).name
    elif isinstance(dtype, (int, np.integer)) and not isinstance(dtype, bool):
        name = DTYPES[int(dtype)] if 0 <= int(dtype) < len(DTYPES) else dtype
    if name not in allowed:
        kind = "integer data is not supported; " if isinstance(name, str) and \
            name.lstrip("u").startswith("int") else ""
        codes = {n: DTYPE_CODES[n] for n in allowed}
        raise CollectiveError(f"{field} must be one of {codes} (name or code; {kind}"
                              f"reductions take {list(REDUCE_DTYPES)}), not {dtype!r}",
                              E_FORMAT)
    return name


def _check_op(op):
    if op not in REDUCE_OPS:
        raise CollectiveError(f"op must be one of {list(REDUCE_OPS)}, not {op!r}", E_OPCODE)
    return REDUCE_OPS[op]


def _check_data(data, fmt, same_size=True):
    """Per-rank flat code arrays; ``n`` >= 1 ranks; equal sizes unless ``same_size`` is off."""
    if isinstance(data, np.ndarray) or not isinstance(data, (list, tuple)):
        raise TypeError(f"data must be a list with one array of codes per rank, not "
                        f"{type(data).__name__}")
    check_ranks(len(data), "len(data) (the number of ranks)")
    out = []
    for r, a in enumerate(data):
        c = check_codes(a, fmt, name=f"data[{r}]").reshape(-1)
        if same_size and out and c.size != out[0].size:
            raise CollectiveError(f"data[{r}] must have {out[0].size} elements like data[0] "
                                  f"(ranks must agree on the size), not {c.size}", E_SHAPE)
        out.append(c)
    return out


def reduce_fp32(a_bits, b_bits, op):
    """``op(a, b)`` on FP32 bit patterns: the FP32 add, max or min of the vector ALU."""
    return alu(_check_op(op), a_bits, b_bits, 0)


def encode(values, dtype):
    """Codes of ``dtype`` for float ``values`` (RNE; FP32 values must be exactly ``float32``,
    see :func:`golden.formats.convert_rne`)."""
    return convert_rne(values, FORMATS[check_dtype(dtype, MOVE_DTYPES)])


def decode_codes(codes, dtype):
    """Exact ``np.float32`` values of ``codes`` of ``dtype``."""
    return decode(codes, FORMATS[check_dtype(dtype, MOVE_DTYPES)])


def _reduce_scatter_bits(x, n, op, bounds):
    """Run the reduce-scatter schedule on FP32 bits ``x[r]``; ``{rank: finished bits}``."""
    # part[r][c]: rank r's current value of chunk c (its own contribution until it receives)
    part = [[xr[lo:hi] for lo, hi in bounds] for xr in x]
    sched = reduce_scatter_schedule(n)
    for s in range(n - 1):
        step = [t for t in sched if t.step == s]
        sent = [(t, part[t.src][t.chunk]) for t in step]      # every send of a step first
        for t, v in sent:
            part[t.dst][t.chunk] = alu(op, v, part[t.dst][t.chunk], 0)
    return [part[r][r] for r in range(n)], sched


def _all_gather_codes(blocks, n, first_step=0):
    """Run the all-gather schedule: rank ``i`` starts with ``blocks[i]``; per-rank lists of
    the ``n`` chunks."""
    have = [{i: blocks[i]} for i in range(n)]
    sched = all_gather_schedule(n, first_step)
    for s in range(n - 1):
        for t in [t for t in sched if t.step == first_step + s]:
            if t.chunk in have[t.dst]:
                raise AssertionError(f"schedule delivers chunk {t.chunk} twice to {t.dst}")
            have[t.dst][t.chunk] = have[t.src][t.chunk]
    return [[h[c] for c in range(n)] for h in have], sched


def _check_reduce(data, dtype, op, out_dtype):
    """A reduction's checked arguments: ``(alu_op, fmt, ofmt, codes)``."""
    alu_op = _check_op(op)
    fmt = FORMATS[check_dtype(dtype, REDUCE_DTYPES)]
    ofmt = FORMATS[check_dtype(dtype if out_dtype is None else out_dtype, REDUCE_DTYPES,
                               "out_dtype")]
    return alu_op, fmt, ofmt, _check_data(data, fmt)


def reduce_scatter(data, dtype, op="add", out_dtype=None):
    """Ring reduce-scatter: rank ``r`` gets chunk ``r`` of the element-wise reduction of every
    rank's (flattened) ``data``, rounded once into ``out_dtype`` (default ``dtype``).

    Chunks are :func:`~golden.collective.schedule.chunk_bounds` (sizes differ by at most one
    when the size is not a multiple of ``n``); chunk ``c`` is combined in the order of
    :func:`~golden.collective.schedule.sum_order`.
    """
    alu_op, fmt, ofmt, codes = _check_reduce(data, dtype, op, out_dtype)
    n = len(codes)
    x = [decode_bits(c, fmt) for c in codes]
    fin, sched = _reduce_scatter_bits(x, n, alu_op, chunk_bounds(codes[0].size, n))
    return CollectiveResult([convert_rne_bits(f, ofmt) for f in fin], sched)


def all_gather(data, dtype):
    """Ring all-gather: every rank gets the concatenation, in rank order, of every rank's
    (flattened, equal-size) ``data``."""
    fmt = FORMATS[check_dtype(dtype, MOVE_DTYPES)]
    codes = _check_data(data, fmt)
    n = len(codes)
    chunks, sched = _all_gather_codes(codes, n)
    return CollectiveResult([np.concatenate(c) for c in chunks], sched)


def all_reduce(data, dtype, op="add", out_dtype=None):
    """Ring all-reduce = :func:`reduce_scatter` then all-gather of the rounded chunks: every
    rank gets the same codes (``out_dtype``, the shape of ``data[0]``)."""
    alu_op, fmt, ofmt, codes = _check_reduce(data, dtype, op, out_dtype)
    n = len(codes)
    shape = np.shape(data[0])
    x = [decode_bits(c, fmt) for c in codes]
    fin, rs = _reduce_scatter_bits(x, n, alu_op, chunk_bounds(codes[0].size, n))
    chunks, ag = _all_gather_codes([convert_rne_bits(f, ofmt) for f in fin], n, n - 1)
    return CollectiveResult([np.concatenate(c).reshape(shape) for c in chunks], rs + ag)


def _run_routed(sched, n, start):
    """Move chunk ids hop by hop; ``{chunk: rank where it ends}``."""
    at = dict(start)
    for t in sched:
        if at.get(t.chunk) != t.src:
            raise AssertionError(f"schedule sends chunk {t.chunk} from {t.src}, which does "
                                 f"not hold it")
        at[t.chunk] = t.dst
    return at


def all_to_all(data, dtype):
    """All-to-all: rank ``r``'s data is ``n`` equal blocks, block ``j`` for rank ``j``; rank
    ``j`` gets the blocks addressed to it, in order of the sending rank."""
    fmt = FORMATS[check_dtype(dtype, MOVE_DTYPES)]
    codes = _check_data(data, fmt)
    n = len(codes)
    if codes[0].size % n:
        raise CollectiveError(f"data[0] size must be a multiple of the number of ranks {n} "
                              f"(n equal blocks), not {codes[0].size}", E_SHAPE)
    b = codes[0].size // n
    sched = all_to_all_schedule(n)
    at = _run_routed(sched, n, {o * n + f: o for o in range(n) for f in range(n)})
    got = [{} for _ in range(n)]
    for chunk, rank in at.items():
        o, f = divmod(chunk, n)
        got[rank][o] = codes[o][f * b:(f + 1) * b]
    return CollectiveResult([np.concatenate([g[o] for o in range(n)]) for g in got], sched)


def permute(data, dtype, perm):
    """Send/recv: rank ``r`` sends its ``data`` to rank ``perm[r]`` (a permutation; the
    sizes must agree); returns what each rank receives."""
    fmt = FORMATS[check_dtype(dtype, MOVE_DTYPES)]
    codes = _check_data(data, fmt)
    n = len(codes)
    p = check_perm(perm, n)
    sched = permute_schedule(p)
    at = _run_routed(sched, n, {r: r for r in range(n)})
    out = [None] * n
    for r, rank in at.items():
        out[rank] = codes[r].copy()
    return CollectiveResult(out, sched)
