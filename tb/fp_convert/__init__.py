# SPDX-License-Identifier: Apache-2.0
"""Testbenches of the FP32 conversion units (``rtl.fp.convert``, ``rtl.fp.widen``, ``rtl.fp.prng``).

``designs`` names the format sets the tests build with (the units themselves come from
:mod:`tb.units`), ``vectors`` makes the numpy test vectors and golden expectations, ``common``
compares streams with golden, and ``tb_convert`` and ``tb_widen`` are the cocotb modules run
through ``tb.units.sim`` (a ``tb.harness.VectorHarness`` around the unit).
"""
