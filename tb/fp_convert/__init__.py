# SPDX-License-Identifier: Apache-2.0
"""Testbenches of the FP32 conversion units (``rtl.fp.convert``, ``rtl.fp.widen``, ``rtl.fp.prng``).

``designs`` rebuilds the exact designs the pytest side built (same params, same objects),
``vectors`` makes the numpy test vectors and golden expectations, ``tb_convert`` and ``tb_widen``
are the cocotb modules run through ``tb.runner.SimBuild`` + ``tb.harness.VectorHarness``.
"""
