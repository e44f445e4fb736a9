# SPDX-License-Identifier: Apache-2.0
"""The instruction set of the core, defined once: the 128-byte instruction, the 24-byte access
pattern (AP) and every opcode with its APs and immediates (``docs/architecture.md`` §8.2-8.4),
the error codes (§11.2, :data:`ERRORS`, :data:`ERROR_BITS`), the dtype codes (:data:`DTYPES`),
the opcodes by name (``OP_*``), the vector and scalar engines' immediate codes and the 64-byte
DMA descriptor's encodings (``DESC_*``, ``DMA_*``, docs/dma.md §2-3).

Like :mod:`rtl.config` this module imports only the standard library: the RTL decoders build
their layouts from these tables, the golden ISA simulator and the assembler (``golden/asm.py``)
encode and decode with them, and ``docs/isa.md`` is generated from them
(``python -m bench.doc_tables``). Nothing else restates a field position or a code: every other
module imports them (``tests/test_constants.py`` fails on a second definition).

An instruction is little-endian: bit ``b`` of the instruction is bit ``b % 8`` of byte
``b // 8``. :class:`Field` positions below are bit offsets from bit 0 of byte 0.

Layout (``INSTR_BYTES`` = 128):

========== ======== ===========================================================================
bytes      field    contents
========== ======== ===========================================================================
0          opcode   :data:`OPCODES` (one engine's range each, §8.4)
1          flags    b0 accumulate, b1 transpose, b2 SR on write, b3 sparse, b4 MX, b5-7 reserved
2          wait_sem semaphore the instruction waits on (``ctl.wait_en``)
3          post_sem semaphore it increments at completion (``ctl.post_en``)
4-7        wait_val issue only when ``sem[wait_sem] >= wait_val``
8-9        post_inc added to ``sem[post_sem]`` at completion
10         ctl      b0 wait_en, b1 post_en, b2 irq_on_done, b3-7 reserved
11-15      reserved must be 0
16-39      AP0      destination AP (:data:`AP_FIELDS`)
40-63      AP1      first source
64-87      AP2      second source / scales / per-partition tile
88-127     imm      immediates of the opcode (:attr:`Op.imm`); bits no field names must be 0
========== ======== ===========================================================================

Validation (docs/architecture.md §11.3, "validate before issue") is the decoder's: a reserved
bit set, an opcode unknown or foreign to the issuing engine -> ``E_OPCODE``; an AP an opcode does
not use must be all zero (memory code 0), otherwise ``E_OPCODE``; then the engine's own checks
(formats, AP checks, shapes).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

__all__ = [
    "INSTR_BYTES", "AP_BYTES", "IMM_BYTE", "F32Bits", "FIELD_KINDS", "Field", "HEADER", "AP_SLOTS", "AP_FIELDS",
    "FLAG_BITS", "CTL_BITS", "MEM_NONE", "MEM_SBUF", "MEM_PSUM", "MEM_RESERVED", "DTYPES", "DTYPE_CODES", "dtype_name", "dtype_code", "ENGINES",
    "Op", "OPCODES", "OPS_BY_NAME", "OPS_BY_CODE", "header_bits", "ap_bits", "imm_bits",
    "OP_TENSOR_TENSOR", "OP_TENSOR_SCALAR", "OP_TENSOR_REDUCE", "OP_TENSOR_COPY", "OP_MEMSET",
    "OP_SELECT", "OP_IOTA", "OP_TENSOR_TENSOR_SCAN", "OP_MAX8", "OP_BN_STATS", "OP_BN_AGGR",
    "OP_AFFINE_SELECT", "OP_BLOCK_TRANSPOSE", "OP_FIND_INDEX8", "VECTOR_OPCODES",
    "OP_ALL_REDUCE", "OP_REDUCE_SCATTER", "OP_ALL_GATHER", "OP_ALL_TO_ALL", "OP_SEND_RECV",
    "CC_OPCODES",
    "ALU_BYPASS", "ALU_ADD", "ALU_SUB", "ALU_MUL", "ALU_MAX", "ALU_MIN", "ALU_EQ", "ALU_NE",
    "ALU_LT", "ALU_LE", "ALU_GT", "ALU_GE", "ALU_AND", "ALU_OR", "ALU_XOR", "ALU_SEL",
    "ALU_NAMES", "REDUCE_OPS", "MAX8_K", "BN_STATS_N", "BN_AGGR_N", "BN_RCP_MAGIC",
    "BN_NEWTON_STEPS", "IOTA_BITS",
    "ACT_FUNCTIONS", "ACT_REDUCE_IDLE", "ACT_REDUCE_RESET", "ACT_REDUCE_REDUCE",
    "ACT_REDUCE_RESET_REDUCE",
    "OP_ACTIVATION", "OP_ACT_TABLE_LOAD", "OP_ACT_TENSOR_SCALAR", "OP_ACT_COPY",
    "DESC_BYTES", "DESC_DIMS", "DMA_DRAM", "DMA_SBUF", "DMA_RING", "DMA_OP_COPY", "DMA_OP_ADD",
    "DMA_OP_MAX", "DMA_OP_MIN", "DMA_OP_NAMES", "DMA_RND_RNE", "DMA_RND_SR", "DMA_F_RESERVED",
    "DMA_F_OP", "DMA_F_SPACE", "DMA_F_DTYPE", "DMA_F_NUM", "DMA_F_DIM0", "DMA_F_SEM",
    "DMA_F_ELEMWISE", "DMA_F_ADDR_ALIGN", "DMA_F_STRIDE_ALIGN", "DMA_F_LANE", "DMA_F_RANGE",
    "DMA_F_RRESP", "DMA_F_BRESP", "DMA_F_TIMEOUT", "DMA_SR_LANE_BASE",
    "Instr", "APEnc", "encode", "decode", "check_reserved",
    "ERROR_BITS", "ERRORS", "ERROR_NAMES", "E_OK", "E_OPCODE", "E_FORMAT", "E_AP_PART",
    "E_AP_RANGE", "E_SHAPE", "E_FLAGS", "E_SPARSE_TAG", "E_SEM", "E_TIMEOUT", "E_AXI", "E_QUEUE",
    "E_LINK", "E_DESC", "E_AP_ALIGN", "E_AP_FORM",
]

INSTR_BYTES = 128
AP_BYTES = 24
#: First byte of the immediates.
IMM_BYTE = 88

# ---- error codes (docs/architecture.md §11.2) ------------------------------------------------
#: Width of an error code: every status register and error signal holding one.
ERROR_BITS = 8
#: No error.
E_OK = 0x00
#: Unknown or foreign opcode, reserved bit set (sequencer / decoder).
E_OPCODE = 0x01
#: Dtype not enabled in ``cfg.formats``/``mx_formats``; FP32/TF32 mixed with another format.
E_FORMAT = 0x02
#: Partitions outside [0, P), misaligned start, count 0.
E_AP_PART = 0x03
#: An element outside the partition (SBUF) or bank (PSUM); DMA: a byte outside SBUF.
E_AP_RANGE = 0x04
#: K > R, M > C, N > ``psum_bank_fp32``, AP shapes disagree.
E_SHAPE = 0x05
#: Invalid flag combination (accumulate + transpose, MX without scales).
E_FLAGS = 0x06
#: Sparse tag >= m, duplicate position in a group, pattern not enabled or not the weights'.
E_SPARSE_TAG = 0x07
#: Semaphore overflow or underflow.
E_SEM = 0x08
#: Semaphore wait or AXI response longer than the watchdog.
E_TIMEOUT = 0x09
#: AXI SLVERR/DECERR, or an address outside the DRAM window.
E_AXI = 0x0A
#: ``Q_SIZE`` not a power of two, ``Q_TAIL >= Q_SIZE``.
E_QUEUE = 0x0B
#: Collective link: credit timeout or sequence gap.
E_LINK = 0x0C
#: Malformed DMA descriptor.
E_DESC = 0x0D
#: AP offset not a multiple of the element size; DMA: address/stride not element-aligned, or a
#: copy's source and destination at different offsets in the AXI word.
E_AP_ALIGN = 0x0E
#: Malformed AP: memory code 0 or 3, element size 8, no free dimension, a dimension after one
#: with num = 0, more than ``ap_dims`` dimensions.
E_AP_FORM = 0x0F
#: Every error code: name -> code (§11.2; codes 0x10-0xFF are unassigned).
ERRORS = {
    "E_OK": E_OK, "E_OPCODE": E_OPCODE, "E_FORMAT": E_FORMAT, "E_AP_PART": E_AP_PART,
    "E_AP_RANGE": E_AP_RANGE, "E_SHAPE": E_SHAPE, "E_FLAGS": E_FLAGS,
    "E_SPARSE_TAG": E_SPARSE_TAG, "E_SEM": E_SEM, "E_TIMEOUT": E_TIMEOUT, "E_AXI": E_AXI,
    "E_QUEUE": E_QUEUE, "E_LINK": E_LINK, "E_DESC": E_DESC, "E_AP_ALIGN": E_AP_ALIGN,
    "E_AP_FORM": E_AP_FORM,
}
#: Inverse of :data:`ERRORS`: code -> name.
ERROR_NAMES = {code: name for name, code in ERRORS.items()}


#: How :class:`Field` kinds read in the documentation.
FIELD_KINDS = {"u": "unsigned", "s": "signed", "f32": "FP32", "bits": "bits"}


class F32Bits(int):
    """FP32 immediate given by its bits: how a NaN is held, since a Python float cannot carry a
    signalling NaN's payload (``Field.get`` returns one for every NaN)."""

    def __repr__(self):
        return f"F32Bits(0x{int(self):08x})"


