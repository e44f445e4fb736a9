# SPDX-License-Identifier: Apache-2.0
"""Random programs for differential testing (golden ISA simulator against the RTL core).

:func:`random_program` builds a seeded, race-free multi-engine program through the kernel API
(:meth:`golden.kernel.Kernel.instr` / :meth:`~golden.kernel.Kernel.descriptor`), so the
semaphores come from the data dependencies. It uses:

* DMA copies between DRAM regions and SBUF regions, on random queues: random partitions, row
  lengths, row pitches and dtypes, all word-aligned (the DMA lane rule).
* ``load_stationary``: every enabled dense format, K = 1..P partitions, M = 1..pe_cols elements,
  and random one- or two-dimensional APs with positive or negative steps.
* ``multiply_moving``: a random format that pairs with the weights, N = 1..min(64,
  psum_bank_fp32), random APs, a random PSUM bank, with or without ``acc``.
* ``transpose``.
* ``nop`` / ``notify`` on the other engines.

Every AP stays inside one region (the dependency resource: an SBUF region on every partition,
a PSUM bank, a DRAM region). With ``corrupt=True`` one instruction is changed afterwards (a
random byte, one field of one AP, or its post semaphore), so the program holds at most one
error: whatever the golden simulator reports is what the RTL must report. The result does not depend on the interleaving (``tests/golden/test_isagen.py``).
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import numpy as np

from golden import dma as gdma
from golden.ap import ELEM_BYTES
from golden.kernel import Kernel, KernelProgram
from rtl.config import CoreConfig, check_config
from rtl.isa import APEnc, Instr

__all__ = ["RandomProgram", "random_program"]

_REGIONS = 8
_WIDE = ("fp32", "tf32")


@dataclass
class RandomProgram:
    """``kp`` (the :class:`golden.kernel.KernelProgram`: programs, DRAM image), ``ops`` (one
    line per operation, for failure messages), ``corrupted`` (``(engine, instruction index,
    mode, detail)`` or ``None``; mode ``"byte"``, ``"ap"`` or ``"sem"``)."""
    kp: KernelProgram
    ops: list
    corrupted: tuple | None = None

    @property
    def programs(self):
        return self.kp.programs

    @property
    def dram(self):
        return self.kp.dram


def _rand_ap(rng, mem, parts, elems, dtype, region_base, region_bytes):
    """An AP of ``parts`` partitions from 0 with ``elems`` elements per partition, in 1 or 2
    dimensions with random (possibly negative) steps, inside ``[region_base, +region_bytes)``.
    ``None`` if the pattern does not fit."""
    es = ELEM_BYTES[dtype]
    if elems > 1 and rng.random() < 0.5:
        divs = [d for d in range(2, elems + 1) if elems % d == 0]
        n0 = rng.choice(divs)
        dims = [(rng.choice([1, 1, 2, -1]), n0), (0, elems // n0)]
        dims[1] = (rng.choice([1, -1]) * (abs(dims[0][0]) * n0 + rng.randint(0, 3)),
                   elems // n0)
    else:
        dims = [(rng.choice([1, 1, 1, 2, -1, 3]), elems)]
    lo = sum(min(0, s * (n - 1)) for s, n in dims) * es
    hi = sum(max(0, s * (n - 1)) for s, n in dims) * es + es
    span = hi - lo
    if span > region_bytes:
        return None
    off = region_base - lo + es * rng.randint(0, (region_bytes - span) // es)
    return APEnc(mem=mem, start=0, count=parts, dtype=dtype, offset=off, dims=tuple(dims))


def random_program(cfg: CoreConfig, seed, n_ops=32, *, corrupt=False, dram_bytes=None):
    """A :class:`RandomProgram`: one load filling each SBUF region, then ``n_ops`` random
    operations (see the module docstring)."""
    check_config(cfg, "random_program")
    rng = random.Random(seed)
    P, W, SBP = cfg.partitions, cfg.sbuf_word_bytes, cfg.sbuf_bytes_per_partition
    rb = min(512, SBP // _REGIONS)                     # SBUF region bytes per partition
    drb = P * rb                                       # DRAM region bytes
    if dram_bytes is None:
        dram_bytes = _REGIONS * drb + 64 * n_ops + 4096
    k = Kernel(cfg, dram_bytes=dram_bytes)
    data = k.dram_tensor("regions", (_REGIONS, drb), "e8m0",
                         data=np.frombuffer(random.Random(seed ^ 0x5A5A).randbytes(
                             _REGIONS * drb), dtype=np.uint8).reshape(_REGIONS, drb))
    dbase = data.addr
    formats = [f for f in cfg.formats]
    ops, weights = [], None                            # weights: (K, M, format)
    nq = cfg.dma_engines * cfg.dma_queues
    for b in range(_REGIONS):                          # start with data in every SBUF region
        d = gdma.Descriptor(src=dbase + b * drb, dst=b * rb, src_space=gdma.DRAM,
                            dst_space=gdma.SBUF, dims=((rb, 1, 1), (P, rb, SBP)), src_dtype=9,
                            dst_dtype=9)
        k.descriptor(d, [("dram", b)], [("sbuf", b)], queue=b % nq)
        ops.append(f"load dram{b} -> sbuf{b} (all partitions)")
    tries = 0
    while len(ops) < n_ops + _REGIONS and tries < 20 * n_ops:
        tries += 1
        kind = rng.choice(["load", "load", "store", "ls", "mm", "mm", "tr", "nop"])
        if kind in ("mm", "tr") and weights is None:
            kind = "ls"
        if kind in ("load", "store"):
            a, b = rng.randrange(_REGIONS), rng.randrange(_REGIONS)
            code = rng.choice(sorted(gdma.DTYPES))
            es = gdma.ELEM_BYTES[gdma.DTYPES[code]]
            np_ = rng.randint(1, P)
            p0 = rng.randint(0, P - np_)
            L = W * rng.randint(1, rb // W)
            o = W * rng.randint(0, (rb - L) // W)
            pitch = W * rng.randint(L // W, drb // W // np_) if np_ > 1 else L
            do = W * rng.randint(0, (drb - (np_ - 1) * pitch - L) // W)
            dram_a = dbase + a * drb + do
            sb_a = p0 * SBP + b * rb + o
            if kind == "load":
                d = gdma.Descriptor(src=dram_a, dst=sb_a, src_space=gdma.DRAM,
                                    dst_space=gdma.SBUF, dims=((L // es, es, es),
                                                               (np_, pitch, SBP)),
                                    src_dtype=code, dst_dtype=code)
                reads, writes = [("dram", a)], [("sbuf", b)]
            else:
                d = gdma.Descriptor(src=sb_a, dst=dram_a, src_space=gdma.SBUF,
                                    dst_space=gdma.DRAM, dims=((L // es, es, es),
                                                               (np_, SBP, pitch)),
                                    src_dtype=code, dst_dtype=code)
                reads, writes = [("sbuf", b)], [("dram", a)]
            q = rng.randrange(nq)
            k.descriptor(d, reads, writes, queue=q)
            ops.append(f"{kind} dram{a}+{do:#x} sbuf{b}[{p0}:{np_}]+{o:#x} {L}B "
                       f"pitch {pitch} {gdma.DTYPES[code]} q{q}")
        elif kind == "ls":
            fmt = rng.choice(formats)
            K, M = rng.randint(1, P), rng.randint(1, cfg.pe_cols)
            b = rng.randrange(_REGIONS)
            ap = _rand_ap(rng, 1, K, M, fmt, b * rb, rb)
            if ap is None:
                continue
            k.instr(Instr(op="load_stationary", aps={"ap1": ap}), reads=[("sbuf", b)])
            weights = (K, M, fmt)
            ops.append(f"load_stationary {fmt} K={K} M={M} sbuf{b} {ap.offset:#x} {ap.dims}")
        elif kind == "mm":
            K, M, fs = weights
            ok = [f for f in formats if (f in _WIDE) == (fs in _WIDE)]
            fmt = rng.choice(ok)
            N = rng.randint(1, min(64, cfg.psum_bank_fp32))
            b, bank = rng.randrange(_REGIONS), rng.randrange(cfg.psum_banks)
            ap = _rand_ap(rng, 1, K, N, fmt, b * rb, rb)
            if ap is None:
                continue
            acc = rng.random() < 0.5
            pap = APEnc(mem=2, start=0, count=M, dtype="fp32",
                        offset=bank * cfg.psum_bank_bytes, dims=((1, N),))
            k.instr(Instr(op="multiply_moving", flags=frozenset({"acc"} if acc else ()),
                          aps={"ap0": pap, "ap1": ap}),
                    reads=[("sbuf", b)] + ([("psum", bank)] if acc else []),
                    writes=[("psum", bank)])
            ops.append(f"multiply_moving{'.acc' if acc else ''} {fmt} N={N} sbuf{b} "
                       f"{ap.offset:#x} {ap.dims} bank{bank}")
        elif kind == "tr":
            K, M, _ = weights
            if K > cfg.psum_bank_fp32:
                continue
            bank = rng.randrange(cfg.psum_banks)
            pap = APEnc(mem=2, start=0, count=M, dtype="fp32",
                        offset=bank * cfg.psum_bank_bytes, dims=((1, K),))
            k.instr(Instr(op="transpose", aps={"ap0": pap}), writes=[("psum", bank)])
            ops.append(f"transpose bank{bank}")
        else:
            eng = rng.choice(["dve", "act", "pool", "cc"])
            op = rng.choice(["nop", "notify"])
            imm = {"code": rng.randint(1, 99)} if op == "notify" else {}
            # a bystander that depends on a random region
            k.instr(Instr(op=op, imm=imm), reads=[("sbuf", rng.randrange(_REGIONS))],
                    engine=eng)
            ops.append(f"{op} on {eng}")
    kp = k.build()
    corrupted = None
    if corrupt:
        corrupted = _corrupt(cfg, rng, kp)
    return RandomProgram(kp, ops, corrupted)


def _corrupt(cfg, rng, kp):
    """Change one instruction: a random byte, one field of one of its APs, or its semaphore
    index; returns ``(engine, index, what, detail)``."""
    import dataclasses
    from rtl.isa import DTYPES, decode, encode
    engs = [e for e, p in kp.programs.items() if p]
    mode = rng.choice(["byte", "ap", "ap", "sem"])
    with_aps = [(e, i) for e in engs for i in range(len(kp.programs[e]) // 128)
                if decode(kp.programs[e][128 * i:128 * i + 128]).aps]
    if mode == "ap" and not with_aps:
        mode = "byte"
    if mode == "ap":
        e, i = rng.choice(with_aps)
    else:
        e = rng.choice(engs)
        i = rng.randrange(len(kp.programs[e]) // 128)
    prog = bytearray(kp.programs[e])
    raw = bytes(prog[128 * i:128 * i + 128])
    if mode == "byte":
        pos = rng.randrange(128)
        val = rng.choice([v for v in range(256) if v != raw[pos]])
        prog[128 * i + pos] = val
        detail = (pos, val)
    else:
        ins = decode(raw)
        if mode == "sem":
            sem = rng.randint(min(cfg.semaphores, 255), 255)
            ins = dataclasses.replace(ins, post=(sem, 1))
            detail = ("post_sem", sem)
        else:
            slot = rng.choice(sorted(ins.aps))
            ap = ins.aps[slot]
            fld = rng.choice(["offset", "start", "count", "dtype", "dims"])
            if fld == "offset":
                val = rng.choice([ap.offset + 1, ap.offset + rng.randint(1, 1 << 16),
                                  rng.getrandbits(32)]) % (1 << 32)
            elif fld in ("start", "count"):
                val = rng.randint(0, 255)
            elif fld == "dtype":
                val = rng.choice(DTYPES + ("reserved12",))
            else:
                val = tuple((rng.randint(-8, 8), rng.randint(0, 70))
                            for _ in range(rng.randint(1, 4)))
            ins = dataclasses.replace(ins, aps={**ins.aps, slot: dataclasses.replace(
                ap, **{fld: val})})
            detail = (slot, fld, val)
        prog[128 * i:128 * i + 128] = encode(ins)
    kp.programs[e] = bytes(prog)
    return (e, i, mode, detail)
