# SPDX-License-Identifier: Apache-2.0
"""The Scalar engine's instructions on memory images (the engine's contract;
``rtl/scalar/engine.py`` matches it): ``ACTIVATION``, ``COPY`` and ``ACT_TABLE_LOAD`` as
:class:`ActInstr`, their status (:func:`check_instr`) and effect (:func:`execute`,
:func:`table_load`), and the activation with its per-partition reduction on a tile
(:func:`activation_reduce`)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from golden.activation.evaluator import activation
from golden.activation.image import TABLE_HEADER_WORDS, stream_addresses, table_size_ok
from golden.activation.table_format import FUNCTION_IDS, FUNCTIONS, NCOEF, NEG_ZERO, ONE, fma32
from golden.formats import convert_rne_bits
from rtl.config import ACT_BINADES, DENSE_FORMAT_NAMES
from rtl.isa import (ACT_REDUCE_IDLE as REDUCE_IDLE, ACT_REDUCE_REDUCE as REDUCE_REDUCE,
                     ACT_REDUCE_RESET as REDUCE_RESET,
                     ACT_REDUCE_RESET_REDUCE as REDUCE_RESET_REDUCE, DTYPES, E_FORMAT, E_OK,
                     E_OPCODE, E_SHAPE, OP_ACT_COPY as OP_COPY, OP_ACT_TABLE_LOAD,
                     OP_ACT_TENSOR_SCALAR as OP_TENSOR_SCALAR, OP_ACTIVATION)

__all__ = ["REDUCE_IDLE", "REDUCE_RESET", "REDUCE_REDUCE", "REDUCE_RESET_REDUCE",
           "OP_ACTIVATION", "OP_ACT_TABLE_LOAD", "OP_TENSOR_SCALAR", "OP_COPY", "E_OK",
           "E_OPCODE", "E_FORMAT", "E_SHAPE", "DTYPE_NAMES", "ActInstr", "check_instr",
           "table_load", "execute", "sr_words", "activation_reduce"]

def table_load(cfg, ins, mems):
    """``ACT_TABLE_LOAD`` on the memory images: ``(status, image)``. ``status``: the
    :func:`check_instr` code (a word count that is not an image's, :func:`table_size_ok`, is
    one of them: nothing is read and the loaded function is kept), else ``E_FORMAT`` for a bad
    image (word 9, the function id, not ``ins.func`` or >= 17), else ``E_OK``. ``image``:
    ``{address: word}`` of the words written (a bad image is still written: the engine then
    holds no function, ACTIVATION gives ``E_OPCODE`` until a good load; ``None`` when nothing
    was read). The caller's ``loaded`` becomes ``FUNCTIONS[ins.func]`` on ``E_OK``, ``""`` on a
    bad image.
    """
    status = check_instr(cfg, ins)
    if status != E_OK:
        return status, None
    from golden.ap import addresses
    a = addresses(ins.src)
    p0, np_ = ins.src.start_partition, ins.src.num_partitions
    mem = mems[ins.src.memory]
    words = np.zeros((np_, len(a)), np.uint32)
    for j in range(4):
        words |= mem[p0:p0 + np_, a + j].astype(np.uint32) << np.uint32(8 * j)
    words = words.T.ravel()             # word k: element k // np of partition p0 + k % np
    k = (len(words) - TABLE_HEADER_WORDS - 2 * ACT_BINADES) // (NCOEF + 2)
    image = dict(zip(stream_addresses(k), (int(w) for w in words)))
    bad = int(words[9]) != ins.func or ins.func >= len(FUNCTIONS)
    return (E_FORMAT if bad else E_OK), image


def activation_reduce(x_bits, name, scale=ONE, bias=NEG_ZERO, reduce_cmd=REDUCE_IDLE,
                      acc=None):
    """The ``activation`` instruction on a tile: ``x_bits`` (P, N) FP32 bits in AP order
    (partition, free element), ``scale``/``bias`` FP32 bits (scalars or (P, 1) per-partition).

    Returns ``(y, acc)``: ``y`` (P, N) FP32 bits (encoded to the destination format afterwards)
    and the P FP32 accumulators. ``reduce_cmd``: idle keeps ``acc``; reset gives +0; reduce adds
    ``y[p, 0], y[p, 1], ...`` in AP order, one RNE FP32 add each, onto ``acc``; reset_reduce
    starts the same adds from +0. The sum is of the FP32 results, before encoding.
    """
    x = np.asarray(x_bits, dtype=np.uint32)
    if x.ndim != 2:
        raise ValueError(f"x_bits must be a (P, N) array, not shape {x.shape}")
    if reduce_cmd not in (REDUCE_IDLE, REDUCE_RESET, REDUCE_REDUCE, REDUCE_RESET_REDUCE):
        raise ValueError(f"reduce_cmd must be in [0, 3], not {reduce_cmd!r}")
    P = x.shape[0]
    acc = np.zeros(P, np.uint32) if acc is None else np.asarray(acc, np.uint32).copy()
    y = activation(x, name, np.broadcast_to(np.asarray(scale, np.uint32), x.shape),
                   np.broadcast_to(np.asarray(bias, np.uint32), x.shape)).reshape(x.shape)
    if reduce_cmd in (REDUCE_RESET, REDUCE_RESET_REDUCE):
        acc[:] = 0
    if reduce_cmd in (REDUCE_REDUCE, REDUCE_RESET_REDUCE):
        for j in range(x.shape[1]):
            acc = fma32(y[:, j], np.uint32(ONE), acc)
    return y, acc


# REDUCE_* (the ``reduce_cmd`` codes), opcodes (OP_TENSOR_SCALAR, OP_COPY: rtl.isa's
# OP_ACT_*) and error codes come from rtl.isa.
#: §8.3 dtype codes of the dense formats: code -> name.
DTYPE_NAMES = {code: name for code, name in enumerate(DTYPES) if name in DENSE_FORMAT_NAMES}


@dataclass(frozen=True, kw_only=True)
class ActInstr:
    """A decoded ``ACTIVATION`` (or ``COPY``) instruction (rtl/scalar/isa.py fields).

    ``dst``/``src`` are :class:`golden.ap.AP`; ``dst_dtype``/``src_dtype`` §8.3 codes;
    ``scale``/``bias`` FP32 bits (immediates; defaults 1 and -0, an exact pre-step), or, when
    ``scale_ap``/``bias_ap`` is an AP, one value per partition read from it (same partitions as
    ``src``, one element each, dtype ``scale_dtype``/``bias_dtype``); ``func`` a function id;
    ``reduce_cmd`` 0..3; ``sr`` stochastic rounding on write (``execute``'s ``rand`` words).
    """

    opcode: int = OP_ACTIVATION
    func: int = 0
    dst: object = None
    src: object = None
    dst_dtype: int = 0
    src_dtype: int = 0
    scale: int = ONE
    bias: int = NEG_ZERO
    scale_ap: object = None
    bias_ap: object = None
    scale_dtype: int = 0
    bias_dtype: int = 0
    reduce_cmd: int = REDUCE_IDLE
    sr: bool = False

    def operand_aps(self):
        """``(dtype, AP)`` of every AP operand, in check order: src, dst, scale, bias."""
        out = [(self.src_dtype, self.src), (self.dst_dtype, self.dst)]
        if self.scale_ap is not None:
            out.append((self.scale_dtype, self.scale_ap))
        if self.bias_ap is not None:
            out.append((self.bias_dtype, self.bias_ap))
        return out


def _dtype_fmt(cfg, code):
    """The format of dtype ``code`` when ``cfg`` enables it (FP32 always), else ``None``."""
    name = DTYPE_NAMES.get(code)
    if name is None or (name != "fp32" and name not in cfg.formats):
        return None
    return cfg.fmt(name)


def check_instr(cfg, ins, loaded=None):
    """The status of ``ins`` (first failure, in this order): ``E_OPCODE`` (opcode not
    ACTIVATION/COPY/ACT_TABLE_LOAD, function id >= 17, or not the function whose table is
    ``loaded``; ``loaded=""``: no table loaded, every ACTIVATION fails),
    ``E_FORMAT`` (a dtype not enabled in ``cfg``, or an AP's
    ``elem_bytes`` not its dtype's width), ``E_SHAPE`` (partition ranges or element counts
    differ: lane p is partition p, so the engine cannot move data across partitions; a
    scale/bias AP not of one element per partition of ``src``'s range; decided from the
    fields, before the APs are walked), then the AP codes of ``scale_ap``, ``bias_ap``, ``src``,
    ``dst`` (``golden.ap.check``; the engine learns them from its AP generators, in the order
    it reads them). ``ACT_TABLE_LOAD``: ``E_FORMAT`` (``src`` not FP32 / 4-byte elements, or
    its word count, elements times partitions, not a table image's: :func:`table_size_ok`),
    the AP code of ``src``; the function id in the image is checked while it is loaded
    (:func:`table_load`)."""
    from golden.ap import ELEM_BYTES
    from golden.ap import check as ap_check
    if ins.opcode == OP_ACT_TABLE_LOAD:
        if ins.src_dtype != 0 or ins.src.elem_bytes != 4:
            return E_FORMAT
        if not table_size_ok(cfg, ins.src.count * ins.src.num_partitions):
            return E_FORMAT
        r = ap_check(cfg, ins.src)
        return E_OK if r is None else r[0]
    if ins.opcode not in (OP_ACTIVATION, OP_COPY):
        return E_OPCODE
    if ins.opcode == OP_ACTIVATION and not 0 <= ins.func < len(FUNCTIONS):
        return E_OPCODE
    if ins.opcode == OP_ACTIVATION and loaded is not None and \
            ins.func != FUNCTION_IDS.get(loaded, -1):
        return E_OPCODE
    ops = ins.operand_aps()
    for code, ap in ops:
        fmt = _dtype_fmt(cfg, code)
        if fmt is None or ap.elem_bytes != ELEM_BYTES[DTYPE_NAMES[code]]:
            return E_FORMAT
    part = (ins.src.start_partition, ins.src.num_partitions)
    if (*part, ins.src.count) != \
            (ins.dst.start_partition, ins.dst.num_partitions, ins.dst.count):
        return E_SHAPE
    for _, ap in ops[2:]:
        if (ap.start_partition, ap.num_partitions, ap.count) != (*part, 1):
            return E_SHAPE
    for _, ap in ops[2:] + ops[:2]:
        r = ap_check(cfg, ap)
        if r is not None:
            return r[0]
    return E_OK


def _read(cfg, mems, ap, dtype):
    """FP32 bits (num_partitions, count) of the elements of ``ap`` in AP order. An element is
    its format's code in its low bits, the bits above ignored (a 4-byte TF32 element: the low
    19 bits; the engine's ``WidenToFP32`` and the DMA element path do the same)."""
    from golden.ap import addresses
    from golden.formats import decode_bits
    a = addresses(ap)
    p0, n = ap.start_partition, ap.num_partitions
    mem = mems[ap.memory]
    fmt = _dtype_fmt(cfg, dtype)
    codes = np.zeros((n, len(a)), np.uint32)
    for j in range(ap.elem_bytes):
        codes |= mem[p0:p0 + n][:, a + j].astype(np.uint32) << np.uint32(8 * j)
    return np.asarray(decode_bits(codes & np.uint32((1 << fmt.width) - 1), fmt), np.uint32)


def sr_words(ins, prng):
    """The ``rand`` words :func:`execute` takes for ``ins`` from the engine's per-lane
    generators ``prng`` (``golden.prng.XorWowLanes``, lane = partition), which are stepped as
    the engine steps them: ``None`` without SR; zeros and no step for an FP32 destination
    (written unchanged, nothing converted); otherwise one step per element in every lane, the
    AP's partitions taking theirs (docs/number-formats.md §4)."""
    if not ins.sr:
        return None
    n, p0, np_ = ins.src.count, ins.src.start_partition, ins.src.num_partitions
    if ins.dst_dtype == 0:
        return np.zeros((np_, n), np.uint32)
    return np.ascontiguousarray(prng.next_n(n)[:, p0:p0 + np_].T)


def execute(cfg, ins, mems, acc, rand=None, loaded=None):
    """Run ``ins`` on the memory images ``mems`` (``{golden.ap.SBUF: uint8 (P, bytes),
    golden.ap.PSUM: ...}``, updated in place) and the P accumulators ``acc`` (uint32 FP32 bits,
    updated in place). Returns the status; a non-zero status changes nothing.

    Elements are read in ``src`` AP order (innermost dimension fastest), decoded exactly to
    FP32, ``y = f(RNE(x * scale + bias))`` (``COPY``: ``y = RNE(x * scale + bias)``), encoded
    to ``dst_dtype`` (RNE, or SR with ``rand``: uint32 words shaped like the output, one per
    element, as ``golden.formats.convert_sr_bits`` takes them) and written in ``dst`` AP order;
    partition p uses lane p. ``loaded``: the name of the function whose table the engine holds
    (``None``: any).
    """
    from golden.ap import addresses
    from golden.formats import convert_sr_bits
    if ins.opcode == OP_ACT_TABLE_LOAD:
        return table_load(cfg, ins, mems)[0]
    status = check_instr(cfg, ins, loaded)
    if status != E_OK:
        return status
    df = _dtype_fmt(cfg, ins.dst_dtype)
    p0, n = ins.src.start_partition, ins.src.num_partitions
    x = _read(cfg, mems, ins.src, ins.src_dtype)
    sc = np.uint32(ins.scale) if ins.scale_ap is None else \
        _read(cfg, mems, ins.scale_ap, ins.scale_dtype)
    bi = np.uint32(ins.bias) if ins.bias_ap is None else \
        _read(cfg, mems, ins.bias_ap, ins.bias_dtype)
    sc = np.broadcast_to(np.asarray(sc, np.uint32), x.shape)
    bi = np.broadcast_to(np.asarray(bi, np.uint32), x.shape)
    if ins.opcode == OP_COPY:
        y = fma32(x, sc, bi)
        acc_new = acc[p0:p0 + n].copy()
        if ins.reduce_cmd in (REDUCE_RESET, REDUCE_RESET_REDUCE):
            acc_new[:] = 0
        if ins.reduce_cmd in (REDUCE_REDUCE, REDUCE_RESET_REDUCE):
            for j in range(y.shape[1]):
                acc_new = fma32(y[:, j], np.uint32(ONE), acc_new)
    else:
        y, acc_new = activation_reduce(x, FUNCTIONS[ins.func], sc, bi, ins.reduce_cmd,
                                       acc[p0:p0 + n])
    if ins.sr:
        if rand is None or np.shape(rand) != y.shape:
            raise ValueError(f"execute field 'rand' must be {y.shape} uint32 words for "
                             f"stochastic rounding")
        out = convert_sr_bits(y, df, np.asarray(rand, np.uint32))
    else:
        out = convert_rne_bits(y, df)
    out = np.asarray(out, np.uint32)
    da = addresses(ins.dst)
    dmem = mems[ins.dst.memory]
    for j in range(ins.dst.elem_bytes):
        dmem[p0:p0 + n, da + j] = ((out >> np.uint32(8 * j)) & np.uint32(0xFF)).astype(np.uint8)
    acc[p0:p0 + n] = acc_new
    return E_OK