@dataclass(frozen=True)
class Field:
    """One field: ``name``, bit offset ``lsb``, ``width`` in bits, ``kind`` (``"u"`` unsigned,
    ``"s"`` two's complement, ``"f32"`` FP32 as a Python float that FP32 holds exactly, or as
    :class:`F32Bits` (every NaN), ``"bits"`` raw bits), ``doc``."""
    name: str
    lsb: int
    width: int
    kind: str = "u"
    doc: str = ""

    def __post_init__(self):
        if self.kind not in ("u", "s", "f32", "bits"):
            raise ValueError(f"Field kind must be 'u', 's', 'f32' or 'bits', not {self.kind!r}")
        if self.kind == "f32" and self.width != 32:
            raise ValueError(f"f32 field {self.name!r} must be 32 bits wide, not {self.width}")

    def of(self, bits, base_bit=0):
        """The field's slice of ``bits`` (anything sliceable bit by bit, e.g. an Amaranth value
        holding an instruction or an AP), ``base_bit`` being where the field's parent starts."""
        lo = base_bit + self.lsb
        return bits[lo:lo + self.width]

    def get(self, word):
        v = (word >> self.lsb) & ((1 << self.width) - 1)
        if self.kind == "s" and v >> (self.width - 1):
            v -= 1 << self.width
        elif self.kind == "f32":
            f = struct.unpack("<f", struct.pack("<I", v))[0]
            v = F32Bits(v) if f != f else f
        return v

    def put(self, value, what="instruction"):
        """``value`` as the field's bits at its position; ``ValueError`` when out of range."""
        if self.kind == "f32" and isinstance(value, F32Bits):
            if not 0 <= value < 1 << 32:
                raise ValueError(f"{what} field {self.name!r} bits must be in [0, 2**32 - 1], "
                                 f"not {int(value)!r}")
            raw = int(value)
        elif self.kind == "f32":
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise TypeError(f"{what} field {self.name!r} must be a number, not {value!r}")
            try:
                raw = struct.unpack("<I", struct.pack("<f", float(value)))[0]
                exact = struct.unpack("<f", struct.pack("<I", raw))[0]
            except OverflowError:
                exact = None
            if exact != float(value) or value != value:   # a NaN: give its F32Bits
                raise ValueError(f"{what} field {self.name!r} must be exactly representable "
                                 f"in FP32 (a NaN by its bits: F32Bits), not {value!r}")
        else:
            if isinstance(value, bool) or not isinstance(value, int):
                raise TypeError(f"{what} field {self.name!r} must be an int, not {value!r}")
            lo, hi = ((-(1 << (self.width - 1)), (1 << (self.width - 1)) - 1)
                      if self.kind == "s" else (0, (1 << self.width) - 1))
            if not lo <= value <= hi:
                raise ValueError(f"{what} field {self.name!r} must be in [{lo}, {hi}], "
                                 f"not {value!r}")
            raw = value & ((1 << self.width) - 1)
        return raw << self.lsb


