# SPDX-License-Identifier: Apache-2.0
"""Golden models of the collective engine (docs/collectives.md): :mod:`golden.collective.link`
the ring link layer (flit format, CRC-32C, credits, sequence numbers, virtual channels and the
dateline, a cycle-level model of one link); :mod:`golden.collective.schedule` the ring
schedules as data; :mod:`golden.collective.algos` the multi-rank data model of reduce-scatter,
all-gather, all-reduce, all-to-all and permute; :mod:`golden.collective.perf` the cycle
estimate and NCCL's bus bandwidth; :mod:`golden.collective.multicore` the multi-core golden
simulator (``n`` ISA simulators on a ring running the CC instructions)."""
