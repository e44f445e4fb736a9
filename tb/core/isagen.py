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
random byte, one field of one AP, one immediate, its post semaphore, or a wait no post
satisfies), so the program holds at most one error: whatever the golden simulator reports is what the RTL must report. The result does not depend on the interleaving (``tests/golden/test_isagen.py``).
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import numpy as np

from golden import dma as gdma
from golden.ap import ELEM_BYTES
from golden.kernel import Kernel, KernelProgram
from rtl.config import CoreConfig, check_config
from rtl.isa import INSTR_BYTES, APEnc, Instr

__all__ = ["RandomProgram", "random_program", "GEN_ENGINES", "VECTOR_OPS"]

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


def _shaped_ap(rng, mem, parts, nums, dtype, base, size, bcast=False):
    """An AP of ``parts`` partitions from 0 whose dimensions have the counts ``nums`` (so
    that every operand of a vector instruction agrees slot by slot), random steps (negative
    too; ``bcast``: every step 0), inside ``[base, base + size)``; ``None`` if it does not
    fit."""
    es = ELEM_BYTES[dtype]
    if bcast:
        dims = [(0, n) for n in nums]
    else:
        s0 = rng.choice([1, 1, 2, -1])
        dims = [(s0, nums[0])]
        if len(nums) > 1:
            dims.append((rng.choice([1, -1]) * (abs(s0) * nums[0] + rng.randint(0, 2)),
                         nums[1]))
    lo = sum(min(0, st * (n - 1)) for st, n in dims) * es
    hi = sum(max(0, st * (n - 1)) for st, n in dims) * es + es
    if hi - lo > size:
        return None
    off = base - lo + es * rng.randint(0, (size - (hi - lo)) // es)
    return APEnc(mem=mem, start=0, count=parts, dtype=dtype, offset=off, dims=tuple(dims))


def _f32imm(rng):
    v = rng.choice([0.0, 1.0, -1.0, 0.5, 2.0, -0.0, float("inf"), rng.uniform(-8, 8),
                    rng.uniform(-1e-3, 1e-3)])
    return float(np.float32(v))


#: The vector opcodes the generator draws, with their source operand counts (bn_stats,
#: bn_aggr, affine_select and block_transpose have shape rules of their own: not drawn yet;
#: find_index8's values, ap2, are 8 elements, half the time in its data's region and format).
VECTOR_OPS = {"tensor_tensor": 2, "tensor_scalar": 2, "tensor_reduce": 1, "tensor_copy": 1,
             "memset": 0, "select": 2, "iota": 0, "tensor_tensor_scan": 2, "max8": 1,
             "find_index8": 2}


def _vector_op(cfg, rng, k, rb, ops):
    """One random vector-engine instruction over random regions (SBUF regions or PSUM banks,
    the destination apart from the sources); returns False when the pattern did not fit."""
    from golden import vector as gv
    name = rng.choice(sorted(n for n in gv.OPCODES.values() if n in VECTOR_OPS))
    P = cfg.partitions
    parts = rng.randint(1, P)
    fmts = [gv.DTYPE_NAMES[c] for c in gv.vector_formats(cfg)]
    n = rng.randint(1, 24)
    nums = [n] if rng.random() < 0.6 else [rng.randint(1, 6), rng.randint(1, 4)]
    bank_bytes = cfg.psum_bank_bytes

    def place(avoid, dtype, nums_, bcast=False):
        for _ in range(8):
            if rng.random() < 0.3:
                bank = rng.randrange(cfg.psum_banks)
                key = ("psum", bank)
                if key in avoid:
                    continue
                ap = _shaped_ap(rng, 2, parts, nums_, "fp32", bank * bank_bytes, bank_bytes,
                                bcast)
            else:
                b = rng.randrange(_REGIONS)
                key = ("sbuf", b)
                if key in avoid:
                    continue
                ap = _shaped_ap(rng, 1, parts, nums_, dtype, b * rb, rb, bcast)
            if ap is not None:
                return ap, key
        return None, None
    srcs = VECTOR_OPS[name]
    op0, op1 = rng.randrange(16), rng.randrange(16)
    ctl = rng.randrange(16)
    if name == "tensor_reduce":
        op1 = rng.choice(gv.REDUCE_OPS)
        ctl &= ~4                                # no src1 slot: sel0 off
    if name == "max8":
        op1 = rng.randrange(2)
        ctl &= ~4
    sel = ctl & 12
    if name == "tensor_scalar" and not sel:
        srcs = 1
    aps, reads, keys = {}, [], set()
    for slot in ("ap1", "ap2")[:srcs]:
        bc = name == "tensor_scalar" and slot == "ap2" and rng.random() < 0.5
        if name == "find_index8" and slot == "ap2" and rng.random() < 0.5:
            a1, key = aps["ap1"], reads[0]          # values among the data: some are found
            base, size = ((key[1] * bank_bytes, bank_bytes) if key[0] == "psum"
                          else (key[1] * rb, rb))
            ap = _shaped_ap(rng, a1.mem, parts, [8], a1.dtype, base, size)
        else:
            ap, key = place(set(), rng.choice(fmts),
                            [8] if name == "find_index8" and slot == "ap2" else nums, bcast=bc)
        if ap is None:
            return False
        aps[slot] = ap
        reads.append(key)
        keys.add(key)
    dnums = {"tensor_reduce": [1], "max8": [8], "find_index8": [8]}.get(name, nums)
    ap, key = place(keys, rng.choice(fmts), dnums)
    if ap is None:
        return False
    aps["ap0"] = ap
    imm = {"op0": op0 | rng.choice([0, 0, 0, 0x30]), "op1": op1, "ctl": ctl,
           "imm0": _f32imm(rng), "imm1": _f32imm(rng)}
    imm = {f: v for f, v in imm.items() if v != 0 or str(v) == "-0.0"}
    flags = frozenset({"sr"}) if rng.random() < 0.3 else frozenset()
    k.instr(Instr(op=name, flags=flags, aps=aps, imm=imm), reads=reads, writes=[key])
    ops.append(f"{name}{'.sr' if flags else ''} parts={parts} nums={nums} op0={op0} op1={op1} "
               f"ctl={ctl} " + " ".join(f"{s}={a.dtype}@{a.mem}:{a.offset:#x}{a.dims}"
                                         for s, a in sorted(aps.items())))
    return True


#: Functions whose table fits one region on every preset (words <= 512).
_SMALL_TABLES = ("identity", "relu", "exp", "tanh", "erf", "log", "sqrt", "rsqrt",
                 "reciprocal", "square", "sign", "abs")


def _act_table(cfg, rng, k, rb, ops, state):
    """DMA a function table (a DRAM tensor, element-major over the partitions) into an SBUF
    region and ``act_table_load`` it; returns the function name or ``None``."""
    from golden import activation as ga
    from golden.isasim import table_words
    P = cfg.partitions
    cands = [f for f in _SMALL_TABLES if table_words(ga.table(f), P).shape[1] * 4 <= rb]
    if not cands:                                     # regions too small for any table
        return None
    name = rng.choice(cands)
    w = table_words(ga.table(name), P)
    cols = w.shape[1]
    if name not in state["tables"]:
        state["tables"][name] = k.dram_tensor(f"table_{name}", dtype="fp32", codes=w)
    t = state["tables"][name]
    b = rng.randrange(_REGIONS)
    W = cfg.sbuf_word_bytes
    o = W * rng.randint(0, (rb - cols * 4) // W)
    d = gdma.Descriptor(src=t.addr, dst=b * rb + o, src_space=gdma.DRAM, dst_space=gdma.SBUF,
                        dims=((cols, 4, 4), (P, t.pitch, cfg.sbuf_bytes_per_partition)),
                        src_dtype=0, dst_dtype=0)
    k.descriptor(d, [("dram", t.name)], [("sbuf", b)],
                 queue=rng.randrange(cfg.dma_engines * cfg.dma_queues))
    ap = APEnc(mem=1, start=0, count=P, dtype="fp32", offset=b * rb + o, dims=((1, cols),))
    k.instr(Instr(op="act_table_load", aps={"ap1": ap}, imm={"func": ga.FUNCTION_IDS[name]}),
            reads=[("sbuf", b)])
    ops.append(f"table {name} -> sbuf{b}+{o:#x}; act_table_load")
    return name


def _act_op(cfg, rng, k, rb, ops, state):
    """One random ``activation`` of the loaded function (a table is loaded first when none is,
    or one time in five)."""
    from golden import activation as ga
    if state["loaded"] is None or rng.random() < 0.2:
        state["loaded"] = _act_table(cfg, rng, k, rb, ops, state)
    if state["loaded"] is None:
        return
    P = cfg.partitions
    # tf32 left out: golden.activation reads a 4-byte element without masking it to its
    # 19-bit code (golden.vector does), a ValueError on random data (reported)
    fmts = [ga.DTYPE_NAMES[c] for c in sorted(ga.DTYPE_NAMES)
            if ga.DTYPE_NAMES[c] == "fp32" or (ga.DTYPE_NAMES[c] in cfg.formats
                                               and ga.DTYPE_NAMES[c] != "tf32")]
    parts = rng.randint(1, P)
    n = rng.randint(1, 24)
    nums = [n] if rng.random() < 0.6 else [rng.randint(1, 6), rng.randint(1, 4)]
    keys, aps = [], {}
    for slot, nm in (("ap1", nums), ("ap2", [1]), ("ap0", nums)):
        if slot == "ap2" and rng.random() < 0.5:
            continue
        for _ in range(8):
            if rng.random() < 0.25:
                bank = rng.randrange(cfg.psum_banks)
                key = ("psum", bank)
                ap = _shaped_ap(rng, 2, parts, nm, "fp32", bank * cfg.psum_bank_bytes,
                                cfg.psum_bank_bytes)
            else:
                b = rng.randrange(_REGIONS)
                key = ("sbuf", b)
                ap = _shaped_ap(rng, 1, parts, nm, rng.choice(fmts), b * rb, rb)
            if ap is not None and (slot != "ap0" or key not in keys):
                break
        else:
            return False
        aps[slot] = ap
        keys.append(key)
    imm = {"func": ga.FUNCTION_IDS[state["loaded"]], "reduce_cmd": rng.randrange(4),
           "scale": _f32imm(rng) if rng.random() < 0.5 else 1.0, "bias": _f32imm(rng)}
    if "ap2" in aps:
        imm[rng.choice(["bias_ap", "scale_ap"])] = 1
    imm = {f: v for f, v in imm.items() if v != 0 or str(v) == "-0.0"}
    flags = frozenset({"sr"}) if rng.random() < 0.3 else frozenset()
    k.instr(Instr(op="activation", flags=flags, aps=aps, imm=imm), reads=keys[:-1],
            writes=[keys[-1]])
    ops.append(f"activation {state['loaded']} parts={parts} nums={nums} {imm} "
               + " ".join(f"{s}={a.dtype}@{a.mem}:{a.offset:#x}{a.dims}"
                          for s, a in sorted(aps.items())))
    return True


#: Engines :func:`random_program` may use (``engines``); the RTL core runs pe, dve and sp.
GEN_ENGINES = ("pe", "dve", "act", "sp")


def random_program(cfg: CoreConfig, seed, n_ops=32, *, corrupt=False, dram_bytes=None,
                   engines=GEN_ENGINES, dump=False, bystanders=("dve", "act", "pool", "cc"),
                   region_bytes=None):
    """A :class:`RandomProgram`: one load filling each SBUF region, then ``n_ops`` random
    operations (see the module docstring) on ``engines`` (a subset of :data:`GEN_ENGINES`;
    ``sp`` is always used for the loads; ``nop``/``notify`` bystanders go to the other
    engines of ``bystanders``; ``()`` for a core without them). ``dump``: every PSUM bank is
    set first (``memset``, when ``dve`` is an engine) and every SBUF region is stored at the end to the DRAM tensor ``"dump"``,
    so that comparing DRAM images compares the final SBUF too (differential tests).
    ``region_bytes``: bytes per partition of each of the 8 SBUF regions (default
    ``min(512, sbuf_bytes_per_partition / 8)``; smaller regions make shorter programs: the
    loads, the dump and the operands shrink with them)."""
    check_config(cfg, "random_program")
    bad = set(engines) - set(GEN_ENGINES)
    if bad:
        raise ValueError(f"random_program engines must be a subset of {GEN_ENGINES}, not "
                         f"{sorted(bad)}")
    rng = random.Random(seed)
    P, W, SBP = cfg.partitions, cfg.sbuf_word_bytes, cfg.sbuf_bytes_per_partition
    rb = min(512, SBP // _REGIONS)                     # SBUF region bytes per partition
    if region_bytes is not None:
        if (isinstance(region_bytes, bool) or not isinstance(region_bytes, int)
                or not 16 * W <= region_bytes <= rb or region_bytes % W):
            raise ValueError(f"random_program region_bytes must be a multiple of {W} in "
                             f"[{16 * W}, {rb}], not {region_bytes!r}")
        rb = region_bytes
    drb = P * rb                                       # DRAM region bytes
    if dram_bytes is None:
        # the instruction queues (placed after the tensors): about 2.5 instructions of
        # INSTR_BYTES per operation measured, each engine's ring rounded up to a power of two
        queues = 2 * INSTR_BYTES * (2 * n_ops + 8 * len(engines))
        dram_bytes = (_REGIONS * drb * (2 if dump else 1) + 64 * n_ops + 4096 + 8 * P * rb
                      + queues)
    k = Kernel(cfg, dram_bytes=dram_bytes)
    data = k.dram_tensor("regions", (_REGIONS, drb), "e8m0",
                         codes=np.frombuffer(random.Random(seed ^ 0x5A5A).randbytes(
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
    if dump and "dve" in engines:
        # PSUM too starts from a known state: a differential test runs programs back to back
        # on one core, whose soft reset keeps PSUM (a random value per bank)
        for bank in range(cfg.psum_banks):
            v = float(np.float32(rng.uniform(-4, 4)))
            ap = APEnc(mem=2, start=0, count=P, dtype="fp32", offset=bank * cfg.psum_bank_bytes,
                       dims=((1, cfg.psum_bank_fp32),))
            k.instr(Instr(op="memset", aps={"ap0": ap}, imm={"imm0": v}),
                    writes=[("psum", bank)])
            ops.append(f"memset psum bank{bank} = {v}")
    # the preamble defines the SBUF regions and PSUM every later instruction may read; it is
    # never corrupted (a corrupted preamble would leave memory the program reads undefined:
    # golden starts from zeros, the core from the previous program's contents)
    preamble = k.emitted()
    tries = 0
    kinds = ["load", "load", "store", "nop"]
    if "pe" in engines:
        kinds += ["ls", "mm", "mm", "tr"]
    if "dve" in engines:
        kinds += ["vec", "vec", "vec"]
    if "act" in engines:
        kinds += ["act", "act"]
    bystanders = [e for e in bystanders if e not in engines]
    state = {"loaded": None, "tables": {}}
    while len(ops) < n_ops + _REGIONS and tries < 20 * n_ops:
        tries += 1
        kind = rng.choice(kinds)
        if kind in ("mm", "tr") and weights is None:
            kind = "ls"
        if kind == "vec":
            _vector_op(cfg, rng, k, rb, ops)
            continue
        if kind == "act":
            _act_op(cfg, rng, k, rb, ops, state)
            continue
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
        elif bystanders:
            eng = rng.choice(bystanders)
            op = rng.choice(["nop", "notify"])
            imm = {"code": rng.randint(1, 99)} if op == "notify" else {}
            # a bystander that depends on a random region
            k.instr(Instr(op=op, imm=imm), reads=[("sbuf", rng.randrange(_REGIONS))],
                    engine=eng)
            ops.append(f"{op} on {eng}")
    if dump:
        out = k.dram_tensor("dump", (_REGIONS, drb), "e8m0")
        for b in range(_REGIONS):
            d = gdma.Descriptor(src=b * rb, dst=out.addr + b * drb, src_space=gdma.SBUF,
                                dst_space=gdma.DRAM, dims=((rb, 1, 1), (P, SBP, rb)),
                                src_dtype=9, dst_dtype=9)
            k.descriptor(d, [("sbuf", b)], [("dump", b)], queue=b % nq)
            ops.append(f"dump sbuf{b} -> dram")
        k.output("dump", out)
    kp = k.build()
    corrupted = None
    if corrupt:
        corrupted = _corrupt(cfg, rng, kp, preamble)
    return RandomProgram(kp, ops, corrupted)


def _corrupt(cfg, rng, kp, skip):
    """Change one instruction (not one of the first ``skip[engine]`` of its engine): a random
    byte, one field of one of its APs, or its semaphore index; returns ``(engine, index, what,
    detail)``."""
    import dataclasses
    from rtl.isa import DTYPES, decode, encode
    count = {e: len(p) // INSTR_BYTES for e, p in kp.programs.items()}
    engs = [e for e, c in count.items() if c > skip.get(e, 0)]

    def instr(e, i):
        return decode(kp.programs[e][INSTR_BYTES * i:INSTR_BYTES * (i + 1)])
    mode = rng.choice(["byte", "ap", "ap", "sem", "imm", "imm", "wait"])
    with_aps = [(e, i) for e in engs for i in range(skip.get(e, 0), count[e]) if instr(e, i).aps]
    with_imm = [(e, i) for e, i in with_aps if instr(e, i).opcode.imm]
    if mode == "ap" and not with_aps or mode == "imm" and not with_imm:
        mode = "byte"
    if mode == "ap":
        e, i = rng.choice(with_aps)
    elif mode == "imm":
        e, i = rng.choice(with_imm)
    else:
        e = rng.choice(engs)
        i = rng.randrange(skip.get(e, 0), count[e])
    prog = bytearray(kp.programs[e])
    raw = bytes(prog[INSTR_BYTES * i:INSTR_BYTES * (i + 1)])
    if mode == "byte":
        pos = rng.randrange(INSTR_BYTES)
        val = rng.choice([v for v in range(256) if v != raw[pos]])
        prog[INSTR_BYTES * i + pos] = val
        detail = (pos, val)
    else:
        ins = decode(raw)
        if mode == "sem":
            sem = rng.randint(min(cfg.semaphores, 255), 255)
            ins = dataclasses.replace(ins, post=(sem, 1))
            detail = ("post_sem", sem)
        elif mode == "wait":                 # a value no post reaches: E_TIMEOUT
            sem = rng.randrange(min(cfg.semaphores, 6 + cfg.dma_engines * cfg.dma_queues))
            ins = dataclasses.replace(ins, wait=(sem, 1 << 20))
            detail = ("wait", sem)
        elif mode == "imm":                  # one immediate field, any value of its width
            from rtl.isa import F32Bits
            f = rng.choice(ins.opcode.imm)
            v = rng.getrandbits(f.width) if rng.random() < 0.5 else rng.randrange(4)
            if f.kind == "f32":
                v = F32Bits(v)
            elif f.kind == "s" and v >> (f.width - 1):
                v -= 1 << f.width
            ins = dataclasses.replace(ins, imm={**ins.imm, f.name: v})
            detail = ("imm", f.name, v)
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
        prog[INSTR_BYTES * i:INSTR_BYTES * (i + 1)] = encode(ins)
    kp.programs[e] = bytes(prog)
    return (e, i, mode, detail)