def _fields(base_byte, *spec):
    """Fields packed from byte ``base_byte`` upward in the order given: (name, width, kind, doc);
    a ``None`` name leaves a reserved gap (its bits must be 0)."""
    out, pos = [], base_byte * 8
    for name, width, kind, doc in spec:
        if name is not None:
            out.append(Field(name, pos, width, kind, doc))
        pos += width
    return tuple(out)


HEADER = _fields(
    0,
    ("opcode", 8, "u", "operation (OPCODES)"),
    ("flags", 8, "u", "b0 accumulate, b1 transpose, b2 SR on write, b3 sparse, b4 MX"),
    ("wait_sem", 8, "u", "semaphore waited on when ctl.wait_en"),
    ("post_sem", 8, "u", "semaphore incremented at completion when ctl.post_en"),
    ("wait_val", 32, "u", "issue when sem[wait_sem] >= wait_val"),
    ("post_inc", 16, "u", "increment of sem[post_sem] at completion"),
    ("ctl", 8, "u", "b0 wait_en, b1 post_en, b2 irq_on_done"),
    ("reserved", 40, "u", "must be 0"),
)
FLAG_BITS = {"acc": 0, "transpose": 1, "sr": 2, "sparse": 3, "mx": 4}
CTL_BITS = {"wait_en": 0, "post_en": 1, "irq": 2}
_FLAGS_RESERVED = 0xFF & ~sum(1 << b for b in FLAG_BITS.values())
_CTL_RESERVED = 0xFF & ~sum(1 << b for b in CTL_BITS.values())

#: Memory codes of an AP's ``mem`` field: none (the slot is unused), SBUF, PSUM, reserved.
MEM_NONE, MEM_SBUF, MEM_PSUM, MEM_RESERVED = 0, 1, 2, 3

#: The three AP slots: name -> first byte.
AP_SLOTS = {"ap0": 16, "ap1": 40, "ap2": 64}

#: Fields of one AP, bit offsets from the AP's first bit (§8.3).
AP_FIELDS = (
    Field("mem", 0, 2, "u", "0 none (slot unused), 1 SBUF, 2 PSUM, 3 reserved"),
    Field("start", 2, 8, "u", "first partition"),
    Field("count", 10, 8, "u", "partitions (1..P)"),
    Field("dtype", 18, 4, "u", "element format (DTYPES)"),
    Field("reserved", 22, 10, "u", "must be 0"),
    Field("offset", 32, 32, "u", "byte offset in the partition (PSUM: bank * bank bytes + byte)"),
    *(f for d in range(4) for f in (
        Field(f"step{d}", 64 + 32 * d, 16, "s", f"dimension {d} step, in elements (signed)"),
        Field(f"num{d}", 80 + 32 * d, 16, "u", f"dimension {d} count (0 ends the list)"))),
)

