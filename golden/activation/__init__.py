# SPDX-License-Identifier: Apache-2.0
"""Bit-exact model of the Scalar (activation) engine's function unit, its loadable tables and its
instructions (``docs/scalar.md``).

An activation is ``y = f(RNE_fp32(x * scale + bias))``, ``f`` evaluated from a *table* by FP32
fused MACs, so this numpy model is the hardware bit for bit; a new function is a new table, not
new hardware. One module per concern:

- :mod:`golden.activation.table_format`: the table record :class:`ActTable`, its constants,
  :func:`fma32`;
- :mod:`golden.activation.evaluator`: the function unit's datapath (:func:`evaluate`) and the
  activation's arithmetic (:func:`activation`);
- :mod:`golden.activation.references`: float64 references and the ULP error measure;
- :mod:`golden.activation.fit`: the table generation (:func:`table`, :func:`build_table`);
- :mod:`golden.activation.image`: the table's word image and ``ACT_TABLE_LOAD`` stream;
- :mod:`golden.activation.instr`: the instructions on memory images (:class:`ActInstr`,
  :func:`check_instr`, :func:`execute`, :func:`table_load`, :func:`activation_reduce`).

Every public name is re-exported here: ``from golden.activation import X``.
"""

from golden.activation.evaluator import activation, evaluate
from golden.activation.fit import build_table, table
from golden.activation.image import (TABLE_HEADER_WORDS, stream_addresses, table_image,
                                     table_size_ok, table_words)
from golden.activation.instr import (DTYPE_NAMES, E_FORMAT, E_OK, E_OPCODE, E_SHAPE,
                                     OP_ACT_TABLE_LOAD, OP_ACTIVATION, OP_COPY, OP_TENSOR_SCALAR,
                                     REDUCE_IDLE, REDUCE_REDUCE, REDUCE_RESET,
                                     REDUCE_RESET_REDUCE, ActInstr, activation_reduce,
                                     check_instr, execute, sr_words, table_load)
from golden.activation.references import DOMAINS, reference, ulp_error
from golden.activation.table_format import (DEGREE, FUNCTION_IDS, FUNCTIONS, LN2_HI, LN2_LO,
                                            LOG2E, MAGIC, NCOEF, NEG_ZERO, ONE, PRE_DIRECT,
                                            PRE_EVEN, PRE_LOG, PRE_PLAIN, SYM_EVEN, SYM_NONE,
                                            SYM_ODD, ZCLAMP, ActTable, fma32)

__all__ = [
    "FUNCTIONS", "FUNCTION_IDS", "DEGREE", "NCOEF", "SYM_NONE", "SYM_ODD", "SYM_EVEN",
    "PRE_DIRECT", "PRE_LOG", "PRE_EVEN", "PRE_PLAIN", "LOG2E", "MAGIC", "LN2_HI", "LN2_LO",
    "ZCLAMP", "ONE", "NEG_ZERO", "ActTable", "fma32",
    "evaluate", "activation",
    "reference", "ulp_error", "DOMAINS",
    "table", "build_table",
    "TABLE_HEADER_WORDS", "table_image", "table_words", "stream_addresses", "table_size_ok",
    "REDUCE_IDLE", "REDUCE_RESET", "REDUCE_REDUCE", "REDUCE_RESET_REDUCE", "OP_ACTIVATION",
    "OP_ACT_TABLE_LOAD", "OP_TENSOR_SCALAR", "OP_COPY", "E_OK", "E_OPCODE", "E_FORMAT",
    "E_SHAPE", "DTYPE_NAMES", "ActInstr", "check_instr", "table_load", "execute", "sr_words",
    "activation_reduce",
]
