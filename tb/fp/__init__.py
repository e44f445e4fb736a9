# SPDX-License-Identifier: Apache-2.0
"""The floating-point units' common testbench (``tb/fp_arith``, ``tb/fp_convert`` use it): the
Verilator harness that streams preloaded vectors through a pipeline (``harness.py``), its cocotb
driver (``driver.py``), the cached build of each unit in it (``build.py``) and the harness's own
self-test (``tb_fp_harness.py`` on ``pipeline_fixture.py``)."""
