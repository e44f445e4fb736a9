# SPDX-License-Identifier: Apache-2.0
"""Golden models of the collective engine (docs/collectives.md): :mod:`golden.collective.link`
the ring link layer (flit format, CRC-32C, credits, sequence numbers, virtual channels and the
dateline, a cycle-level model of one link)."""
