# SPDX-License-Identifier: Apache-2.0
"""Testbenches of the FP arithmetic units (``rtl.fp.multiplier``, ``rtl.fp.fma``,
``rtl.fp.adder``).

``designs`` rebuilds the designs the pytest side built (same config, same params), ``vectors``
makes numpy stimulus and golden expectations, ``common`` streams and compares, and ``tb_mul``,
``tb_fma``, ``tb_add`` are the cocotb modules run through ``tb.runner.SimBuild`` +
``tb.harness.VectorHarness``.
"""
