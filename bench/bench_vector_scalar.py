# SPDX-License-Identifier: Apache-2.0
"""``python -m bench --only vector_scalar``: the Vector engine's figures (amaranth.sim on the
engine joined to a real SBUF and PSUM; every result checked bit for bit against
``golden/vector.py``). The Scalar engine's figures live in the ``activation`` bench.

* ``vector_elems_per_lane_cycle``: a TENSOR_TENSOR add over ``[P, F]``, F = 512 (64 on the
  small preset, whose PSUM bank holds 64 FP32); the SBUF operands sit in different SBUF banks
  (two streams on one bank share its one access per cycle: half rate, docs/memory.md) (src0 BF16 and src1
  FP32 in SBUF, destination FP32 in PSUM), elements per lane divided by the cycles from the
  instruction taken to its ``done`` (fixed overhead included). Goal >= 0.95.
* ``vector_steady_elems_per_lane_cycle``: the same over the cycles from the first to the last
  write (the streaming rate alone).
* ``instruction_overhead_cycles``: cycles take -> done minus elements per lane, for that
  instruction; ``instruction_overhead_cycles_b2b``: the same per instruction over 8 back-to-back
  short instructions (done taken at once, the next instruction offered at once), i.e. cycles
  between successive ``done`` minus elements.
* the same rate for TENSOR_SCALAR (FP32 -> BF16 with stochastic rounding) and TENSOR_REDUCE
  (add, one output per partition; overhead includes the partial-combine tail); cycles per
  element of a 64-element TENSOR_TENSOR_SCAN (serial: each result feeds the next element);
  MAX8 (indices) over F elements.
* BN_STATS over F elements (overhead: the partial-combine tail and 3 output beats), BN_AGGR of
  one triple (overhead: the tail program with the Newton reciprocal), AFFINE_SELECT over F
  elements (rate and overhead), TRANSPOSE of one B x B block (B in, B out).
* FIND_INDEX8 over F and F / 2 elements (overhead: the 8 values entering first and the 8
  output beats), and over F with the values in the data's SBUF bank.
"""

from __future__ import annotations

import time

NAME = "vector_scalar"
FREE = 512


def _ap(memory, P, offset, n, w):
    from golden.ap import AP
    return AP(memory=memory, start_partition=0, num_partitions=P, offset=offset, elem_bytes=w,
              dims=((1, n),))


def _check(cfg, instrs, out, sbuf, seed):
    """Statuses and every write of every instruction against golden."""
    import numpy as np

    import golden.vector as gv
    from golden.prng import XorWowLanes
    from tb.vector.rig import apply_write
    mem = gv.VecMemory(cfg, sbuf=sbuf)
    prng = XorWowLanes(cfg.sr_seed, cfg.partitions)
    rs, rp = sbuf.copy(), mem.psum.copy()
    for k, ins in enumerate(instrs):
        code = gv.run(cfg, ins, mem, prng)
        assert out["status"][k] == code, (seed, k, out["status"][k], code)
        for w in out["writes"][k]:
            apply_write(rs, rp, w)
        assert np.array_equal(rs, mem.sbuf) and np.array_equal(rp, mem.psum), \
            f"vector bench seed {seed}: instruction {k} differs from golden"


