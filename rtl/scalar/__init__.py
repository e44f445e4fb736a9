# SPDX-License-Identifier: Apache-2.0
"""Scalar (activation) engine: ``y = f(x * scale + bias)`` per element from loadable tables.

``function.py`` the per-lane function unit (docs/scalar.md); the algorithm and the table format
are specified by ``golden/activation.py``.
"""