#: Element formats of an AP's ``dtype`` (§8.3); codes 10-15 are reserved.
DTYPES = ("fp32", "tf32", "bf16", "fp16", "fp8_e5m2", "fp8_e4m3", "fp8_e4m3fn", "cfp8",
          "fp4_e2m1", "e8m0")
DTYPE_CODES = {n: i for i, n in enumerate(DTYPES)}


def dtype_name(code):
    """Name of dtype ``code``: a :data:`DTYPES` name, or ``"reserved<code>"`` for 10-15."""
    return DTYPES[code] if code < len(DTYPES) else f"reserved{code}"


def dtype_code(name):
    """Inverse of :func:`dtype_name`; ``ValueError`` for anything else."""
    if name in DTYPE_CODES:
        return DTYPE_CODES[name]
    if isinstance(name, str) and name.startswith("reserved") and name[8:].isdigit() \
            and len(DTYPES) <= int(name[8:]) < 16:
        return int(name[8:])
    raise ValueError(f"AP dtype must be one of {list(DTYPES)}, not {name!r}")

#: Engines in host-register order (§11.1 ``Q_*`` blocks: e = index).
ENGINES = ("pe", "dve", "act", "pool", "sp", "cc")


@dataclass(frozen=True)
class Op:
    """One opcode: ``code``, ``name`` (assembler mnemonic), ``engine`` (``None``: every engine
    may issue it), ``aps``: role of each AP slot used (``{"ap0": "dst", ...}``; an unused slot must
    be zero), ``imm``: its immediate fields (offsets from byte ``IMM_BYTE``), ``flags``: the flag
    names it accepts, ``doc``."""
    code: int
    name: str
    engine: str | None
    aps: dict = field(default_factory=dict)
    imm: tuple = ()
    flags: tuple = ()
    doc: str = ""

    @property
    def imm_fields(self):
        return {f.name: f for f in self.imm}


def _imm(*spec):
    return _fields(0, *spec)


#: The vector engine's immediates (rtl/vector/isa.py: the decoded fields they fill).
_VEC_IMM = _fields(
    0, ("op0", 8, "u", "first ALU operation (4 bits used)"),
    ("op1", 8, "u", "second ALU operation (4 bits used)"),
    ("ctl", 8, "u", "b0 rev0, b1 rev1 (swap a stage's operands), b2 sel0, b3 sel1 (a stage's "
                    "second operand is the src1 element, not the immediate)"),
    (None, 8, "u", "reserved"),
    ("imm0", 32, "f32", "first stage's immediate"), ("imm1", 32, "f32", "second's"))

#: The collective engine's immediates (docs/collectives.md §12): the reduce ``op`` (an
#: ``ALU_*`` code: add, max or min), the ``stream`` the collective belongs to and ``d``, the
#: rank offset of send_recv.
_CC_IMM = _fields(
    0, ("op", 8, "u", "reduce operation: ALU_ADD, ALU_MAX or ALU_MIN"),
    ("stream", 4, "u", "collective stream: the k-th collective of a stream on every rank "
                       "is one collective"), (None, 4, "u", "reserved"),
    ("d", 8, "u", "send_recv: send to rank (r + d) mod n, receive from (r - d) mod n; d < n"))

