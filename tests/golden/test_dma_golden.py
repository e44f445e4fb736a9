# SPDX-License-Identifier: Apache-2.0
"""golden.dma against independent references: the encoding against a byte-by-byte reading of
docs/dma.md §2, the closed-form extent against the enumerated addresses, copies against nested
Python loops, ops and casts against per-element float references, every error class."""

import itertools
import random
import struct

import numpy as np
import pytest

from golden import dma as G
from golden.formats import convert_rne, decode
from rtl.config import get_preset

CFG = get_preset("small")


def test_pack_layout_by_hand():
    d = G.Descriptor(src=0x1122334455667788, dst=0x99, src_space=G.SBUF, dst_space=G.DRAM,
                     dims=((3, 2, 2), (5, -8, 16)), op=G.OP_MAX, src_dtype=2, dst_dtype=3,
                     rounding=G.RND_SR, post=True, sem=7, inc=0x1234)
    b = d.pack()
    assert len(b) == 64
    assert b[0:8] == bytes.fromhex("8877665544332211")
    assert b[8] == 0x99 and b[9:16] == bytes(7)
    assert struct.unpack_from("<Hii", b, 16) == (3, 2, 2)
    assert struct.unpack_from("<Hii", b, 26) == (5, -8, 16)
    assert struct.unpack_from("<Hii", b, 36) == (1, 0, 0)
    assert b[56] == 2                      # op
    assert b[57] == 0b110001               # src 1 | dst 0 << 2 | SR << 4 | post << 5
    assert b[58] == 0x32 and b[59] == 7
    assert b[60:62] == bytes([0x34, 0x12]) and b[62:64] == bytes(2)
    assert G.Descriptor.unpack(b) == G.Descriptor.unpack(d.to_int())
    assert G.Descriptor.unpack(b).slots == d.slots


def test_pack_roundtrip_random():
    rng = random.Random(1)
    for _ in range(300):
        dims = tuple((rng.randrange(1 << 16), rng.randrange(-(1 << 31), 1 << 31),
                      rng.randrange(-(1 << 31), 1 << 31)) for _ in range(4))
        d = G.Descriptor(src=rng.getrandbits(64), dst=rng.getrandbits(64),
                         src_space=rng.randrange(4), dst_space=rng.randrange(4), dims=dims,
                         op=rng.randrange(256), src_dtype=rng.randrange(16),
                         dst_dtype=rng.randrange(16), rounding=rng.randrange(2),
                         post=bool(rng.randrange(2)), sem=rng.randrange(256),
                         inc=rng.randrange(1 << 16), reserved=rng.randrange(1 << 18))
        assert G.Descriptor.unpack(d.pack()) == d


@pytest.mark.parametrize("field,value,text", [
    ("src", -1, r"'src' must be in \[0, 18446744073709551615\], not -1"),
    ("dst_space", 4, r"'dst_space' must be in \[0, 3\], not 4"),
    ("dims", ((1 << 16, 4, 4),), r"'dims\[0\].num' must be in \[0, 65535\], not 65536"),
    ("dims", ((1, 4, 1 << 31),), r"'dims\[0\].dst_stride' must be in"),
    ("dims", ((1, 4, 4),) * 5, r"'dims' must be a tuple of 1 to 4"),
    ("sem", 256, r"'sem' must be in \[0, 255\], not 256"),
    ("inc", 1 << 16, r"'inc' must be in \[0, 65535\]"),
    ("rounding", 2, r"'rounding' must be in \[0, 1\], not 2"),
])
def test_unencodable_fields_named(field, value, text):
    with pytest.raises(ValueError, match=text):
        G.Descriptor(**{field: value})
    with pytest.raises(TypeError, match="'op' must be an integer"):
        G.Descriptor(op=1.0)


def test_extent_is_min_max_of_addresses():
    rng = random.Random(2)
    for _ in range(500):
        es = rng.choice((1, 2, 4))
        dt = {1: 4, 2: 2, 4: 0}[es]
        dims = ((rng.randrange(1, 5), es, es),) + tuple(
            (rng.randrange(1, 4), rng.randrange(-40, 40), rng.randrange(-40, 40))
            for _ in range(rng.randrange(4)))
        d = G.Descriptor(src=1000, dst=2000, dims=dims, src_dtype=dt, dst_dtype=dt)
        for side in (0, 1):
            addrs = [a + j for a in G.element_offsets(d, side) for j in range(es)]
            assert G.extent(d, side) == (min(addrs), max(addrs))


