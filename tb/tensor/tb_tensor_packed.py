# SPDX-License-Identifier: Apache-2.0
"""cocotb tests of the packed modes (issue 13, run through ``tests/test_tensor_packed.py``):
double-rate FP8 and x4 MX, every format pair and K shape, mixed with every other mode in one
accumulation group and back to back, with and without stalls; the packed errors; the cycle
count of back-to-back packed tiles. Bit for bit against ``golden.tensor``.
"""

import cocotb

from rtl.tensor.layouts import ERR_FORMAT, ERR_SHAPE, OP_LOAD, OP_MATMUL
from tb.tensor.driver import EngineDriver
from tb.tensor.program import Program, rand_codes

FP8 = ("fp8_e5m2", "fp8_e4m3", "fp8_e4m3fn", "cfp8")


def _k(rng, kmax):
    return int(rng.choice([1, 2, 3, kmax, kmax - 1, rng.integers(1, kmax + 1)]))


def _fp8_op(prog, rng, cfg, fs, fx, *, bank, acc, N, pw=0.1, M=None):
    K = _k(rng, cfg.fp8_pack * cfg.pe_rows)
    M = M or int(rng.choice([1, cfg.pe_cols, rng.integers(1, cfg.pe_cols + 1)]))
    prog.load_packed(rand_codes(rng, cfg.fmt(fs), (K, M), pw), fs, cfg.fp8_pack)
    prog.matmul_fp8x2(rand_codes(rng, cfg.fmt(fx), (K, N), pw), fx, bank=bank, acc=acc)
    return K