#: Every opcode (§8.4). Ranges: 0x00-0x0F any engine, 0x10 tensor, 0x20 vector, 0x30 scalar,
#: 0x40 GpSimd [later], 0x50 sync, 0x60 collective.
OPCODES = (
    Op(0x00, "nop", None, doc="no operation: waits and posts only"),
    Op(0x0E, "notify", None, imm=_imm(("code", 16, "u", "value shown to the host")),
       doc="raise the notify interrupt"),
    Op(0x0F, "halt", None, doc="stop this engine's stream (the queue is done)"),
    # ---- tensor engine ------------------------------------------------------------------------
    Op(0x10, "load_stationary", "pe", aps={"ap1": "stationary"}, flags=("sparse", "mx"),
       imm=_imm(("sp_n", 8, "u", "N of the N:M pattern (sparse flag)"),
                ("sp_m", 8, "u", "M of the N:M pattern (sparse flag)")),
       doc="load K partitions x M elements into the shadow weights (K = count, M = elements)"),
    Op(0x11, "multiply_moving", "pe", aps={"ap0": "psum", "ap1": "moving", "ap2": "scales"},
       flags=("acc", "sparse", "mx"),
       imm=_imm(("sp_n", 8, "u", "N of the N:M pattern (sparse flag)"),
                ("sp_m", 8, "u", "M of the N:M pattern (sparse flag)")),
       doc="PSUM[M, N] (=|+=) W^T X over K moving partitions x N elements (`matmul`)"),
    Op(0x12, "transpose", "pe", aps={"ap0": "psum", "ap1": "src"},
       doc="PSUM <- transpose of a K x N tile (bit-exact bypass)"),
    # ---- vector engine: one immediate layout for every opcode (docs/vector.md) -------------
    *(Op(code, name, "dve", aps=dict(zip(("ap0", "ap1", "ap2"), ("dst", "src0", "src1")[:n])),
         flags=("sr",), imm=_VEC_IMM, doc=doc) for code, name, n, doc in (
        (0x20, "tensor_tensor", 3, "dst = src0 op0 src1, element-wise (rev0 swaps the operands; "
                                   "op1, sel and the immediates are ignored)"),
        (0x21, "tensor_scalar", 3, "dst = (src0 op0 imm0) op1 imm1; sel: per-partition src1"),
        (0x22, "tensor_reduce", 2, "dst[p] = op1-reduction of src0 (op0 imm0)[p, :]"),
        (0x23, "tensor_copy", 2, "dst = src0, with the formats' cast"),
        (0x24, "memset", 1, "dst = imm0"),
        (0x25, "select", 3, "dst = src1 where src0 is nonzero (sign ignored, NaN counts), else "
                            "imm0; op*, sel*, rev* ignored"),
        (0x26, "iota", 1, "dst = f(element index, partition index) through op0/op1"),
        (0x27, "tensor_tensor_scan", 3, "r_i = (r_(i-1) op0 src0_i) op1 src1_i from imm0"),
        (0x28, "max8", 2, "the 8 largest values (or their indices) per partition"),
        (0x29, "bn_stats", 2, "dst[p] = [n, sum x, sum x*x] of src0[p, :] (layer-norm stats)"),
        (0x2A, "bn_aggr", 2, "dst[p] = [mean, var] of src0[p, :] triples [n, sum, sum sq]"),
        (0x2B, "affine_select", 2, "dst = src0 if (off + cp*p + ci*i) op0 0 else imm0; imm1 = "
                                   "off (b15:0), ci (b23:16), cp (b31:24)"),
        (0x2C, "block_transpose", 2, "dst[s + j, i] = src0[s + i, j], a B x B block, B = min(32, P)"),
        (0x2D, "find_index8", 3, "dst[p, j] = index of the first src0[p, :] equal (FP32 bits) to "
                                 "src1[p, j], j < 8; -1 if none"))),
    # ---- scalar (activation) engine -----------------------------------------------------------
    Op(0x30, "activation", "act", aps={"ap0": "dst", "ap1": "src0", "ap2": "bias"},
       flags=("sr",),
       imm=_imm(("func", 8, "u", "function id (the loaded table's)"),
                ("reduce_cmd", 8, "u", "0 idle, 1 reset, 2 reduce, 3 reset_reduce"),
                ("bias_ap", 8, "u", "1: bias per partition from AP2"),
                ("scale_ap", 8, "u", "1: scale per partition from AP2 (not with bias_ap)"),
                ("scale", 32, "f32", "scale"), ("bias", 32, "f32", "bias (bias_ap 0)")),
       doc="dst = f(src0 * scale + bias), optional add-reduce into the accumulators"),
    Op(0x31, "act_table_load", "act", aps={"ap1": "table"},
       imm=_imm(("func", 8, "u", "function id loaded (must equal the image's word 9)")),
       doc="load a function's table: FP32 words (golden.activation.table_words order) over "
           "one or more partitions (word k: element k // n of partition start + k % n); a "
           "word count no image has is a static E_FORMAT"),
    # ---- sync engine --------------------------------------------------------------------------
    Op(0x50, "dma_start", "sp",
       imm=_imm(("engine", 8, "u", "DMA engine"), ("queue", 8, "u", "queue of that engine"),
                ("count", 16, "u", "descriptors"),
                ("desc_addr", 64, "u", "DRAM address of the first 64-byte descriptor")),
       doc="enqueue descriptors on a DMA queue (they post their own semaphores)"),
    # ---- collective engine (docs/collectives.md §12; no sequencer in the RTL core yet, so
    # ---- its decoders reject these as foreign, E_OPCODE) -------------------------------------
    *(Op(code, name, "cc", aps={"ap0": "dst", "ap1": "src"},
         imm=tuple(f for f in _CC_IMM if f.name in fields), doc=doc)
      for code, name, fields, doc in (
        (0x60, "all_reduce", ("op", "stream"),
         "dst = op-reduction over every rank of src (FP32, rounded once into dst's dtype)"),
        (0x61, "reduce_scatter", ("op", "stream"),
         "dst = chunk `rank` of the op-reduction over every rank of src"),
        (0x62, "all_gather", ("stream",),
         "dst = every rank's src, in rank order"),
        (0x63, "all_to_all", ("stream",),
         "src = n blocks, block j to rank j; dst = the blocks sent to this rank, by sender"),
        (0x64, "send_recv", ("stream", "d"),
         "send src to rank + d, dst = what rank - d sends (modulo the ring size)"))),
)
OPS_BY_NAME = {op.name: op for op in OPCODES}
OPS_BY_CODE = {op.code: op for op in OPCODES}

