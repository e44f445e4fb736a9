# SPDX-License-Identifier: Apache-2.0
"""Testbenches of the FP arithmetic units (``rtl.fp.multiplier``, ``rtl.fp.fma``,
``rtl.fp.adder``).

``vectors`` makes numpy stimulus and golden expectations; ``tb_mul``, ``tb_fma``, ``tb_add`` are
the cocotb modules, run through ``tb.units.sim`` (a ``tb.harness.VectorHarness`` around the
unit) and streamed with ``tb.units.pipeline_tb``.
"""
