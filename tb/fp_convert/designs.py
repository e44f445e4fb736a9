# SPDX-License-Identifier: Apache-2.0
"""The designs under test, built identically on the pytest side and inside cocotb.

``params`` is the JSON dict passed through ``SimBuild.run(params=...)``: ``formats`` (names),
``lane``, ``depth`` (harness batch depth) and test knobs (``seed``, ``tier``...).
"""

import hashlib
import json

from rtl.config import FPFormat
from rtl.fp.convert import ConvertFromFP32
from rtl.fp.widen import WidenToFP32
from tb.harness import VectorHarness

#: Every format the converters support (``"cfp8"`` is the config's).
CONVERT_FORMATS = ("tf32", "bf16", "fp16", "fp8_e5m2", "fp8_e4m3", "fp8_e4m3fn", "cfp8",
                   "fp4_e2m1")
WIDEN_FORMATS = CONVERT_FORMATS + ("e8m0",)
DEPTH = 8192

#: FP32-subset formats at the edges of what ``cfp8_format`` allows, as JSON specs: normals
#: below 2**-126 (the converter's leading-zero path; codes that widen to FP32 subnormals) and
#: a negative bias (values up to 2**127).
EXOTIC_FORMATS = (
    {"name": "e3m4_b146", "exp_bits": 3, "man_bits": 4, "bias": 146},
    {"name": "e5m2_b148", "exp_bits": 5, "man_bits": 2, "bias": 148},
    {"name": "e5m2_bm97", "exp_bits": 5, "man_bits": 2, "bias": -97},
)


def formats_of(params):
    """The ``formats`` param as constructor arguments: names stay names, dicts become
    :class:`FPFormat`."""
    return [f if isinstance(f, str) else FPFormat(**f) for f in params["formats"]]


def format_names(params):
    return [f if isinstance(f, str) else f["name"] for f in params["formats"]]


def unelaborated(obj):
    """Mark a design object used only for its layouts (inside cocotb) as deliberately never
    elaborated, so Amaranth does not warn about it."""
    obj._MustUse__silence = True
    return obj


def convert_dut(cfg, params):
    return ConvertFromFP32(cfg, formats_of(params), lane=params.get("lane", 0))


def widen_dut(cfg, params):
    return WidenToFP32(cfg, formats_of(params))


def harness(dut, params):
    return VectorHarness(dut, depth=params["depth"])


def build_name(unit, cfg, params):
    """Build directory / top name: one per distinct design (formats, lane, depth)."""
    tag = f"{unit}_l{params.get('lane', 0)}_d{params['depth']}"
    if tuple(params["formats"]) not in (CONVERT_FORMATS, WIDEN_FORMATS):
        names = "_".join(format_names(params))
        tag += "_f" + (names if len(names) < 40 else
                       hashlib.sha1(json.dumps(params["formats"]).encode()).hexdigest()[:10])
    return tag