# ---- opcodes by name: the engines' decoders and golden models compare against these --------
OP_TENSOR_TENSOR = OPS_BY_NAME["tensor_tensor"].code
OP_TENSOR_SCALAR = OPS_BY_NAME["tensor_scalar"].code
OP_TENSOR_REDUCE = OPS_BY_NAME["tensor_reduce"].code
OP_TENSOR_COPY = OPS_BY_NAME["tensor_copy"].code
OP_MEMSET = OPS_BY_NAME["memset"].code
OP_SELECT = OPS_BY_NAME["select"].code
OP_IOTA = OPS_BY_NAME["iota"].code
OP_TENSOR_TENSOR_SCAN = OPS_BY_NAME["tensor_tensor_scan"].code
OP_MAX8 = OPS_BY_NAME["max8"].code
OP_BN_STATS = OPS_BY_NAME["bn_stats"].code
OP_BN_AGGR = OPS_BY_NAME["bn_aggr"].code
OP_AFFINE_SELECT = OPS_BY_NAME["affine_select"].code
#: The vector engine's block transpose (``OP_TRANSPOSE`` in ``rtl.vector.isa``/``golden.vector``).
OP_BLOCK_TRANSPOSE = OPS_BY_NAME["block_transpose"].code
OP_FIND_INDEX8 = OPS_BY_NAME["find_index8"].code
#: The vector engine's opcodes, in code order.
VECTOR_OPCODES = tuple(op.code for op in OPCODES if op.engine == "dve")
OP_ALL_REDUCE = OPS_BY_NAME["all_reduce"].code
OP_REDUCE_SCATTER = OPS_BY_NAME["reduce_scatter"].code
OP_ALL_GATHER = OPS_BY_NAME["all_gather"].code
OP_ALL_TO_ALL = OPS_BY_NAME["all_to_all"].code
OP_SEND_RECV = OPS_BY_NAME["send_recv"].code
#: The collective engine's opcodes (the CC queue), in code order.
CC_OPCODES = tuple(op.code for op in OPCODES if op.engine == "cc")

# ---- the vector engine's immediates (docs/vector.md) -------------------------------------
#: ALU operations of the 4-bit ``op0`` / ``op1`` fields, and their names.
(ALU_BYPASS, ALU_ADD, ALU_SUB, ALU_MUL, ALU_MAX, ALU_MIN, ALU_EQ, ALU_NE, ALU_LT, ALU_LE,
 ALU_GT, ALU_GE, ALU_AND, ALU_OR, ALU_XOR, ALU_SEL) = range(16)
ALU_NAMES = ("bypass", "add", "subtract", "multiply", "max", "min", "is_equal", "not_equal",
             "is_lt", "is_le", "is_gt", "is_ge", "bitwise_and", "bitwise_or", "bitwise_xor",
             "select")
#: The ``op1`` values TENSOR_REDUCE accepts.
REDUCE_OPS = (ALU_ADD, ALU_MAX, ALU_MIN)
#: MAX8: values kept per partition (FIND_INDEX8: values looked for).
MAX8_K = 8
#: BN_STATS writes ``[n, S, Q]`` per partition; BN_AGGR reads such triples, writes ``[mean, var]``.
BN_STATS_N, BN_AGGR_N = 3, 2
#: BN_AGGR's reciprocal: seed ``bits(r0) = BN_RCP_MAGIC - bits(n)``, then Newton steps.
BN_RCP_MAGIC, BN_NEWTON_STEPS = 0x7EF311C3, 3
#: Bits of IOTA's element index (taken modulo ``2**IOTA_BITS``, exact in FP32).
IOTA_BITS = 24

# ---- the scalar engine ---------------------------------------------------------------------
#: Functions of the activation's ``func`` immediate, in id order (the id is the index).
ACT_FUNCTIONS = ("identity", "relu", "exp", "tanh", "sigmoid", "gelu", "gelu_tanh", "silu",
                 "softplus", "erf", "log", "sqrt", "rsqrt", "reciprocal", "square", "sign", "abs")
#: ``reduce_cmd``: leave the accumulators / zero them / add this instruction's outputs / zero
#: then add.
ACT_REDUCE_IDLE, ACT_REDUCE_RESET, ACT_REDUCE_REDUCE, ACT_REDUCE_RESET_REDUCE = 0, 1, 2, 3
OP_ACTIVATION = OPS_BY_NAME["activation"].code
OP_ACT_TABLE_LOAD = OPS_BY_NAME["act_table_load"].code
#: Scalar-engine codes of §8.4 that :data:`OPCODES` does not define: the sequencer rejects them
#: (``E_OPCODE``); on the engine's decoded ``instr`` stream COPY runs (``dst`` = ``src`` with
#: the formats' cast, docs/scalar.md) and TENSOR_SCALAR is ``E_OPCODE``.
OP_ACT_TENSOR_SCALAR = 0x32
OP_ACT_COPY = 0x33