def _mx_op(prog, rng, cfg, ms, mx, *, bank, acc, N, wide=False, M=None):
    K = _k(rng, cfg.mx_pack * cfg.pe_rows)
    M = M or int(rng.choice([1, cfg.pe_cols, rng.integers(1, cfg.pe_cols + 1)]))
    nb = -(-K // cfg.mx_block)
    es, ex = cfg.mx_element_formats[ms], cfg.mx_element_formats[mx]
    lo, hi = (0, 256) if wide else (118, 137)
    pw = 0.1 if wide else 0.02
    prog.load_packed(rand_codes(rng, es, (K, M), pw), es.name, cfg.mx_pack,
                     scales=rng.integers(lo, hi, (nb, M)))
    prog.matmul_mx_x4(rand_codes(rng, ex, (K, N), pw), rng.integers(lo, hi, (nb, N)), mx,
                      bank=bank, acc=acc, s_mx_fmt=ms)
    return K


@cocotb.test()
async def fp8_double_rate_all_pairs(dut):
    """Every FP8 pair (cFP8 included), ragged and full K (up to 2 x rows), specials, each pair
    into its own bank region, overwrite then accumulate."""
    cfg, p, seed, rng, drv = EngineDriver.setup(dut, 31)
    if not cfg.fp8_pack:
        return
    fp8 = [f for f in FP8 if f in cfg.formats]
    pairs = [(a, b) for a in fp8 for b in fp8]
    nmax = min(cfg.psum_bank_fp32, 6)
    for chunk in range(0, len(pairs), cfg.psum_banks):
        prog = Program(cfg, rng)
        for i, (fs, fx) in enumerate(pairs[chunk:chunk + cfg.psum_banks]):
            _fp8_op(prog, rng, cfg, fs, fx, bank=i, acc=False, N=nmax, M=cfg.pe_cols)
            _fp8_op(prog, rng, cfg, fx, fs, bank=i, acc=True, N=nmax, M=cfg.pe_cols)
            prog.read(i, nmax)
        await drv.run_checked(prog, seed, f"fp8 x2 pairs {pairs[chunk:chunk + 4]}",
                         bool(rng.integers(0, 2)))


@cocotb.test()
async def mx_x4_all_pairs(dut):
    """Every MX pair, K up to 4 x rows (partial blocks), tame and extreme scales (NaN)."""
    cfg, p, seed, rng, drv = EngineDriver.setup(dut, 32)
    if not cfg.mx_pack:
        return
    pairs = [(a, b) for a in cfg.mx_formats for b in cfg.mx_formats]
    nmax = min(cfg.psum_bank_fp32, 6)
    prog = Program(cfg, rng)
    used = set()
    for i, (ms, mx) in enumerate(pairs):
        b = i % cfg.psum_banks
        _mx_op(prog, rng, cfg, ms, mx, bank=b, acc=b in used, N=nmax, wide=bool(i % 3 == 2),
               M=cfg.pe_cols)
        used.add(b)
    for b in sorted(used):
        prog.read(b, nmax)
    await drv.run_checked(prog, seed, "mx x4 pairs", bool(rng.integers(0, 2)))


@cocotb.test()
async def packed_mixed_accumulation(dut):
    """One accumulation group mixing every mode back to back: FP8 x2, MX x4, dense BF16 / FP8,
    FP32 (four passes), unpacked MX, weight reuse (a second matmul on the same packed
    weights), with and without random stalls on every stream."""
    cfg, p, seed, rng, drv = EngineDriver.setup(dut, 33)
    if not (cfg.fp8_pack and cfg.mx_pack):
        return
    R, C = cfg.pe_rows, cfg.pe_cols
    fp8 = [f for f in FP8 if f in cfg.formats]
    for bubbles in (False, True):
        prog = Program(cfg, rng)
        N = int(rng.integers(1, min(cfg.psum_bank_fp32, 10) + 1))
        for i in range(10):
            kind = ["fp8x2", "mx4", "bf16", "fp8x2", "fp32", "mx4", "mx", "fp8", "fp8x2",
                    "mx4"][i]
            acc = i > 0
            if kind == "fp8x2":
                K = _fp8_op(prog, rng, cfg, str(rng.choice(fp8)), str(rng.choice(fp8)), bank=0,
                            acc=acc, N=N, M=C)
                if i == 3:       # the same packed weights again, no new load
                    prog.matmul_fp8x2(rand_codes(rng, cfg.fmt("fp8_e4m3"), (K, N), 0.05),
                                      "fp8_e4m3", bank=0, acc=True)
            elif kind == "mx4":
                _mx_op(prog, rng, cfg, str(rng.choice(cfg.mx_formats)),
                       str(rng.choice(cfg.mx_formats)), bank=0, acc=acc, N=N, M=C)
            elif kind == "mx":
                mx = cfg.mx_formats[0]
                el = cfg.mx_element_formats[mx]
                K = int(rng.integers(1, R + 1))
                nb = -(-K // cfg.mx_block)
                prog.load(rand_codes(rng, el, (K, C), 0.0), el.name,
                          scales=rng.integers(120, 134, (nb, C)))
                prog.matmul_mx(rand_codes(rng, el, (K, N), 0.0), rng.integers(120, 134, (nb, N)),
                               mx, bank=0, acc=acc, s_mx_fmt=mx)
            else:
                f = {"bf16": "bf16", "fp32": "fp32", "fp8": "fp8_e5m2"}[kind]
                if f not in cfg.formats:
                    continue
                K = int(rng.integers(1, R + 1))
                prog.load(rand_codes(rng, cfg.fmt(f), (K, C), 0.0), f)
                prog.matmul(rand_codes(rng, cfg.fmt(f), (K, N), 0.0), f, bank=0, acc=acc)
        prog.read(0, N)
        await drv.run_checked(prog, seed, f"packed_mixed bubbles={bubbles}", bubbles)


def _error_cases(cfg, tl):
    """(name, build(prog, rng), error code) of every packed-mode rejection."""
    R = cfg.pe_rows
    e4 = tl.fmt_index("fp8_e4m3")
    bf = tl.fmt_index("bf16")
    mx0 = cfg.mx_formats[0]
    el0 = cfg.mx_element_formats[mx0]

    def dense_then_pk(prog, rng):        # packed matmul on dense weights
        prog.load(rand_codes(rng, cfg.fmt("fp8_e4m3"), (R, cfg.pe_cols), 0.0), "fp8_e4m3")
        prog.raw_cmd(tl.pack_cmd(OP_MATMUL, fmt=e4, k=2, n=1, bank=0, pk=1), ERR_FORMAT)

    def pk_then_dense(prog, rng):        # dense matmul on packed weights
        prog.load_packed(rand_codes(rng, cfg.fmt("fp8_e4m3"), (R, cfg.pe_cols), 0.0),
                         "fp8_e4m3", cfg.fp8_pack)
        prog.raw_cmd(tl.pack_cmd(OP_MATMUL, fmt=e4, k=2, n=1, bank=0), ERR_FORMAT)

    def fp8_then_mx4(prog, rng):         # x4 MX matmul on FP8-packed weights
        if el0.width == 8:
            prog.load_packed(rand_codes(rng, el0, (R, cfg.pe_cols), 0.0), el0.name,
                             cfg.fp8_pack)
        prog.raw_cmd(tl.pack_cmd(OP_MATMUL, fmt=tl.fmt_index(el0.name), k=2, n=1, bank=0,
                                 pk=1, mx=1), ERR_FORMAT)

    def pk_load_bf16(prog, rng):         # a packed load of a 16-bit format
        prog.raw_cmd(tl.pack_cmd(OP_LOAD, fmt=bf, m=1, pk=1), ERR_FORMAT)

    def pk_k_too_big(prog, rng):         # K = 2 x rows + 1
        prog.load_packed(rand_codes(rng, cfg.fmt("fp8_e4m3"), (R, cfg.pe_cols), 0.0),
                         "fp8_e4m3", cfg.fp8_pack)
        prog.raw_cmd(tl.pack_cmd(OP_MATMUL, fmt=e4, k=cfg.fp8_pack * R + 1, n=1, bank=0,
                                 pk=1), ERR_SHAPE)

    def dense_k_above_rows(prog, rng):   # an unpacked matmul still stops at K = rows
        prog.load(rand_codes(rng, cfg.fmt("fp8_e4m3"), (R, cfg.pe_cols), 0.0), "fp8_e4m3")
        prog.raw_cmd(tl.pack_cmd(OP_MATMUL, fmt=e4, k=R + 1, n=1, bank=0), ERR_SHAPE)

    def pk_sparse_load(prog, rng):       # packed + sparse: not supported
        prog.raw_cmd(tl.pack_cmd(OP_LOAD, fmt=e4, m=1, k=R, pk=1, sp=1), ERR_FORMAT)

    cases = [("dense weights, packed matmul", dense_then_pk, ERR_FORMAT),
             ("packed weights, dense matmul", pk_then_dense, ERR_FORMAT),
             ("fp8-packed weights, x4 MX matmul", fp8_then_mx4, ERR_FORMAT),
             ("packed load of bf16", pk_load_bf16, ERR_FORMAT),
             ("packed K above 2 x rows", pk_k_too_big, ERR_SHAPE),
             ("unpacked K above rows", dense_k_above_rows, ERR_SHAPE)]
    if tl.sparse:
        cases.append(("packed sparse load", pk_sparse_load, ERR_FORMAT))
    return cases


@cocotb.test()
async def packed_errors_rejected(dut):
    """Every packed-mode rejection, each from reset: the documented code, the command consumes
    no beats and writes nothing (bank 0 reads back its golden data), the engine goes on with a
    good packed load and an accumulating packed matmul."""
    cfg, p, seed, rng, drv = EngineDriver.setup(dut, 34)
    if not (cfg.fp8_pack and cfg.mx_pack):
        return
    tl = Program(cfg).tl
    N = 3
    for name, build, code in _error_cases(cfg, tl):
        prog = Program(cfg, rng)
        _fp8_op(prog, rng, cfg, "fp8_e5m2", "fp8_e4m3", bank=0, acc=False, N=N, pw=0.0)
        build(prog, rng)
        _fp8_op(prog, rng, cfg, "fp8_e4m3", "fp8_e5m2", bank=0, acc=True, N=N, pw=0.0)
        prog.read(0, N)
        await drv.run_checked(prog, seed, f"packed_errors ({name})", bool(rng.integers(0, 2)),
                         err=code)


@cocotb.test()
async def packed_tile_timing(dut):
    """Back-to-back full packed tiles (K = P x rows), each with its own load, take exactly the
    cycles of BF16 tiles (``tb.tensor.build.cycle_formula``, one beat per moving column): P x
    the MACs per cycle. N on both sides of the load-bound threshold
    (``load_bound_period``): below it the next load sets the pace, from it on the matmuls
    issue without a gap."""
    from tb.tensor.build import cycle_formula, load_bound_period
    cfg, p, seed, rng, drv = EngineDriver.setup(dut, 35)
    if not (cfg.fp8_pack and cfg.mx_pack):
        return
    R, C = cfg.pe_rows, cfg.pe_cols
    G = load_bound_period(cfg, M=C)
    tiles = 3
    Ns = sorted({n for n in (G - 1, G, R + C + 8, G + 1) if 1 <= n <= cfg.psum_bank_fp32})
    assert Ns and Ns[0] < G, f"no load-bound N for G={G}"
    for kind in ("bf16", "fp8x2", "mx4"):
        for N in Ns:
            prog = Program(cfg, rng)
            for i in range(tiles):
                b = i % cfg.psum_banks
                if kind == "bf16":
                    K = R
                    prog.load(rand_codes(rng, cfg.fmt("bf16"), (K, C), 0.0), "bf16")
                    prog.matmul(rand_codes(rng, cfg.fmt("bf16"), (K, N), 0.0), "bf16", bank=b)
                elif kind == "fp8x2":
                    K = cfg.fp8_pack * R
                    prog.load_packed(rand_codes(rng, cfg.fmt("fp8_e4m3"), (K, C), 0.0),
                                     "fp8_e4m3", cfg.fp8_pack)
                    prog.matmul_fp8x2(rand_codes(rng, cfg.fmt("fp8_e5m2"), (K, N), 0.0),
                                      "fp8_e5m2", bank=b)
                else:
                    K = cfg.mx_pack * R
                    nb = -(-K // cfg.mx_block)
                    mx = "mxfp4" if "mxfp4" in cfg.mx_formats else cfg.mx_formats[0]
                    el = cfg.mx_element_formats[mx]
                    prog.load_packed(rand_codes(rng, el, (K, C), 0.0), el.name, cfg.mx_pack,
                                     scales=rng.integers(120, 134, (nb, C)))
                    prog.matmul_mx_x4(rand_codes(rng, el, (K, N), 0.0),
                                      rng.integers(120, 134, (nb, N)), mx, bank=b,
                                      s_mx_fmt=mx)
            prog.read((tiles - 1) % cfg.psum_banks, N)
            out = await drv.run_checked(prog, seed, f"packed timing {kind} N={N}", False)
            window = out["t_last_write"] - out["t_first_in"] + 1
            want = cycle_formula(cfg, M=C, N=N, tiles=tiles)
            assert window == want, (f"seed={seed}: {tiles} {kind} tiles, N={N} (load-bound "
                                    f"below {G}), took {window}, want {want}")
            assert prog.macs == tiles * K * C * N
