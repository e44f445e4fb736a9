# SPDX-License-Identifier: Apache-2.0
"""The decoded Vector-engine instruction (``docs/vector.md``): opcodes, ALU operations, dtype
codes and :func:`instr_layout`, the payload of :class:`~rtl.vector.engine.VectorEngine`'s
``instr`` stream (what the §8.2 decoder will fill from the 128-byte instruction)."""

from __future__ import annotations

from amaranth.lib import data

from rtl.config import CoreConfig, check_config
from rtl.mem.ap import APGenerator, esize_of

__all__ = [
    "OP_TENSOR_TENSOR", "OP_TENSOR_SCALAR", "OP_TENSOR_REDUCE", "OP_TENSOR_COPY", "OP_MEMSET",
    "OP_SELECT", "OP_IOTA", "OP_TENSOR_TENSOR_SCAN", "OP_MAX8", "MAX8_K", "IOTA_BITS", "OPCODES", "ALU_BYPASS", "ALU_ADD", "ALU_SUB", "ALU_MUL", "ALU_MAX", "ALU_MIN",
    "ALU_EQ", "ALU_NE", "ALU_LT", "ALU_LE", "ALU_GT", "ALU_GE", "ALU_AND", "ALU_OR", "ALU_XOR",
    "ALU_SEL", "REDUCE_OPS", "DTYPE_NAMES", "E_OPCODE", "E_FORMAT", "E_SHAPE", "instr_layout",
    "done_layout", "dtype_table", "OP_BN_STATS", "OP_BN_AGGR", "OP_AFFINE_SELECT",
    "OP_TRANSPOSE", "BN_STATS_N", "BN_AGGR_N", "BN_RCP_MAGIC", "BN_NEWTON_STEPS",
    "transpose_block", "OP_FIND_INDEX8",
]

#: Opcodes (docs/architecture.md §8.4, vector range 0x20-0x2F; the others are E_OPCODE).
OP_TENSOR_TENSOR, OP_TENSOR_SCALAR, OP_TENSOR_REDUCE = 0x20, 0x21, 0x22
OP_TENSOR_COPY, OP_MEMSET, OP_SELECT, OP_IOTA = 0x23, 0x24, 0x25, 0x26
OP_TENSOR_TENSOR_SCAN, OP_MAX8 = 0x27, 0x28
OP_BN_STATS, OP_BN_AGGR, OP_AFFINE_SELECT, OP_TRANSPOSE = 0x29, 0x2A, 0x2B, 0x2C
#: FIND_INDEX8: per partition the index of the first src0 element equal to each of 8 src1 values.
OP_FIND_INDEX8 = 0x2D
OPCODES = (OP_TENSOR_TENSOR, OP_TENSOR_SCALAR, OP_TENSOR_REDUCE, OP_TENSOR_COPY, OP_MEMSET,
           OP_SELECT, OP_IOTA, OP_TENSOR_TENSOR_SCAN, OP_MAX8, OP_BN_STATS, OP_BN_AGGR,
           OP_AFFINE_SELECT, OP_TRANSPOSE, OP_FIND_INDEX8)
#: BN_STATS writes ``[n, S, Q]`` per partition, BN_AGGR ``[mean, var]``.
BN_STATS_N, BN_AGGR_N = 3, 2
#: BN_AGGR's reciprocal: seed ``bits(r0) = BN_RCP_MAGIC - bits(n)``, then Newton steps.
BN_RCP_MAGIC, BN_NEWTON_STEPS = 0x7EF311C3, 3
#: MAX8: values kept per partition (FIND_INDEX8: values looked for).
MAX8_K = 8
#: Bits of IOTA's element index (taken modulo 2**IOTA_BITS, exact in FP32).
IOTA_BITS = 24

#: ALU operations of the 4-bit ``op0``/``op1`` fields.
(ALU_BYPASS, ALU_ADD, ALU_SUB, ALU_MUL, ALU_MAX, ALU_MIN, ALU_EQ, ALU_NE, ALU_LT, ALU_LE,
 ALU_GT, ALU_GE, ALU_AND, ALU_OR, ALU_XOR, ALU_SEL) = range(16)
#: ``op1`` values of TENSOR_REDUCE.
REDUCE_OPS = (ALU_ADD, ALU_MAX, ALU_MIN)

#: AP dtype codes (docs/architecture.md §8.3); 8 (fp4_e2m1), 9 (e8m0) and 10-15 are E_FORMAT.
DTYPE_NAMES = {0: "fp32", 1: "tf32", 2: "bf16", 3: "fp16", 4: "fp8_e5m2", 5: "fp8_e4m3",
               6: "fp8_e4m3fn", 7: "cfp8"}

#: Engine error codes (docs/architecture.md §11.2); AP codes come from the AP generator.
E_OPCODE, E_FORMAT, E_SHAPE = 0x01, 0x02, 0x05


def transpose_block(cfg: CoreConfig):
    """TRANSPOSE's block: ``B = min(32, cfg.partitions)`` partitions x B elements."""
    return min(32, check_config(cfg, "transpose_block").partitions)


def dtype_table(cfg: CoreConfig):
    """``{code: (name, esize, narrow_index)}`` of the dtypes the engine accepts: fp32 always
    (``narrow_index`` None: no widen/convert), and every enabled dense format, numbered in code
    order among the non-fp32 ones (the index of the widen/convert format tuples)."""
    check_config(cfg, "dtype_table")
    enabled = {f.name for f in cfg.dense_formats} | {"fp32"}
    out, k = {}, 0
    for code, name in DTYPE_NAMES.items():
        if name not in enabled:
            continue
        esize = esize_of(cfg.fmt(name))
        if name == "fp32":
            out[code] = (name, esize, None)
        else:
            out[code] = (name, esize, k)
            k += 1
    return out


def instr_layout(cfg: CoreConfig):
    """One decoded instruction.

    Fields: ``opcode`` (8), ``dst``/``src0``/``src1`` (the :class:`~rtl.mem.ap.APGenerator`
    descriptor; ``mem`` picks SBUF (1) or PSUM (2); ``esize`` is ignored, the dtype sets it),
    ``dst_dtype``/``src0_dtype``/``src1_dtype`` (4, §8.3 codes), ``sr`` (1: stochastic rounding
    on write), ``op0``/``op1`` (4, ALU operations), ``rev0``/``rev1`` (swap the stage's
    operands), ``sel0``/``sel1`` (the stage's second operand is the src1 element instead of the
    immediate: per-partition scalars are a src1 AP with zero steps), ``imm0``/``imm1`` (FP32
    bits).
    """
    desc = APGenerator.Signature(check_config(cfg, "instr_layout")).in_layout
    return data.StructLayout({
        "opcode": 8, "dst": desc, "src0": desc, "src1": desc,
        "dst_dtype": 4, "src0_dtype": 4, "src1_dtype": 4, "sr": 1,
        "op0": 4, "op1": 4, "rev0": 1, "rev1": 1, "sel0": 1, "sel1": 1,
        "imm0": 32, "imm1": 32,
    })


def done_layout():
    """One completion: ``status`` (8; 0 = ok, else the §11.2 code)."""
    return data.StructLayout({"status": 8})