def run(cfg, seed=1):
    import numpy as np

    import golden.vector as gv
    from golden.ap import PSUM, SBUF
    from tb.amsim import SimBench
    from tb.vector.program import random_memories
    from tb.vector.rig import VecRig, program_job

    t0 = time.monotonic()
    P = cfg.partitions
    BK = cfg.sbuf_bytes_per_partition // cfg.sbuf_banks       # operands in different banks
    F = min(FREE, cfg.psum_bank_fp32, BK // 4)                 # 64 on small
    rng = np.random.default_rng(seed)
    sbuf, _ = random_memories(rng, cfg)
    bench = SimBench(VecRig(cfg))
    build = time.monotonic() - t0
    bf16, fp32 = gv.DTYPE_CODES["bf16"], gv.DTYPE_CODES["fp32"]
    tt = gv.VecInstr(opcode=gv.OP_TENSOR_TENSOR, op0=gv.ALU_ADD,
                     src0=_ap(SBUF, P, 0, F, 2), src0_dtype=bf16,
                     src1=_ap(SBUF, P, BK, F, 4), src1_dtype=fp32,
                     dst=_ap(PSUM, P, 0, F, 4), dst_dtype=fp32)
    ts = gv.VecInstr(opcode=gv.OP_TENSOR_SCALAR, op0=gv.ALU_MUL, op1=gv.ALU_ADD, sr=1,
                     imm0=int(np.float32(0.125).view(np.uint32)),
                     imm1=int(np.float32(-1.5).view(np.uint32)),
                     src0=_ap(SBUF, P, BK, F, 4), src0_dtype=fp32,
                     dst=_ap(SBUF, P, 2 * BK, F, 2), dst_dtype=bf16)
    red = gv.VecInstr(opcode=gv.OP_TENSOR_REDUCE, op1=gv.ALU_ADD,
                      src0=_ap(SBUF, P, BK, F, 4), src0_dtype=fp32,
                      dst=_ap(PSUM, P, cfg.psum_bank_bytes, 1, 4), dst_dtype=fp32)
    scan = gv.VecInstr(opcode=gv.OP_TENSOR_TENSOR_SCAN, op0=gv.ALU_ADD, op1=gv.ALU_MUL,
                       src0=_ap(SBUF, P, BK, 64, 4), src0_dtype=fp32,
                       src1=_ap(SBUF, P, 0, 64, 2), src1_dtype=bf16,
                       dst=_ap(SBUF, P, 2 * BK + 2 * F, 64, 4), dst_dtype=fp32)
    top8 = gv.VecInstr(opcode=gv.OP_MAX8, op1=1, src0=_ap(SBUF, P, BK, F, 4), src0_dtype=fp32,
                       dst=_ap(PSUM, P, 2 * cfg.psum_bank_bytes, 8, 4), dst_dtype=fp32)
    short = [gv.VecInstr(opcode=gv.OP_TENSOR_COPY, src0=_ap(SBUF, P, BK + 32 * k, 8, 4),
                         dst=_ap(SBUF, P, 32 * k, 8, 4)) for k in range(8)]
    B3 = 3 * cfg.psum_bank_bytes
    TB = gv.transpose_block(cfg)
    bns = gv.VecInstr(opcode=gv.OP_BN_STATS, src0=_ap(SBUF, P, BK, F, 4), src0_dtype=fp32,
                      dst=_ap(PSUM, P, B3, 3, 4), dst_dtype=fp32)
    bna = gv.VecInstr(opcode=gv.OP_BN_AGGR, src0=_ap(PSUM, P, B3, 3, 4), src0_dtype=fp32,
                      dst=_ap(PSUM, P, B3 + 16, 2, 4), dst_dtype=fp32)
    aff = gv.VecInstr(opcode=gv.OP_AFFINE_SELECT, op0=gv.ALU_GE, imm0=0xFF800000,
                      imm1=gv.affine_imm1(0, -1, 1), src0=_ap(SBUF, P, BK, F, 4),
                      src0_dtype=fp32, dst=_ap(SBUF, P, 2 * BK + 2 * F + 256, F, 4),
                      dst_dtype=fp32)
    trn = gv.VecInstr(opcode=gv.OP_TRANSPOSE, src0=_ap(SBUF, TB, BK, TB, 4), src0_dtype=fp32,
                      dst=_ap(PSUM, TB, B3 + 128, TB, 4), dst_dtype=fp32)
    fi = gv.VecInstr(opcode=gv.OP_FIND_INDEX8, src0=_ap(SBUF, P, BK, F, 4), src0_dtype=fp32,
                     src1=_ap(SBUF, P, 3 * BK, 8, 4), src1_dtype=fp32,
                     dst=_ap(PSUM, P, 2 * cfg.psum_bank_bytes + 64, 8, 4), dst_dtype=fp32)
    fi_half = gv.VecInstr(**{**fi.__dict__, "src0": _ap(SBUF, P, BK, F // 2, 4)})
    fi_bank = gv.VecInstr(**{**fi.__dict__, "src1": _ap(SBUF, P, BK + 4 * F, 8, 4)})
    new = [bns, bna, aff, trn, fi, fi_half, fi_bank]
    instrs = [tt, ts, red, scan, top8] + short + new
    job, out = program_job(bench.dut, instrs, sbuf=sbuf, psum=None, rng=rng, dump=False)
    t1 = time.monotonic()
    bench.run(job)
    wall = time.monotonic() - t1
    _check(cfg, instrs, out, sbuf, seed)
    assert out["status"] == [0] * len(instrs), out["status"]

    m = {}
    takes, dones = out["takes"], out["dones"]
    for k, name in enumerate(("tensor_tensor", "tensor_scalar", "tensor_reduce")):
        cyc = dones[k] - takes[k] + 1
        m[f"{name}_cycles"] = cyc
        m[f"{name}_overhead_cycles"] = cyc - F
    wc = out["write_cycles"][0]
    m["vector_steady_elems_per_lane_cycle"] = len(wc) / (wc[-1] - wc[0] + 1)
    wc = out["write_cycles"][1]
    m["tensor_scalar_steady_elems_per_lane_cycle"] = len(wc) / (wc[-1] - wc[0] + 1)
    m["vector_elems_per_lane_cycle"] = F / m["tensor_tensor_cycles"]
    m["instruction_overhead_cycles"] = m["tensor_tensor_overhead_cycles"]
    m["tensor_tensor_scan_cycles_per_elem"] = (dones[3] - takes[3] + 1) / 64
    m["max8_cycles"] = dones[4] - takes[4] + 1
    m["max8_overhead_cycles"] = m["max8_cycles"] - F
    b2b = [dones[k] - dones[k - 1] - 8 for k in range(6, 5 + len(short))]
    k0 = 5 + len(short)
    cyc = [dones[k0 + k] - takes[k0 + k] + 1 for k in range(len(new))]
    m["bn_stats_cycles"], m["bn_stats_overhead_cycles"] = cyc[0], cyc[0] - F
    m["bn_aggr_cycles"], m["bn_aggr_overhead_cycles"] = cyc[1], cyc[1] - 3
    m["affine_select_elems_per_lane_cycle"] = F / cyc[2]
    m["affine_select_overhead_cycles"] = cyc[2] - F
    m["transpose_block"] = TB
    m["transpose_cycles"], m["transpose_overhead_cycles"] = cyc[3], cyc[3] - TB
    m["find_index8_cycles"], m["find_index8_overhead_cycles"] = cyc[4], cyc[4] - F
    m["find_index8_elems_per_lane_cycle"] = F / cyc[4]
    m["find_index8_half_overhead_cycles"] = cyc[5] - F // 2
    m["find_index8_same_bank_overhead_cycles"] = cyc[6] - F
    m["instruction_overhead_cycles_b2b"] = sum(b2b) / len(b2b)
    m["free_size"] = F
    m["partitions"] = P
    m["reduce_ways"] = gv.reduce_ways(cfg)
    m["sim"] = "amaranth.sim"
    m["sim_build_seconds"] = build
    m["sim_run_seconds"] = wall
    m["bench_wall_seconds"] = time.monotonic() - t0
    return m


if __name__ == "__main__":
    import json
    import sys
    from rtl.config import preset_from_env
    print(json.dumps(run(preset_from_env()), indent=2))
    sys.exit(0)