def _loop_copy(d, mem):
    """Nested-loop reference copy (src/dst bytes by Python indexing)."""
    es = G.ELEM_BYTES[G.DTYPES[d.src_dtype]]
    bufs = {G.DRAM: (mem.dram, mem.dram_base), G.SBUF: (mem.sbuf, 0)}
    (sb, so), (db, do) = bufs[d.src_space], bufs[d.dst_space]
    moves = []
    n = [s[0] for s in d.slots]
    for i3, i2, i1, i0 in itertools.product(*(range(x) for x in reversed(n))):
        idx = (i0, i1, i2, i3)
        sa = d.src + sum(i * s[1] for i, s in zip(idx, d.slots))
        da = d.dst + sum(i * s[2] for i, s in zip(idx, d.slots))
        moves.append((da - do, bytes(sb[sa - so: sa - so + es])))
    for a, v in moves:
        db[a: a + len(v)] = v


def random_copy(cfg, rng, mem, *, src_space=None, dst_space=None, max_bytes=512):
    """A random legal copy descriptor (no overlap between source and destination)."""
    W = cfg.sbuf_word_bytes
    sbuf_n = cfg.partitions * cfg.sbuf_bytes_per_partition
    for _ in range(1000):
        dt = rng.choice((0, 2, 4, 9))
        es = G.ELEM_BYTES[G.DTYPES[dt]]
        ss = rng.choice((G.DRAM, G.SBUF)) if src_space is None else src_space
        ds = rng.choice((G.DRAM, G.SBUF)) if dst_space is None else dst_space
        run = rng.randrange(1, 40)
        nd = rng.randrange(4)
        outer = []
        for _ in range(nd):
            num = rng.randrange(1, 4)
            s = rng.randrange(-6, 7) * W + rng.choice((0, 0, es, 2 * es, -es))
            t = s + rng.randrange(-6, 7) * W
            outer.append((num, s, t))
        dims = ((run, es, es),) + tuple(outer)
        off = rng.randrange(0, W, es)
        size = {G.DRAM: (mem.dram_base, mem.dram_limit), G.SBUF: (0, sbuf_n)}
        src = rng.randrange(size[ss][0] // W, size[ss][1] // W) * W + off
        dst = rng.randrange(size[ds][0] // W, size[ds][1] // W) * W + off
        d = G.Descriptor(src=src, dst=dst, src_space=ss, dst_space=ds, dims=dims,
                         src_dtype=dt, dst_dtype=dt, post=rng.random() < 0.5,
                         sem=rng.randrange(cfg.semaphores), inc=rng.randrange(1, 4))
        if G.check(cfg, d, dram_base=mem.dram_base, dram_limit=mem.dram_limit)[0]:
            continue
        lo0, hi0 = G.extent(d, 0)
        lo1, hi1 = G.extent(d, 1)
        if ss == ds and not (hi0 < lo1 or hi1 < lo0):
            continue
        if d.count * es > max_bytes:
            continue
        # no element written twice (a zero/aliasing stride would make the order matter)
        da = G.element_offsets(d, 1)
        if len(set(da.tolist())) != len(da):
            continue
        return d
    raise AssertionError("no legal descriptor found")


def test_copy_matches_nested_loops():
    rng = random.Random(3)
    for _ in range(200):
        nrng = np.random.default_rng(rng.randrange(1 << 30))
        mem = G.Memory(CFG, dram_base=0x10000, dram_bytes=4096,
                       dram=nrng.integers(0, 256, 4096, dtype=np.uint8).tobytes(),
                       sbuf=nrng.integers(0, 256, 4 * 4096, dtype=np.uint8).tobytes())
        d = random_copy(CFG, rng, mem)
        ref = mem.copy()
        _loop_copy(d, ref)
        assert G.run(CFG, d, mem) == (G.E_OK, 0)
        assert mem.dram == ref.dram and mem.sbuf == ref.sbuf


def test_cast_and_ops_per_element():
    cfg = CFG
    rng = np.random.default_rng(4)
    n = 64
    for sdt, ddt in ((0, 2), (2, 0), (3, 6), (0, 4)):
        sf, df = cfg.fmt(G.DTYPES[sdt]), cfg.fmt(G.DTYPES[ddt])
        ses, des = G.ELEM_BYTES[sf.name], G.ELEM_BYTES[df.name]
        scodes = rng.integers(0, 1 << sf.width, n, dtype=np.uint64)
        dcodes = rng.integers(0, 1 << df.width, n, dtype=np.uint64)
        for op in (G.OP_COPY, G.OP_ADD, G.OP_MAX, G.OP_MIN):
            mem = G.Memory(cfg, dram_bytes=1024)
            for i in range(n):
                mem.dram[ses * i: ses * (i + 1)] = int(scodes[i]).to_bytes(ses, "little")
                mem.sbuf[des * i: des * (i + 1)] = int(dcodes[i]).to_bytes(des, "little")
            d = G.Descriptor(src=0, dst=0, src_space=G.DRAM, dst_space=G.SBUF,
                             dims=((n, ses, des),), op=op, src_dtype=sdt, dst_dtype=ddt)
            assert G.run(cfg, d, mem, element_ops=True)[0] == G.E_OK
            a = decode(scodes.astype(np.uint32), sf).astype(np.float64)
            b = decode(dcodes.astype(np.uint32), df).astype(np.float64)
            for i in range(n):
                x, y = a[i], b[i]
                if op == G.OP_COPY:
                    r = x
                elif np.isnan(x) or np.isnan(y):
                    r = np.nan
                elif op == G.OP_ADD:
                    r = np.float32(np.float32(y) + np.float32(x))
                elif x == y == 0:
                    r = (y if np.signbit(y) else x) if op == G.OP_MIN else (x if np.signbit(y) else y)
                else:
                    r = max(x, y) if op == G.OP_MAX else min(x, y)
                got = int.from_bytes(mem.sbuf[des * i: des * (i + 1)], "little")
                want = int(convert_rne(np.float32(r), df))
                if np.isnan(r):
                    assert np.isnan(decode(np.uint32(got), df)), (op, i)
                else:
                    assert got == want, (sdt, ddt, op, i, x, y, got, want)


def test_sr_needs_rand():
    d = G.Descriptor(src=0, dst=0, dims=((4, 4, 2),), src_dtype=0, dst_dtype=2,
                     rounding=G.RND_SR)
    mem = G.Memory(CFG, dram_bytes=64)
    with pytest.raises(ValueError, match="'rand' must hold 4"):
        G.run(CFG, d, mem, element_ops=True)
    assert G.run(CFG, d, mem, element_ops=True, rand=np.zeros(4, np.uint32)) == (0, 0)


def test_sr_stream_draws_in_run_order():
    """``rand`` = the engine's stream (``sr_stream``): each SR element descriptor draws
    ``sr_draws(d)`` = ``d.count`` words in element order, RNE, byte copies and rejected ones
    draw none; equal to passing the same words explicitly."""
    from golden.prng import XorWow
    sr = G.Descriptor(src=0, dst=0, dims=((5, 4, 2), (2, 20, 10)), src_dtype=0, dst_dtype=2,
                      rounding=G.RND_SR)
    rne = G.Descriptor(src=0, dst=64, dims=((3, 4, 2),), src_dtype=0, dst_dtype=2)
    copy = G.Descriptor(src=0, dst=64, dims=((3, 4, 4),), rounding=G.RND_SR)
    bad = G.Descriptor(src=2, dst=64, dims=((3, 4, 2),), src_dtype=0, dst_dtype=2,
                       rounding=G.RND_SR)
    assert [G.sr_draws(d) for d in (sr, rne, copy)] == [10, 0, 0]
    rng = np.random.default_rng(7)
    dram = rng.integers(0, 256, 256, dtype=np.uint8).tobytes()
    stream = G.sr_stream(CFG, 2)
    assert stream.lane == (1 << 16) + 2 and stream.seed == CFG.sr_seed
    m1 = G.Memory(CFG, dram_bytes=256, dram=dram)
    for d in (rne, copy, bad, sr):
        G.run(CFG, d, m1, element_ops=True, rand=stream)
    ref = XorWow(CFG.sr_seed, (1 << 16) + 2)
    m2 = G.Memory(CFG, dram_bytes=256, dram=dram)
    G.run(CFG, rne, m2, element_ops=True)
    G.run(CFG, copy, m2, element_ops=True)
    G.run(CFG, sr, m2, element_ops=True, rand=ref.next_n(10))
    assert m1.sbuf == m2.sbuf
    assert stream.state == ref.state                 # the bad one drew nothing
    m3 = G.Memory(CFG, dram_bytes=256, dram=dram)
    G.run(CFG, sr, m3, element_ops=True, rand=np.zeros(10, np.uint32))
    assert m3.sbuf != m1.sbuf                          # the words matter (seeded, fixed)


def test_tf32_bits_above_the_code_are_ignored():
    mem = G.Memory(CFG, dram_bytes=64)
    mem.dram[0:8] = (0x1FC00 | (0x1ABC << 19)).to_bytes(4, "little") + (0x20000).to_bytes(
        4, "little")                                  # tf32 1.0 with garbage, tf32 2.0
    d = G.Descriptor(src=0, dst=0, dims=((2, 4, 4),), src_dtype=1, dst_dtype=0)
    assert G.run(CFG, d, mem, element_ops=True) == (0, 0)
    assert mem.sbuf[0:8] == struct.pack("<ff", 1.0, 2.0)
    back = G.Descriptor(src=0, dst=0, src_space=G.SBUF, dst_space=G.DRAM, dims=((2, 4, 4),),
                        src_dtype=0, dst_dtype=1)
    assert G.run(CFG, back, mem, element_ops=True) == (0, 0)
    assert mem.dram[0:8] == (0x1FC00).to_bytes(4, "little") + (0x20000).to_bytes(4, "little")


def _code(d, **kw):
    return G.check(CFG, d, dram_base=0x1000, dram_limit=0x2000, **kw)


@pytest.mark.parametrize("kw,code,field", [
    (dict(reserved=1), G.E_DESC, G.F_RESERVED),
    (dict(op=4), G.E_DESC, G.F_OP),
    (dict(src_space=G.RING), G.E_DESC, G.F_SPACE),
    (dict(dst_space=3), G.E_DESC, G.F_SPACE),
    (dict(src_dtype=8, dst_dtype=8), G.E_DESC, G.F_DTYPE),
    (dict(src_dtype=10, dst_dtype=10), G.E_DESC, G.F_DTYPE),
    (dict(dims=((4, 4, 4), (0, 0, 0))), G.E_DESC, G.F_NUM),
    (dict(dims=((0, 4, 4),)), G.E_DESC, G.F_NUM),
    (dict(dims=((4, 8, 4),)), G.E_DESC, G.F_DIM0),
    (dict(post=True, sem=16), G.E_DESC, G.F_SEM),
    (dict(dst_dtype=2, dims=((4, 4, 2),)), G.E_DESC, G.F_ELEMWISE),
    (dict(src=0x1002), G.E_AP_ALIGN, G.F_ADDR_ALIGN),
    (dict(dims=((4, 4, 4), (2, 6, 6))), G.E_AP_ALIGN, G.F_STRIDE_ALIGN),
    (dict(dst=4), G.E_AP_ALIGN, G.F_LANE),
    (dict(dims=((4, 4, 4), (2, 8, 12))), G.E_AP_ALIGN, G.F_LANE),
    (dict(src=0x1FF8, dst=0x0), G.E_AXI, G.F_RANGE),
    (dict(src=0xFF8, dst=0x0), G.E_AXI, G.F_RANGE),
    (dict(dst=4 * 4096 - 8), G.E_AP_RANGE, G.F_RANGE),
    (dict(dims=((4, 4, 4), (2, -64, -64))), G.E_AXI, G.F_RANGE),
])
def test_every_error_class(kw, code, field):
    base = dict(src=0x1000, dst=0x0, src_space=G.DRAM, dst_space=G.SBUF, dims=((4, 4, 4),))
    base.update(kw)
    d = G.Descriptor(**base)
    got = _code(d)
    assert got[0] == code and got[1] & 0xFF == field, got
    mem = G.Memory(CFG, dram_base=0x1000, dram_bytes=0x1000)
    before = (bytes(mem.dram), bytes(mem.sbuf))
    assert G.run(CFG, d, mem)[0] == code
    assert (bytes(mem.dram), bytes(mem.sbuf)) == before


def test_legal_edges_pass():
    ok = G.Descriptor(src=0x1FF0, dst=4 * 4096 - 16, dims=((4, 4, 4),))
    assert _code(ok)[0] == G.E_OK
    assert _code(G.Descriptor(src=0x1000, dst=0, dims=((2, 4, 4), (3, -8, 8))))[0] == G.E_AXI
    assert _code(G.Descriptor(src=0x1010, dst=0x10, dims=((2, 4, 4), (3, -8, -8))))[0] == 0
