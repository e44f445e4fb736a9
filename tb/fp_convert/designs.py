# SPDX-License-Identifier: Apache-2.0
"""The designs under test, built identically on the pytest side and inside cocotb.

``params`` is the JSON dict passed through ``SimBuild.run(params=...)``: ``formats`` (names),
``lane``, ``depth`` (harness batch depth) and test knobs (``seed``, ``tier``...).
"""

from rtl.fp.convert import ConvertFromFP32
from rtl.fp.widen import WidenToFP32
from tb.harness import VectorHarness

#: Every format the converters support (``"cfp8"`` is the config's).
CONVERT_FORMATS = ("tf32", "bf16", "fp16", "fp8_e5m2", "fp8_e4m3", "fp8_e4m3fn", "cfp8",
                   "fp4_e2m1")
WIDEN_FORMATS = CONVERT_FORMATS + ("e8m0",)
DEPTH = 8192


def unelaborated(obj):
    """Mark a design object used only for its layouts (inside cocotb) as deliberately never
    elaborated, so Amaranth does not warn about it."""
    obj._MustUse__silence = True
    return obj


def convert_dut(cfg, params):
    return ConvertFromFP32(cfg, params["formats"], lane=params.get("lane", 0))


def widen_dut(cfg, params):
    return WidenToFP32(cfg, params["formats"])


def harness(dut, params):
    return VectorHarness(dut, depth=params["depth"])


def build_name(unit, cfg, params):
    """Build directory / top name: one per distinct design (formats, lane, depth)."""
    tag = f"{unit}_l{params.get('lane', 0)}_d{params['depth']}"
    if tuple(params["formats"]) not in (CONVERT_FORMATS, WIDEN_FORMATS):
        tag += "_f" + "_".join(params["formats"])
    return tag
