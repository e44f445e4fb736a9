# SPDX-License-Identifier: Apache-2.0
"""Scalar-engine instruction fields (docs/architecture.md §8.2-§8.4, docs/scalar.md): opcodes
of the 0x30-0x3F range, function ids, ``reduce_cmd`` codes, and the decoded-instruction
layout the engine takes on its ``instr`` stream.

The function ids are the order of ``golden.activation.FUNCTIONS`` (a test holds the two lists
equal); a table for any id is loaded with ``ACT_TABLE_LOAD`` (the function unit's table-write
port, ``rtl/scalar/function.py``)."""

from amaranth.lib import data

from rtl.config import check_config
from rtl.mem.ap import APGenerator

__all__ = ["OP_ACTIVATION", "OP_ACT_TABLE_LOAD", "OP_TENSOR_SCALAR", "OP_COPY", "OPCODES",
           "FUNCTION_NAMES", "REDUCE_IDLE", "REDUCE_RESET", "REDUCE_REDUCE",
           "REDUCE_RESET_REDUCE", "OPERAND_IMM", "OPERAND_AP", "instr_layout", "done_layout",
           "E_OK", "E_OPCODE", "E_FORMAT", "E_AP_PART", "E_AP_RANGE", "E_SHAPE", "E_AP_ALIGN",
           "E_AP_FORM", "TABLE_HEADER_WORDS"]

OP_ACTIVATION = 0x30
OP_ACT_TABLE_LOAD = 0x31
OP_TENSOR_SCALAR = 0x32
OP_COPY = 0x33
OPCODES = (OP_ACTIVATION, OP_ACT_TABLE_LOAD, OP_TENSOR_SCALAR, OP_COPY)

FUNCTION_NAMES = ("identity", "relu", "exp", "tanh", "sigmoid", "gelu", "gelu_tanh", "silu",
                  "softplus", "erf", "log", "sqrt", "rsqrt", "reciprocal", "square", "sign",
                  "abs")

#: ``reduce_cmd``: leave the accumulators / zero them / add this instruction's outputs /
#: zero then add (golden.activation.activation_reduce).
REDUCE_IDLE, REDUCE_RESET, REDUCE_REDUCE, REDUCE_RESET_REDUCE = 0, 1, 2, 3
#: ``scale_src`` / ``bias_src``: the FP32 immediate, or one value per partition from an AP.
OPERAND_IMM, OPERAND_AP = 0, 1

#: Header words of a table image (addresses 0..9); ``ACT_TABLE_LOAD`` takes the header, the
#: ``2 * ACT_BINADES`` binade-map words, then 9 words per segment (golden.activation.table_words).
TABLE_HEADER_WORDS = 10

#: docs/architecture.md §11.2.
E_OK, E_OPCODE, E_FORMAT, E_AP_PART, E_AP_RANGE, E_SHAPE = 0x00, 0x01, 0x02, 0x03, 0x04, 0x05
E_AP_ALIGN, E_AP_FORM = 0x0E, 0x0F


def instr_layout(cfg):
    """Decoded Scalar-engine instruction.

    ``opcode`` (8), ``func`` (8, function id), ``reduce_cmd`` (2), ``sr`` (1: stochastic
    rounding on write), ``dst``/``src``/``scale_ap``/``bias_ap`` (AP descriptors,
    :class:`rtl.mem.ap.APGenerator` ``in_layout``; the memory code picks SBUF or PSUM),
    ``dst_dtype``/``src_dtype``/``scale_dtype``/``bias_dtype`` (4 bits each, §8.3 codes),
    ``scale_src``/``bias_src`` (``OPERAND_*``), ``scale``/``bias`` (FP32 immediates).
    ``ACT_TABLE_LOAD`` reads the table image (32-bit words, ``golden.activation.table_image``
    order by address) through ``src``.
    """
    check_config(cfg, "instr_layout")
    ap = APGenerator.Signature(cfg).in_layout
    return data.StructLayout({
        "opcode": 8, "func": 8, "reduce_cmd": 2, "sr": 1,
        "dst": ap, "src": ap, "scale_ap": ap, "bias_ap": ap,
        "dst_dtype": 4, "src_dtype": 4, "scale_dtype": 4, "bias_dtype": 4,
        "scale_src": 1, "bias_src": 1, "scale": 32, "bias": 32,
    })


def done_layout(cfg):
    """Completion record: ``status`` (8, ``E_*``), ``opcode`` (8) of the finished instruction."""
    check_config(cfg, "done_layout")
    return data.StructLayout({"status": 8, "opcode": 8})
