# SPDX-License-Identifier: Apache-2.0
"""Testbenches of the FP32 conversion units (``rtl.fp.convert``, ``rtl.fp.widen``, ``rtl.fp.prng``).

``designs`` names the format sets the tests build with (the units themselves come from
:mod:`tb.fp.build`), ``program`` makes the numpy test vectors and golden expectations,
``driver`` compares streams with golden, and ``tb_convert`` and ``tb_widen`` are the cocotb
modules (one per unit) run through ``tb.fp.build.sim`` (a ``tb.fp.harness.VectorHarness``
around the unit).
"""