# ---- DMA descriptor (docs/dma.md §2), read by dma_start -------------------------------------
#: Bytes of one DMA descriptor (``dma_start``'s ``desc_addr`` points at the first); its fields
#: are ``rtl.dma.descriptor.DESC_LAYOUT``.
DESC_BYTES = 64
#: Dimension slots (num, src_stride, dst_stride) of a descriptor.
DESC_DIMS = 4
#: Address spaces (2 bits): DRAM through the AXI4 master, the SBUF, the collective ring
#: (reserved, rejected).
DMA_DRAM, DMA_SBUF, DMA_RING = 0, 1, 2
#: Descriptor ``op``: what the element path does into the destination.
DMA_OP_COPY, DMA_OP_ADD, DMA_OP_MAX, DMA_OP_MIN = 0, 1, 2, 3
#: Descriptor ``op`` -> name.
DMA_OP_NAMES = {DMA_OP_COPY: "copy", DMA_OP_ADD: "add", DMA_OP_MAX: "max", DMA_OP_MIN: "min"}
#: Descriptor ``rounding`` of the FP32 result into the destination format.
DMA_RND_RNE, DMA_RND_SR = 0, 1
#: Field ids of a DMA error's detail word (``info[7:0]``; ``info[8]`` side, ``[11:10]``
#: dimension, ``[13:12]`` AXI response; docs/dma.md §3).
(DMA_F_RESERVED, DMA_F_OP, DMA_F_SPACE, DMA_F_DTYPE, DMA_F_NUM, DMA_F_DIM0, DMA_F_SEM,
 DMA_F_ELEMWISE, DMA_F_ADDR_ALIGN, DMA_F_STRIDE_ALIGN, DMA_F_LANE, DMA_F_RANGE, DMA_F_RRESP,
 DMA_F_BRESP, DMA_F_TIMEOUT) = range(1, 16)
#: DMA engine ``e`` rounds stochastically with XORWOW lane ``DMA_SR_LANE_BASE + e`` of
#: ``cfg.sr_seed`` (docs/dma.md §2); lanes 0..P-1 are the compute engines' partition lanes.
DMA_SR_LANE_BASE = 1 << 16


def header_bits(raw, name):
    """Header field ``name`` (:data:`HEADER`) of an instruction's bits ``raw``."""
    return _HEADER_BY_NAME[name].of(raw)


def ap_bits(raw, slot, name):
    """Field ``name`` (:data:`AP_FIELDS`) of AP ``slot`` (``"ap0"``..) of ``raw``."""
    return _AP_BY_NAME[name].of(raw, 8 * AP_SLOTS[slot])


def imm_bits(raw, op_name, name):
    """Immediate ``name`` of opcode ``op_name`` of ``raw``."""
    return OPS_BY_NAME[op_name].imm_fields[name].of(raw, 8 * IMM_BYTE)


_HEADER_BY_NAME = {f.name: f for f in HEADER}
_AP_BY_NAME = {f.name: f for f in AP_FIELDS}


@dataclass(frozen=True)
class APEnc:
    """One AP as encoded: ``mem`` (1 SBUF, 2 PSUM), ``start``, ``count``, ``dtype`` (a name of
    :data:`DTYPES`), ``offset`` (bytes), ``dims`` ((step, num) pairs, innermost first)."""
    mem: int
    start: int
    count: int
    dtype: str
    offset: int
    dims: tuple

    def word(self):
        code = dtype_code(self.dtype)
        if len(self.dims) > 4:
            raise ValueError(f"AP dims must have at most 4 (step, num) pairs, not {len(self.dims)}")
        vals = {"mem": self.mem, "start": self.start, "count": self.count,
                "dtype": code, "reserved": 0, "offset": self.offset}
        for d in range(4):
            step, num = self.dims[d] if d < len(self.dims) else (0, 0)
            vals[f"step{d}"], vals[f"num{d}"] = step, num
        w = 0
        for f in AP_FIELDS:
            w |= f.put(vals[f.name], "AP")
        return w

    @classmethod
    def from_word(cls, w):
        v = {f.name: f.get(w) for f in AP_FIELDS}
        dims = [(v[f"step{d}"], v[f"num{d}"]) for d in range(4)]
        while dims and dims[-1] == (0, 0):   # trailing unused pairs; a malformed list stays
            dims.pop()
        return cls(mem=v["mem"], start=v["start"], count=v["count"],
                   dtype=dtype_name(v["dtype"]), offset=v["offset"], dims=tuple(dims))


@dataclass(frozen=True)
class Instr:
    """A decoded instruction: ``op`` (mnemonic), ``flags`` (names set), ``wait`` (``(sem,
    value)`` or ``None``), ``post`` (``(sem, inc)`` or ``None``), ``irq`` (raise the interrupt at
    completion), ``aps`` (slot -> :class:`APEnc`, only the slots the opcode uses), ``imm`` (field
    name -> value)."""
    op: str
    flags: frozenset = frozenset()
    wait: tuple | None = None
    post: tuple | None = None
    irq: bool = False
    aps: dict = field(default_factory=dict)
    imm: dict = field(default_factory=dict)

    def __hash__(self):
        return hash((self.op, self.flags, self.wait, self.post, self.irq,
                     tuple(sorted(self.aps.items())), tuple(sorted(self.imm.items()))))

    @property
    def opcode(self):
        return OPS_BY_NAME[self.op]


