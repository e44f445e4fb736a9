# SPDX-License-Identifier: Apache-2.0
"""The decoded Vector-engine instruction (``docs/vector.md``): opcodes, ALU operations, dtype
codes and :func:`instr_layout`, the payload of :class:`~rtl.vector.engine.VectorEngine`'s
``instr`` stream (what the §8.2 decoder will fill from the 128-byte instruction)."""

from __future__ import annotations

from amaranth.lib import data

from rtl.config import DENSE_FORMAT_NAMES, CoreConfig, check_config
from rtl.isa import (ALU_ADD, ALU_AND, ALU_BYPASS, ALU_EQ, ALU_GE, ALU_GT, ALU_LE, ALU_LT,
                     ALU_MAX, ALU_MIN, ALU_MUL, ALU_NE, ALU_OR, ALU_SEL, ALU_SUB, ALU_XOR,
                     BN_AGGR_N, BN_NEWTON_STEPS, BN_RCP_MAGIC, BN_STATS_N, IOTA_BITS, MAX8_K,
                     REDUCE_OPS, DTYPES, E_FORMAT, E_OPCODE, E_SHAPE, ERROR_BITS, OP_AFFINE_SELECT,
                     OP_BLOCK_TRANSPOSE as OP_TRANSPOSE, OP_BN_AGGR, OP_BN_STATS, OP_FIND_INDEX8,
                     OP_IOTA, OP_MAX8, OP_MEMSET, OP_SELECT, OP_TENSOR_COPY, OP_TENSOR_REDUCE,
                     OP_TENSOR_SCALAR, OP_TENSOR_TENSOR, OP_TENSOR_TENSOR_SCAN,
                     VECTOR_OPCODES as OPCODES)
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

# Opcodes (docs/architecture.md §8.4, vector range 0x20-0x2F; the others are E_OPCODE) and the
# error codes the engine raises itself come from rtl.isa; OP_TRANSPOSE is its
# OP_BLOCK_TRANSPOSE, OPCODES its VECTOR_OPCODES.
# ALU operations, REDUCE_OPS, MAX8_K, BN_STATS_N / BN_AGGR_N, BN_RCP_MAGIC / BN_NEWTON_STEPS
# and IOTA_BITS are rtl.isa's (the vector engine's immediates).

#: AP dtype codes (rtl.isa.DTYPES) of the dense formats; fp4_e2m1, e8m0 and the reserved codes
#: are E_FORMAT.
DTYPE_NAMES = {code: name for code, name in enumerate(DTYPES) if name in DENSE_FORMAT_NAMES}


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
    """One completion: ``status`` (``ERROR_BITS``; 0 = ok, else the §11.2 code)."""
    return data.StructLayout({"status": ERROR_BITS})
