# SPDX-License-Identifier: Apache-2.0
"""The collective engine's RTL (docs/collectives.md): ``crc.py`` the combinational CRC-32C of a
flit, ``link.py`` the ring link's TX and RX ports (credits per virtual channel, sequence check,
watchdogs), ``delay.py`` the delay line that models the wire."""