def encode(ins: Instr) -> bytes:
    """The 128 bytes of ``ins``. ``ValueError``/``TypeError`` name the field that does not fit,
    an unknown opcode, a flag the opcode does not take, an AP slot it does not use or an
    immediate it does not have."""
    if ins.op not in OPS_BY_NAME:
        raise ValueError(f"instruction op must be one of {sorted(OPS_BY_NAME)}, not {ins.op!r}")
    op = OPS_BY_NAME[ins.op]
    bad = set(ins.flags) - set(op.flags)
    if bad:
        raise ValueError(f"{op.name} takes the flags {list(op.flags)}, not {sorted(bad)}")
    bad = set(ins.aps) - set(op.aps)
    if bad:
        raise ValueError(f"{op.name} uses the AP slots {list(op.aps)}, not {sorted(bad)}")
    bad = set(ins.imm) - set(op.imm_fields)
    if bad:
        raise ValueError(f"{op.name} has the immediates {list(op.imm_fields)}, not {sorted(bad)}")
    hv = {"opcode": op.code, "flags": sum(1 << FLAG_BITS[f] for f in ins.flags),
          "wait_sem": 0, "post_sem": 0, "wait_val": 0, "post_inc": 0, "reserved": 0}
    ctl = 0
    if ins.wait is not None:
        hv["wait_sem"], hv["wait_val"] = ins.wait
        ctl |= 1 << CTL_BITS["wait_en"]
    if ins.post is not None:
        hv["post_sem"], hv["post_inc"] = ins.post
        ctl |= 1 << CTL_BITS["post_en"]
    if ins.irq:
        ctl |= 1 << CTL_BITS["irq"]
    hv["ctl"] = ctl
    w = 0
    for f in HEADER:
        w |= f.put(hv[f.name])
    for slot, ap in ins.aps.items():
        w |= ap.word() << (8 * AP_SLOTS[slot])
    for name, value in ins.imm.items():
        w |= op.imm_fields[name].put(value, f"{op.name} immediate") << (8 * IMM_BYTE)
    return w.to_bytes(INSTR_BYTES, "little")


def check_reserved(raw: bytes, engine: str | None = None):
    """``None`` if ``raw`` is a well-formed instruction for ``engine`` (any engine when
    ``None``), otherwise ``(E_OPCODE, reason)``: unknown or foreign opcode, a reserved header,
    flag, ctl or AP bit set, a flag the opcode does not take, an unused AP slot not zero, or an
    immediate bit outside the opcode's fields."""
    if len(raw) != INSTR_BYTES:
        raise ValueError(f"an instruction must be {INSTR_BYTES} bytes, not {len(raw)}")
    w = int.from_bytes(raw, "little")
    h = {f.name: f.get(w) for f in HEADER}
    op = OPS_BY_CODE.get(h["opcode"])
    if op is None:
        return E_OPCODE, f"unknown opcode 0x{h['opcode']:02x}"
    if engine is not None and op.engine not in (None, engine):
        return E_OPCODE, f"opcode {op.name} belongs to engine {op.engine}, not {engine}"
    if h["reserved"] or h["ctl"] & _CTL_RESERVED or h["flags"] & _FLAGS_RESERVED:
        return E_OPCODE, "reserved header bit set"
    allowed = sum(1 << FLAG_BITS[f] for f in op.flags)
    if h["flags"] & ~allowed:
        return E_OPCODE, f"flag not taken by {op.name}"
    for slot, byte in AP_SLOTS.items():
        apw = (w >> (8 * byte)) & ((1 << (8 * AP_BYTES)) - 1)
        if slot not in op.aps and apw:
            return E_OPCODE, f"{slot} not used by {op.name} must be 0"
        if slot in op.aps and (apw >> 22) & 0x3FF:
            return E_OPCODE, f"{slot} reserved bits set"
    imm = w >> (8 * IMM_BYTE)
    mask = sum(((1 << f.width) - 1) << f.lsb for f in op.imm)
    if imm & ~mask:
        return E_OPCODE, f"immediate bits outside {op.name}'s fields"
    return None


def decode(raw: bytes) -> Instr:
    """The :class:`Instr` of 128 well-formed bytes; ``ValueError`` with the reason otherwise
    (the hardware's ``E_OPCODE``)."""
    err = check_reserved(raw)
    if err is not None:
        raise ValueError(f"malformed instruction: {err[1]}")
    w = int.from_bytes(raw, "little")
    h = {f.name: f.get(w) for f in HEADER}
    op = OPS_BY_CODE[h["opcode"]]
    flags = frozenset(n for n, b in FLAG_BITS.items() if h["flags"] >> b & 1)
    ctl = h["ctl"]
    aps = {}
    for slot in op.aps:
        apw = (w >> (8 * AP_SLOTS[slot])) & ((1 << (8 * AP_BYTES)) - 1)
        if apw:
            aps[slot] = APEnc.from_word(apw)
    imm_w = w >> (8 * IMM_BYTE)
    # canonical form: only the immediates whose bits are not all zero
    imm = {f.name: f.get(imm_w) for f in op.imm if (imm_w >> f.lsb) & ((1 << f.width) - 1)}
    return Instr(op=op.name, flags=flags,
                 wait=(h["wait_sem"], h["wait_val"]) if ctl >> CTL_BITS["wait_en"] & 1 else None,
                 post=(h["post_sem"], h["post_inc"]) if ctl >> CTL_BITS["post_en"] & 1 else None,
                 irq=bool(ctl >> CTL_BITS["irq"] & 1), aps=aps, imm=imm)
