# SPDX-License-Identifier: Apache-2.0
"""CRC-32C of a whole flit in one cycle (docs/collectives.md §2).

A CRC of a fixed-length message is affine in the message bits: bit ``k`` of the result is the
parity of the message bits whose column of the CRC's matrix has bit ``k`` set, XOR a constant
(the CRC of the all-zero message). :class:`LinkCRC` runs the reflected shift register of the
CRC once at elaboration time on symbolic bits (a Python int per state bit, one bit per message
bit plus one for the constant 1) and builds one XOR tree per result bit.
"""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from rtl.config import LINK_CRC_BITS, LINK_CRC_POLY

__all__ = ["LinkCRC"]


class LinkCRC(wiring.Component):
    """Combinational CRC-32C (reflected polynomial :data:`rtl.config.LINK_CRC_POLY`, init and
    final XOR all ones) of ``data``, taken bit 0 first: for a whole number of bytes, the CRC of
    ``data``'s little-endian bytes.

    Parameters
    ----------
    bits : int
        Message width, a positive multiple of 8.

    Members
    -------
    data : In(bits)
    crc : Out(32)
    """

    class Signature(wiring.Signature):
        """Members of a :class:`LinkCRC` of ``bits`` message bits."""

        def __init__(self, bits):
            if isinstance(bits, bool) or not isinstance(bits, int) or bits <= 0 or bits % 8:
                raise ValueError(f"LinkCRC bits must be a positive multiple of 8, not {bits!r}")
            self.bits = bits
            super().__init__({"data": In(bits), "crc": Out(LINK_CRC_BITS)})

    def __init__(self, bits):
        super().__init__(self.Signature(bits))
        self.bits = bits

    def elaborate(self, platform):
        m = Module()
        n, W = self.bits, LINK_CRC_BITS
        one = 1 << n                                   # the symbolic constant 1
        state = [one] * W                              # init: all ones
        for i in range(n):
            fb = state[0] ^ (1 << i)
            state = [(state[k + 1] if k + 1 < W else 0) ^ (fb if LINK_CRC_POLY >> k & 1 else 0)
                     for k in range(W)]
        bits = []
        for k in range(W):
            col = state[k] ^ one                       # final XOR: all ones
            mask = col & (one - 1)
            term = (self.data & Const(mask, n)).xor() if mask else Const(0, 1)
            bits.append(term ^ (col >> n & 1))
        m.d.comb += self.crc.eq(Cat(*bits))
        return m
