# SPDX-License-Identifier: Apache-2.0
"""Bit-exact numpy golden model of the open-NeuronCore (see docs/number-formats.md).

Submodules: :mod:`golden.formats` (decode / convert), :mod:`golden.prng` (XORWOW),
:mod:`golden.arith` (multiplier, FP32 adder, fused MAC), :mod:`golden.mx` (MX blocks).
"""

from golden.arith import add_fp32, fma_fp32, mul_exact
from golden.formats import (FP32_QNAN, bits_f32, convert_rne, convert_rne_bits, convert_sr,
                            convert_sr_bits, decode, decode_bits, decode_e8m0, f32_bits)
from golden.mx import mx_dequantize, mx_quantize
from golden.prng import XorWow, XorWowLanes, convert_sr_stream, xorwow_lane_state

__all__ = [
    "FP32_QNAN", "add_fp32", "bits_f32", "convert_rne", "convert_rne_bits", "convert_sr",
    "convert_sr_bits", "convert_sr_stream", "decode", "decode_bits", "decode_e8m0", "f32_bits",
    "fma_fp32", "mul_exact", "mx_dequantize", "mx_quantize", "XorWow", "XorWowLanes",
    "xorwow_lane_state",
]
