# SPDX-License-Identifier: Apache-2.0
"""Scalar (activation) engine: ``y = f(x * scale + bias)`` per element from loadable tables.

``function.py`` the per-lane function unit, ``engine.py`` the engine (instructions, AP ports,
lanes, accumulators), ``isa.py`` the instruction fields (docs/scalar.md); the algorithm, the
table format and the instruction contract are specified by ``golden/activation/``
(``evaluator.py``, ``image.py``, ``instr.py``).
"""
