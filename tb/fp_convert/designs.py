# SPDX-License-Identifier: Apache-2.0
"""The format sets the conversion tests build their units with (``params["formats"]``, see
:mod:`tb.fp.build`)."""

#: Every format the converters support (``"cfp8"`` is the config's).
CONVERT_FORMATS = ("tf32", "bf16", "fp16", "fp8_e5m2", "fp8_e4m3", "fp8_e4m3fn", "cfp8",
                   "fp4_e2m1")
WIDEN_FORMATS = CONVERT_FORMATS + ("e8m0",)

#: FP32-subset formats at the edges of what ``cfp8_format`` allows, as JSON specs: normals
#: below 2**-126 (the converter's leading-zero path; codes that widen to FP32 subnormals) and
#: a negative bias (values up to 2**127).
EXOTIC_FORMATS = (
    {"name": "e3m4_b146", "exp_bits": 3, "man_bits": 4, "bias": 146},
    {"name": "e5m2_b148", "exp_bits": 5, "man_bits": 2, "bias": 148},
    {"name": "e5m2_bm97", "exp_bits": 5, "man_bits": 2, "bias": -97},
)
