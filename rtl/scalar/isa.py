# SPDX-License-Identifier: Apache-2.0
"""Scalar-engine instruction fields (docs/architecture.md §8.2-§8.4, docs/scalar.md): opcodes
of the 0x30-0x3F range, function ids, ``reduce_cmd`` codes, and the decoded-instruction
layout the engine takes on its ``instr`` stream.

The function ids are the order of ``golden.activation.FUNCTIONS`` (a test holds the two lists
equal); a table for any id is loaded with ``ACT_TABLE_LOAD`` (the function unit's table-write
port, ``rtl/scalar/function.py``)."""

from amaranth.lib import data

from rtl.config import ACT_HEADER_WORDS as TABLE_HEADER_WORDS, check_config
from rtl.isa import (ACT_FUNCTIONS as FUNCTION_NAMES, ACT_REDUCE_IDLE as REDUCE_IDLE,
                     ACT_REDUCE_REDUCE as REDUCE_REDUCE, ACT_REDUCE_RESET as REDUCE_RESET,
                     ACT_REDUCE_RESET_REDUCE as REDUCE_RESET_REDUCE, E_AP_ALIGN, E_AP_FORM,
                     E_AP_PART, E_AP_RANGE, E_FORMAT, E_OK, E_OPCODE, E_SHAPE, ERROR_BITS,
                     OP_ACT_COPY as OP_COPY, OP_ACT_TABLE_LOAD,
                     OP_ACT_TENSOR_SCALAR as OP_TENSOR_SCALAR, OP_ACTIVATION)
from rtl.mem.ap import APGenerator

__all__ = ["OP_ACTIVATION", "OP_ACT_TABLE_LOAD", "OP_TENSOR_SCALAR", "OP_COPY", "OPCODES",
           "FUNCTION_NAMES", "REDUCE_IDLE", "REDUCE_RESET", "REDUCE_REDUCE",
           "REDUCE_RESET_REDUCE", "OPERAND_IMM", "OPERAND_AP", "instr_layout", "done_layout",
           "E_OK", "E_OPCODE", "E_FORMAT", "E_AP_PART", "E_AP_RANGE", "E_SHAPE", "E_AP_ALIGN",
           "E_AP_FORM", "TABLE_HEADER_WORDS"]

#: Opcodes (rtl/isa.py): ACTIVATION, ACT_TABLE_LOAD, and TENSOR_SCALAR / COPY, which only
#: this engine's ``instr`` stream carries.
OPCODES = (OP_ACTIVATION, OP_ACT_TABLE_LOAD, OP_TENSOR_SCALAR, OP_COPY)

# FUNCTION_NAMES (rtl.isa.ACT_FUNCTIONS) and the ``reduce_cmd`` codes REDUCE_* (rtl.isa's
# ACT_REDUCE_*: golden.activation.activation_reduce) come from rtl.isa, TABLE_HEADER_WORDS
# from rtl.config (ACT_HEADER_WORDS).
#: ``scale_src`` / ``bias_src``: the FP32 immediate, or one value per partition from an AP.
OPERAND_IMM, OPERAND_AP = 0, 1

# A table image's header is TABLE_HEADER_WORDS words (addresses 0..9); ``ACT_TABLE_LOAD`` takes
# the header, the ``2 * ACT_BINADES`` binade-map words, then 9 words per segment
# (golden.activation.table_words).


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
    """Completion record: ``status`` (``ERROR_BITS``, ``E_*``), ``opcode`` (8) of the finished
    instruction."""
    check_config(cfg, "done_layout")
    return data.StructLayout({"status": ERROR_BITS, "opcode": 8})
