# SPDX-License-Identifier: Apache-2.0
"""Access-pattern stimulus: random legal descriptors, one directed descriptor per error class,
and their packing into the RTL's descriptor layout (``APGenerator.Signature(cfg).in_layout``).

Pure Python/numpy. Which descriptors are legal, and every expected address and error code, come
from :mod:`golden.ap`; the generators here only aim at interesting corners (negative steps,
1..``ap_dims`` dimensions, partial partition ranges, ranges ending on the last byte).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from golden.ap import (AP, E_AP_ALIGN, E_AP_FORM, E_AP_PART, E_AP_RANGE, PSUM, SBUF, check,
                       extent)

__all__ = ["pack_ap", "random_partitions", "random_legal_ap", "random_encodable_ap",
           "bad_aps", "random_float_memories", "fit_ap_in_zone"]


def pack_ap(layout, ap, slots):
    """The descriptor ``ap`` as an int of the RTL ``layout`` with ``slots`` dimension slots."""
    dims = [{"step": s, "num": n} for s, n in ap.slots(slots)]
    return layout.const({"mem": ap.memory, "start": ap.start_partition,
                         "count": ap.num_partitions, "esize": ap.esize, "offset": ap.offset,
                         "dims": dims}).as_value().value


def random_partitions(rng, P):
    """A legal ``(start, count)``: count drawn across the three alignment classes."""
    count = int(rng.integers(1, P + 1))
    if count > P // 2:
        g = P
    elif count > P // 4:
        g = P // 2
    else:
        g = max(1, P // 4)
    starts = [s for s in range(0, P - count + 1, g)]
    return int(rng.choice(starts)), count


def random_legal_ap(rng, cfg, *, max_elems=48, memory=None):
    """A random descriptor that :func:`golden.ap.check` accepts under ``cfg``: 1..``ap_dims``
    dimensions, signed steps (often negative, sometimes 0 or large), at most ``max_elems``
    elements, the offset placed anywhere the range allows (often touching an end)."""
    for _ in range(1000):
        mem = memory if memory is not None else int(rng.choice([SBUF, PSUM]))
        w = int(rng.choice([1, 2, 4]))
        nd = int(rng.integers(1, cfg.ap_dims + 1))
        dims, total = [], 1
        for _k in range(nd):
            n = int(rng.integers(1, max(2, max_elems // total) + 1))
            n = max(1, min(n, max_elems // total))
            total *= n
            r = rng.random()
            s = (int(rng.integers(-4, 5)) if r < 0.5 else int(rng.integers(-64, 65))
                 if r < 0.9 else int(rng.integers(-32768, 32768)))
            dims.append((s, n))
        ap0 = AP(memory=mem, elem_bytes=w, dims=tuple(dims))
        lo0, hi0 = extent(ap0)                    # relative to offset 0
        if mem == SBUF:
            base, size = 0, cfg.sbuf_bytes_per_partition
        else:
            size = cfg.psum_bank_bytes
            base = int(rng.integers(0, cfg.psum_banks)) * size
        first, final = base - lo0, base + size - 1 - hi0  # offsets that keep [lo, hi] inside
        first = -(-first // w) * w
        if mem == PSUM:                           # the offset itself must be in that bank
            first = max(first, base)
            final = min(final, base + size - w)
        if first > final:
            continue
        k = rng.random()
        off = first if k < 0.2 else final - (final % w) if k < 0.4 else \
            int(rng.integers(first // w, final // w + 1)) * w
        start, count = random_partitions(rng, cfg.partitions)
        ap = AP(memory=mem, start_partition=start, num_partitions=count, offset=off,
                elem_bytes=w, dims=tuple(dims))
        if check(cfg, ap) is None:
            return ap
    raise RuntimeError("random_legal_ap: no legal descriptor in 1000 draws")


def random_encodable_ap(rng, cfg, *, max_elems=64):
    """Any encodable descriptor (legal or not): every field drawn over its encoding's range,
    element counts kept small for enumeration."""
    nd = int(rng.integers(0, 5))
    dims, total = [], 1
    for _k in range(nd):
        n = int(rng.integers(0, max(1, max_elems // total) + 1)) if rng.random() < 0.9 else 0
        total *= max(1, n)
        dims.append((int(rng.integers(-32768, 32768)) if rng.random() < 0.3
                     else int(rng.integers(-40, 41)), n))
    return AP(memory=int(rng.integers(0, 4)), start_partition=int(rng.integers(0, 256)),
              num_partitions=int(rng.integers(0, 256)),
              offset=int(rng.integers(0, 1 << 32)) if rng.random() < 0.2
              else int(rng.integers(0, 4 * cfg.sbuf_bytes_per_partition)),
              elem_bytes=int(rng.choice([1, 2, 4, 8])), dims=tuple(dims))


def bad_aps(cfg):
    """``[(name, ap, code)]``: directed descriptors, one or more per error class, with the code
    each was built to trigger (tests assert golden agrees, then the RTL)."""
    P, S = cfg.partitions, cfg.sbuf_bytes_per_partition
    B = cfg.psum_bank_bytes
    d = ((1, 4),)
    q = max(1, P // 4)
    out = [
        ("memory none", AP(memory=0, dims=d), E_AP_FORM),
        ("memory reserved", AP(memory=3, dims=d), E_AP_FORM),
        ("elem_bytes 8", AP(elem_bytes=8, dims=d), E_AP_FORM),
        ("no dimension", AP(dims=((3, 0),)), E_AP_FORM),
        ("dimension after num 0", AP(dims=((1, 4), (0, 0), (2, 3))), E_AP_FORM),
        ("count 0", AP(num_partitions=0, dims=d), E_AP_PART),
        ("count > P", AP(num_partitions=P + 1, dims=d), E_AP_PART),
        ("start + count > P", AP(start_partition=P - q, num_partitions=q + 1, dims=d),
         E_AP_PART),
        ("start beyond P", AP(start_partition=P, num_partitions=1, dims=d), E_AP_PART),
        ("start 255", AP(start_partition=255, num_partitions=1, dims=d), E_AP_PART),
        ("large count, start P/2", AP(start_partition=P // 2, num_partitions=P // 2 + 1,
                                      dims=d), E_AP_PART),
        ("misaligned offset fp32", AP(offset=2, elem_bytes=4, dims=d), E_AP_ALIGN),
        ("misaligned offset bf16", AP(offset=1, elem_bytes=2, dims=d), E_AP_ALIGN),
        ("SBUF end + 1", AP(offset=S - 12, elem_bytes=4, dims=((1, 4),)), E_AP_RANGE),
        ("SBUF below 0", AP(offset=8, elem_bytes=4, dims=((-1, 4),)), E_AP_RANGE),
        ("SBUF below 0 outer", AP(offset=64, elem_bytes=2, dims=((1, 4), (-9, 5))), E_AP_RANGE),
        ("SBUF offset beyond", AP(offset=S, elem_bytes=1, dims=((0, 1),)), E_AP_RANGE),
        ("SBUF huge offset", AP(offset=(1 << 32) - 4, elem_bytes=4, dims=d), E_AP_RANGE),
        ("SBUF wraps 2**32", AP(offset=(1 << 32) - 4, elem_bytes=4, dims=((1, 2),)),
         E_AP_RANGE),
        ("SBUF max step", AP(offset=0, elem_bytes=4, dims=((32767, 3), (-32768, 1), (32767, 3))),
         E_AP_RANGE),
        ("PSUM crosses bank", AP(memory=PSUM, offset=B - 4, elem_bytes=4, dims=((1, 2),)),
         E_AP_RANGE),
        ("PSUM below bank", AP(memory=PSUM, offset=B, elem_bytes=4, dims=((-1, 2),)),
         E_AP_RANGE),
        ("PSUM bank >= banks", AP(memory=PSUM, offset=cfg.psum_banks * B, elem_bytes=4,
                                  dims=((0, 1),)), E_AP_RANGE),
        ("PSUM last byte + 1", AP(memory=PSUM, offset=0, elem_bytes=2,
                                  dims=((1, B // 2 + 1),)), E_AP_RANGE),
    ]
    if P >= 8:
        out.append(("small count misaligned", AP(start_partition=1, num_partitions=1, dims=d),
                    E_AP_PART))
        out.append(("mid count at P/4", AP(start_partition=P // 4, num_partitions=P // 4 + 1,
                                           dims=d), E_AP_PART))
    return out


def random_float_memories(rng, cfg, *, exps=(-8, 8), floats=0.7):
    """``(sbuf, psum)`` byte arrays ``[P, bytes per partition]``: random bytes with a fraction
    ``floats`` of the 32-bit words replaced by FP32 values ``N(0, 1) * 2**e``, ``e`` uniform in
    ``exps`` (so arithmetic sees cancellation and ordinary rounding, not only NaNs and huge
    values)."""
    out = []
    for n in (cfg.sbuf_bytes_per_partition, cfg.psum_bytes_per_partition):
        b = rng.integers(0, 256, (cfg.partitions, n), np.uint8)
        w = b.view("<u4")
        f = (rng.standard_normal(w.shape) * np.exp2(rng.integers(exps[0], exps[1] + 1,
                                                                 w.shape))).astype(np.float32)
        pick = rng.random(w.shape) < floats
        w[pick] = f.view(np.uint32)[pick]
        out.append(b)
    return tuple(out)


def fit_ap_in_zone(rng, cfg, memory, zone, w, nums, start, count, *, steps=(4, 20),
                   unit_step=0.0):
    """A legal AP of shape ``nums`` (innermost first), elements of ``w`` bytes, partitions
    ``[start, start + count)``, lying inside the byte range ``zone = (lo, hi)`` of ``memory``
    (a PSUM AP inside one bank of it), or None after 50 tries. Steps are uniform in
    ``[-steps[0], steps[0]]``, one time in five in ``[-steps[1], steps[1]]``; when every step
    came out 0, the innermost becomes 1 with probability ``unit_step``."""
    lo_z, hi_z = zone
    for _ in range(50):
        dims = []
        for n in nums:
            a = steps[0] if rng.random() < 0.8 else steps[1]
            dims.append((int(rng.integers(-a, a + 1)), n))
        if all(s == 0 for s, _ in dims) and rng.random() < unit_step:
            dims[0] = (1, dims[0][1])
        ap0 = AP(memory=memory, elem_bytes=w, dims=tuple(dims), start_partition=start,
                 num_partitions=count)
        lo0, hi0 = extent(ap0)
        first, final = lo_z - lo0, hi_z - 1 - hi0
        if memory == PSUM:            # the offset's bank holds the whole range
            B = cfg.psum_bank_bytes
            bank = int(rng.integers(lo_z // B, hi_z // B))
            first = max(first, bank * B - lo0, bank * B)
            final = min(final, bank * B + B - 1 - hi0, bank * B + B - w)
        first = -(-first // w) * w
        if first > final:
            continue
        ap = dataclasses.replace(ap0, offset=int(rng.integers(first // w, final // w + 1)) * w)
        if check(cfg, ap) is None:
            return ap
    return None
