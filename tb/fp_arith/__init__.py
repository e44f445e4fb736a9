# SPDX-License-Identifier: Apache-2.0
"""Testbenches of the FP arithmetic units (``rtl.fp.multiplier``, ``rtl.fp.fma``,
``rtl.fp.adder``).

``program`` makes numpy stimulus and golden expectations; ``tb_mul``, ``tb_fma``, ``tb_add`` are
the cocotb modules (one per unit), run through ``tb.fp.build.sim`` (a
``tb.fp.harness.VectorHarness`` around the unit) and streamed with ``tb.fp.build.pipeline_tb``.
"""
