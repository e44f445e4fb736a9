# SPDX-License-Identifier: Apache-2.0
"""Stimulus for the DMA engine: random legal copy descriptors, malformed ones of every error
class, and their encodings. Expected results always come from ``golden.dma``."""

from __future__ import annotations

import random

from golden import dma as G

__all__ = ["random_copy", "random_element", "mutate_bad", "random_descriptor_mix",
           "element_dtypes"]


def element_dtypes(cfg):
    """dtype codes an element descriptor may use on ``cfg`` (the enabled dense formats)."""
    return tuple(c for c, n in G.DTYPES.items() if n in cfg.formats)


def random_copy(cfg, rng: random.Random, *, dram_base, dram_limit, src_space=None,
                dst_space=None, max_bytes=512, max_dims=4, contiguous=False,
                dram_span=None, sbuf_span=None, dst_dram_span=None, dst_sbuf_span=None):
    """A random legal copy descriptor (golden check passes; no overlap of source and
    destination; no destination byte written twice). ``contiguous``: one dimension.
    ``dram_span`` / ``sbuf_span``: ``(lo, hi)`` byte ranges the addresses are drawn from;
    ``dst_dram_span`` / ``dst_sbuf_span`` override them for the destination."""
    W = cfg.sbuf_word_bytes
    sbuf_n = cfg.partitions * cfg.sbuf_bytes_per_partition
    spans = {G.DRAM: dram_span or (dram_base, dram_limit), G.SBUF: sbuf_span or (0, sbuf_n)}
    dspans = {G.DRAM: dst_dram_span or spans[G.DRAM], G.SBUF: dst_sbuf_span or spans[G.SBUF]}
    for _ in range(5000):
        dt = rng.choice((0, 2, 4, 9))
        es = G.ELEM_BYTES[G.DTYPES[dt]]
        ss = rng.choice((G.DRAM, G.SBUF)) if src_space is None else src_space
        ds = rng.choice((G.DRAM, G.SBUF)) if dst_space is None else dst_space
        run = rng.randrange(1, max(2, max_bytes // es))
        outer = []
        if not contiguous:
            for _ in range(rng.randrange(max_dims)):
                num = rng.randrange(1, 4)
                s = rng.randrange(-6, 7) * W + rng.choice((0, 0, es, 2 * es, -es))
                t = s + rng.randrange(-6, 7) * W
                outer.append((num, s, t))
        dims = ((run, es, es),) + tuple(outer)
        off = rng.randrange(0, W, es)
        lo_s, hi_s = spans[ss]
        lo_d, hi_d = dspans[ds]
        src = rng.randrange(-(-lo_s // W), hi_s // W) * W + off
        dst = rng.randrange(-(-lo_d // W), hi_d // W) * W + off
        d = G.Descriptor(src=src, dst=dst, src_space=ss, dst_space=ds, dims=dims,
                         src_dtype=dt, dst_dtype=dt, post=rng.random() < 0.5,
                         sem=rng.randrange(cfg.semaphores), inc=rng.randrange(1, 4))
        if G.check(cfg, d, dram_base=dram_base, dram_limit=dram_limit)[0]:
            continue
        if d.count * es > max_bytes:
            continue
        ok = True
        for side, sp in ((0, ss), (1, ds)):
            lo, hi = G.extent(d, side)
            rng_ = (spans if side == 0 else dspans)[sp]
            if not rng_[0] <= lo <= hi < rng_[1]:
                ok = False
        if not ok:
            continue
        lo0, hi0 = G.extent(d, 0)
        lo1, hi1 = G.extent(d, 1)
        if ss == ds and not (hi0 < lo1 or hi1 < lo0):
            continue
        da = G.element_offsets(d, 1)
        if len(set(da.tolist())) != len(da):
            continue
        return d
    raise AssertionError("no legal descriptor found")


def random_element(cfg, rng: random.Random, *, dram_base, dram_limit, src_space=None,
                   dst_space=None, max_elems=48, max_dims=4, sr=None, ops=None,
                   dram_span=None, sbuf_span=None, dst_dram_span=None, dst_sbuf_span=None):
    """A random legal *element* descriptor (an op, or a cast; ``golden.dma.check`` with
    ``element_ops=True`` passes): independent element sizes, offsets and strides per side
    (multiples of the element size; negative too), source and destination not overlapping, no
    destination element named twice. ``sr``: force the rounding (None = random). Spans as
    in :func:`random_copy`."""
    sbuf_n = cfg.partitions * cfg.sbuf_bytes_per_partition
    spans = {G.DRAM: dram_span or (dram_base, dram_limit), G.SBUF: sbuf_span or (0, sbuf_n)}
    dspans = {G.DRAM: dst_dram_span or spans[G.DRAM], G.SBUF: dst_sbuf_span or spans[G.SBUF]}
    dts = element_dtypes(cfg)
    for _ in range(5000):
        op = rng.choice(ops or (G.OP_COPY, G.OP_ADD, G.OP_MAX, G.OP_MIN))
        sdt, ddt = rng.choice(dts), rng.choice(dts)
        if op == G.OP_COPY and sdt == ddt:
            continue
        es, ed = G.ELEM_BYTES[G.DTYPES[sdt]], G.ELEM_BYTES[G.DTYPES[ddt]]
        ss = rng.choice((G.DRAM, G.SBUF)) if src_space is None else src_space
        ds = rng.choice((G.DRAM, G.SBUF)) if dst_space is None else dst_space
        run = rng.randrange(1, 12)
        outer = []
        for _ in range(rng.randrange(max_dims)):
            outer.append((rng.randrange(1, 4), rng.randrange(-24, 25) * es,
                          rng.randrange(-24, 25) * ed))
        d = G.Descriptor(
            src=rng.randrange(*spans[ss]) // es * es, dst=rng.randrange(*dspans[ds]) // ed * ed,
            src_space=ss, dst_space=ds, dims=((run, es, ed),) + tuple(outer), op=op,
            src_dtype=sdt, dst_dtype=ddt, rounding=rng.randrange(2) if sr is None else int(sr),
            post=rng.random() < 0.5, sem=rng.randrange(cfg.semaphores), inc=rng.randrange(1, 4))
        if d.count > max_elems:
            continue
        if G.check(cfg, d, dram_base=dram_base, dram_limit=dram_limit, element_ops=True)[0]:
            continue
        ok = True
        for side, sp in ((0, ss), (1, ds)):
            lo, hi = G.extent(d, side)
            rng_ = (spans if side == 0 else dspans)[sp]
            if not rng_[0] <= lo <= hi < rng_[1]:
                ok = False
        lo0, hi0 = G.extent(d, 0)
        lo1, hi1 = G.extent(d, 1)
        if not ok or (ss == ds and not (hi0 < lo1 or hi1 < lo0)):
            continue
        da = G.element_offsets(d, 1)
        if len(set(da.tolist())) != len(da):
            continue
        return d
    raise AssertionError("no legal element descriptor found")


#: Field changes that make a legal descriptor malformed (the golden check says which code).
_BAD = (
    dict(reserved=1), dict(reserved=1 << 17), dict(op=4), dict(op=255), dict(src_space=2),
    dict(dst_space=3), dict(src_dtype=8, dst_dtype=8), dict(src_dtype=11, dst_dtype=11),
    dict(dst_dtype=2), dict(op=1), dict(post=True, sem=255),
)


def mutate_bad(cfg, rng: random.Random, d: G.Descriptor, *, dram_base, dram_limit):
    """A malformed or out-of-range variant of the legal ``d`` (any error class). For an
    element descriptor only the mutations that are errors for it too (form, zero dimension,
    ``dims[0]`` stride, range), so it never becomes a legal descriptor writing elsewhere."""
    from dataclasses import replace
    W = cfg.sbuf_word_bytes
    el = G.elementwise(d)
    kind = rng.choice((0, 1, 2, 5, 6, 7)) if el else rng.randrange(8)
    slots = list(d.slots)
    if kind == 0:
        return replace(d, **rng.choice(_BAD[:8] if el else _BAD))
    if kind == 1:                                      # a zero dimension
        k = rng.randrange(4)
        slots[k] = (0,) + slots[k][1:]
        return replace(d, dims=tuple(slots))
    if kind == 2:                                      # dims[0] stride not the element size
        n, s, t = slots[0]
        return replace(d, dims=((n, s + rng.choice((-1, 1, 4)), t),) + tuple(slots[1:]))
    if kind == 3:                                      # a misaligned address
        es = G.ELEM_BYTES[G.DTYPES[d.src_dtype]]
        if es == 1:
            return replace(d, dst=d.dst + 1)          # lane rule
        return replace(d, src=d.src + rng.randrange(1, es))
    if kind == 4:                                      # strides disagree modulo the word
        k = rng.randrange(1, 4)
        n, s, t = slots[k]
        es = G.ELEM_BYTES[G.DTYPES[d.src_dtype]]
        slots[k] = (max(n, 2), s, t + (es if W > es else W // 2 or 1))
        return replace(d, dims=tuple(slots))
    sbuf_n = cfg.partitions * cfg.sbuf_bytes_per_partition
    # 5..7: out of range on one side (SBUF end, DRAM window ends, negative reach)
    side = rng.randrange(2)
    space = d.src_space if side == 0 else d.dst_space
    lo, hi = G.extent(d, side)
    base = d.src if side == 0 else d.dst
    if space == G.SBUF:
        new = base + (sbuf_n - hi) + rng.randrange(0, 3) * W if kind != 7 else base - lo - W
    else:
        new = base + (dram_limit - hi) + rng.randrange(0, 3) * W if kind != 7 \
            else base - (lo - dram_base) - W
    if new < 0:
        new = base + (1 << 40)
    return replace(d, **{"src" if side == 0 else "dst": new})


def random_descriptor_mix(cfg, rng, n, *, dram_base, dram_limit, p_bad=0.5, **kw):
    """``n`` descriptors, a fraction ``p_bad`` of them malformed."""
    out = []
    for _ in range(n):
        d = random_copy(cfg, rng, dram_base=dram_base, dram_limit=dram_limit, **kw)
        if rng.random() < p_bad:
            d = mutate_bad(cfg, rng, d, dram_base=dram_base, dram_limit=dram_limit)
        out.append(d)
    return out


def directed_bad(cfg, *, dram_base, dram_limit):
    """One descriptor per check rule (docs/dma.md §3), each failing exactly that rule first,
    plus legal edge cases (the last byte of SBUF and of the DRAM window)."""
    from dataclasses import replace
    W = cfg.sbuf_word_bytes
    sbuf_n = cfg.partitions * cfg.sbuf_bytes_per_partition
    base = G.Descriptor(src=dram_base, dst=0, src_space=G.DRAM, dst_space=G.SBUF,
                        dims=((4, 4, 4),))
    out = [replace(base, reserved=2), replace(base, op=7), replace(base, src_space=G.RING),
           replace(base, dst_space=3), replace(base, src_dtype=8, dst_dtype=8),
           replace(base, src_dtype=15, dst_dtype=15),
           replace(base, dims=((4, 4, 4), (1, 0, 0), (0, 0, 0))),
           replace(base, dims=((0, 4, 4),)), replace(base, dims=((4, 4, 8),)),
           replace(base, dims=((4, 2, 4),)),
           replace(base, dst_dtype=2, dims=((4, 4, 2),)), replace(base, op=2),
           replace(base, src=dram_base + 2), replace(base, dst=6, src=dram_base + 6),
           replace(base, dims=((4, 4, 4), (2, 4 * W + 2, 4 * W + 2))),
           replace(base, dims=((4, 4, 4), (1, 0, 0), (2, W, 2 * W + 2))),
           replace(base, dst=4, src=dram_base) if W > 4 else replace(base, dst=8),
           replace(base, dims=((4, 4, 4), (1, 3, 5), (2, 0, 4)) if W > 4 else ((4, 4, 4),)),
           replace(base, dims=((4, 4, 4), (2, W, 2 * W))),
           replace(base, dst=sbuf_n - 8), replace(base, dst=sbuf_n - 16),
           replace(base, src=dram_limit - 8), replace(base, src=dram_limit - 16),
           replace(base, src=dram_base - W, dst=sbuf_n - W * ((W // 4) or 1) - W),
           replace(base, src=dram_base + W, dims=((4, 4, 4), (2, -2 * W, -2 * W))),
           replace(base, src_space=G.SBUF, src=sbuf_n - 16, dst=16),
           replace(base, dst_space=G.DRAM, dst=dram_limit - 16, src=dram_base),
           replace(base, dst_space=G.DRAM, dst=dram_limit, src=dram_base)]
    if cfg.semaphores < 256:
        out.append(replace(base, post=True, sem=cfg.semaphores))
    out.append(replace(base, post=True, sem=cfg.semaphores - 1))
    return out
