# SPDX-License-Identifier: Apache-2.0
"""Tensor engine hooks of the golden ISA simulator (``load_stationary``,
``multiply_moving``, ``transpose``) and the engine's cycle formulas."""

from __future__ import annotations

import numpy as np

from golden.ap import AP, ELEM_BYTES, PSUM, SBUF
from golden.ap import check as ap_check
from golden.isasim.errors import E_AP_FORM, E_FLAGS, E_FORMAT, E_SHAPE, E_SPARSE_TAG, Fault
from golden.isasim.hooks import ZERO_AP, ap_access, elems_per_partition, register_op
from golden.sparse import matmul_sparse
from golden.tensor import check_pair, matmul, psum_update, resolve_dense_format, transpose
from rtl.config import LANE_BITS, parse_sparse_pattern

__all__ = ["pe_latency", "pe_swap_guard", "sparse_load_dtypes", "STATIC_DETAIL"]


def pe_latency(cfg):
    """``TensorEngine.latency`` (docs/tensor-engine.md, cycle formula): cycles from a matmul's
    last moving beat to its last PSUM write."""
    La, Lm, R, C = cfg.add_stages, cfg.mul_stages, cfg.pe_rows, cfg.pe_cols
    # input register, row skew, PE (registered buses + multiplier + adder), de-skew (every
    # column through at least one register), PSUM read/add/write
    return 1 + (R - 1) * La + (1 + Lm + La) + C + (1 + La)


def pe_swap_guard(cfg):
    """``TensorEngine.swap_guard`` (docs/tensor-engine.md, stationary loading): cycles, counted
    from the cycle after a weight swap's first beat issues, before the next load may start. The
    weight-load bus is skewed like the moving data, so the swap stays ahead of a load that
    starts right behind it, whatever the number of rows: one cycle."""
    return 1


# --- what rtl/core/tensor_decode.py and the SBUF-fed engine do ---------------------------------
#
# The TensorDecoder checks the fields first (static errors; their ERR_INFO is the instruction's
# queue index, as the decoder sends it): E_FLAGS, E_FORMAT (the source dtype), E_AP_FORM (a
# dimension beyond cfg.ap_dims), E_SHAPE (the SBUF operand and the PSUM AP: its fields only,
# no PSUM AP is walked). Then the source AP goes to its reader (E_AP_*, ERR_INFO 0) and the
# command to the engine (E_SHAPE / E_FORMAT, e.g. a wide/narrow pair, ERR_INFO 0). ap2 of
# multiply_moving and ap1 of transpose are not read.

def _rtl_elems(enc, nd):
    """The decoder's element count: the product of ``num`` over the ``ap_dims`` slots, a 0
    counting as 1, saturated at ``2**16``."""
    n = 1
    for _s, k in tuple(enc.dims[:nd]):
        n = min(n * (k or 1), 1 << 16)
    return n


#: Detail prefix of the tensor decoder's static faults (before anything is issued).
STATIC_DETAIL = "decoder: "


def _static(sim, code, msg):
    # the tensor decoder's static checks report ERR_INFO 0, like every engine status
    return Fault(code, 0, STATIC_DETAIL + msg)


def _pe_flags(sim, ins, allowed):
    """The decoder's flag and pattern checks: ``allowed`` flags (plus ``sparse`` when the
    config has any pattern) [E_FLAGS]; with ``sparse``, ``sp_n:sp_m`` must be an enabled
    pattern [E_SPARSE_TAG]. Returns the pattern name, or None for a dense instruction."""
    c = sim.cfg
    ok = set(allowed) | ({"sparse"} if c.sparsity else set())
    if ins.flags - ok:
        raise _static(sim, E_FLAGS, f"{ins.op}: flags {sorted(ins.flags - ok)} are not "
                                    f"supported on SBUF-fed instructions")
    if "sparse" not in ins.flags:
        return None
    key = (ins.imm.get("sp_n", 0), ins.imm.get("sp_m", 0))
    for p in c.sparsity:
        if parse_sparse_pattern(p) == key:
            return p
    raise _static(sim, E_SPARSE_TAG, f"{ins.op}: sp_n:sp_m = {key[0]}:{key[1]} is not an "
                                     f"enabled pattern {c.sparsity}")


def sparse_load_dtypes(cfg):
    """The dtypes a sparse ``load_stationary`` takes: the dense formats of 8 or 16 bits (its
    elements are (value, tag) pairs of twice the format's size, docs/isa.md §6)."""
    return tuple(f for f in cfg.formats if cfg.fmt(f).width in (8, 16))


def _tag_bits(cfg):
    """Bits of a position tag in the engine: ``ceil(log2 m)`` of the largest enabled m."""
    return max(((parse_sparse_pattern(p)[1] - 1).bit_length() for p in cfg.sparsity), default=0)


def _pe_src(sim, ins, sparse_load=False):
    """The decoder's checks of the source AP ``ap1`` common to both ops: ``(enc, elements)``."""
    c = sim.cfg
    enc = ins.aps.get("ap1", ZERO_AP)
    if enc.dtype not in ELEM_BYTES or enc.dtype == "fp4_e2m1" or \
            enc.dtype not in (*c.formats, *(f.name for f in c.mx_element_formats.values())):
        raise _static(sim, E_FORMAT, f"{ins.op}: ap1 dtype {enc.dtype} is not a tensor format")
    if sparse_load and enc.dtype not in sparse_load_dtypes(c):
        raise _static(sim, E_FORMAT, f"sparse load_stationary: ap1 dtype {enc.dtype} must be "
                                     f"one of {sparse_load_dtypes(c)}")
    if any(k for _s, k in enc.dims[c.ap_dims:]):
        raise _static(sim, E_AP_FORM, f"{ins.op}: ap1 uses a dimension beyond ap_dims")
    return enc, _rtl_elems(enc, c.ap_dims)


def _src_ok(sim, enc):
    return enc.mem == SBUF and enc.start == 0 and 1 <= enc.count <= sim.cfg.pe_rows


def _psum_ok(sim, enc, n, last_m):
    """The decoder's PSUM AP check (fields only): PSUM fp32 from partition 0 with ``count`` the
    last load's M, at entry 0 of an existing bank, one dimension ``(1, n)``."""
    c = sim.cfg
    d = tuple(enc.dims) + ((0, 0),) * (4 - len(enc.dims))
    return (enc.mem == PSUM and enc.start == 0 and enc.dtype == "fp32"
            and enc.offset % c.psum_bank_bytes == 0 and enc.offset // c.psum_bank_bytes < c.psum_banks
            and d[0][0] == 1 and d[0][1] == n and not any(k for _s, k in d[1:])
            and enc.count == last_m)


def _last(sim):
    """``(K, M)`` of the last load (0, 0 before any, like the decoder after reset)."""
    return sim.pe_weights[0].shape if sim.pe_weights is not None else (0, 0)


def _src_bytes(ins):
    """The source AP's element bytes: the dtype's; a sparse load's (value, tag) pair twice
    that; a sparse matmul's packed 32-bit lane 4."""
    enc = ins.aps.get("ap1", ZERO_AP)
    if "sparse" not in ins.flags or enc.dtype not in ELEM_BYTES:
        return ELEM_BYTES.get(enc.dtype, 1)
    return 2 * ELEM_BYTES[enc.dtype] if ins.op == "load_stationary" else 4


def _read_src(sim, enc, elem_bytes=None):
    """The reader's check of an accepted source AP (E_AP_*, ERR_INFO 0) and its elements."""
    ap = AP(memory=enc.mem, start_partition=enc.start, num_partitions=enc.count,
            offset=enc.offset, elem_bytes=elem_bytes or ELEM_BYTES[enc.dtype],
            dims=enc.dims[:sim.cfg.ap_dims])
    r = ap_check(sim.cfg, ap)
    if r is not None:
        raise Fault(r[0], 0, f"ap1: {r[2]}")
    return ap


def _dense(sim, dtype, what):
    if dtype not in sim.cfg.formats:
        raise Fault(E_FORMAT, 0, f"{what} dtype {dtype} is an MX element format, not dense")


def _operand(sim, codes, dtype):
    """A tensor operand's codes: the element's low ``width`` bits (the AP reader zero-extends
    an element into the 32-bit lane and the engine takes the format's code; a TF32 element is
    4 bytes holding its 19-bit code, the upper 13 bits are ignored)."""
    return codes & np.uint32((1 << sim.cfg.fmt(dtype).width) - 1)


def _load_stationary(sim, ins):
    pattern = _pe_flags(sim, ins, ())
    enc, m = _pe_src(sim, ins, sparse_load=pattern is not None)
    if not _src_ok(sim, enc) or not 1 <= m <= sim.cfg.pe_cols:
        raise _static(sim, E_SHAPE, f"ap1 must be SBUF from partition 0 with K <= "
                                    f"{sim.cfg.pe_rows} partitions and M <= {sim.cfg.pe_cols} "
                                    f"elements, not {enc}")
    ap = _read_src(sim, enc, _src_bytes(ins))
    _dense(sim, enc.dtype, "ap1")
    if pattern is None:
        sim.pe_weights = (_operand(sim, sim.read_ap(ap), enc.dtype), enc.dtype)
        sim.pe_sparse = None
        return
    # the engine: K whole groups of n rows [E_SHAPE], then each beat's tags of rows < K: every
    # tag < m, the n tags of a group distinct [E_SPARSE_TAG]
    n, mm = parse_sparse_pattern(pattern)
    K = enc.count
    if K % n or not n <= K <= sim.cfg.pe_rows:
        raise Fault(E_SHAPE, 0, f"sparse load_stationary K = {K} must be a multiple of n = {n}")
    pairs = sim.read_ap(ap)
    half = 8 * ELEM_BYTES[enc.dtype]
    vals = pairs & np.uint32((1 << half) - 1)
    tags = (pairs >> np.uint32(half)) & np.uint32((1 << _tag_bits(sim.cfg)) - 1)
    for g in range(K // n):
        t = tags[g * n:(g + 1) * n]
        bad = (t >= mm).any(axis=0) | np.array(
            [len(set(t[:, j].tolist())) < n for j in range(t.shape[1])])
        if bad.any():
            j = int(np.argmax(bad))
            sim.pe_weights = sim.pe_sparse = None
            raise Fault(E_SPARSE_TAG, 0, f"sparse load_stationary: group {g} (rows "
                                         f"{g * n}..{g * n + n - 1}) of column {j}: tags "
                                         f"{t[:, j].tolist()} must be distinct and < {mm}")
    sim.pe_weights = (vals, enc.dtype)
    sim.pe_sparse = (pattern, tags)


def _multiply_moving(sim, ins):
    c = sim.cfg
    pattern = _pe_flags(sim, ins, ("acc",))
    X, n = _pe_src(sim, ins)
    P = ins.aps.get("ap0", ZERO_AP)
    K, M = _last(sim)
    if (not _src_ok(sim, X) or not 1 <= n <= c.psum_bank_fp32 or not _psum_ok(sim, P, n, M)
            or X.count > K):
        raise _static(sim, E_SHAPE, f"multiply_moving: ap1 SBUF from partition 0 with <= K = "
                                    f"{K} partitions and N <= {c.psum_bank_fp32}, ap0 PSUM fp32 "
                                    f"[0:{M}] at a bank's entry 0 with the one dimension (1, N); "
                                    f"not ap1 {X}, ap0 {P}")
    xap = _read_src(sim, X, _src_bytes(ins))
    w, fs = sim.pe_weights
    loaded = sim.pe_sparse[0] if sim.pe_sparse is not None else None
    if pattern != loaded:
        raise Fault(E_SPARSE_TAG, 0, f"multiply_moving: pattern {pattern} on weights loaded "
                                     f"with pattern {loaded}")
    if pattern is not None:
        _sparse_matmul(sim, ins, X, xap, n, P, pattern)
        return
    _dense(sim, X.dtype, "ap1")
    try:
        check_pair(resolve_dense_format(fs, c), resolve_dense_format(X.dtype, c))
    except ValueError as e:
        raise Fault(E_FORMAT, 0, str(e)) from None
    bank = P.offset // c.psum_bank_bytes
    k = X.count                         # the engine uses the first k rows of the weights
    r = matmul(w[:k], fs, _operand(sim, sim.read_ap(xap), X.dtype), X.dtype, c)
    view = sim.psum32[:M, bank, :n]
    sim.psum32[:M, bank, :n] = psum_update(view, r, "acc" in ins.flags)


def _sparse_matmul(sim, ins, X, xap, n, P, pattern):
    """The engine's sparse matmul (after the decoder's and the reader's checks): k whole
    groups of the load's rows [E_SHAPE], a moving format whose m/n elements share a 32-bit
    lane and dense weights [E_FORMAT], a wide/narrow pair [E_FORMAT]; each lane unpacked into
    its CR logical elements, the chain of ``golden.sparse.matmul_sparse``."""
    c = sim.cfg
    w, fs = sim.pe_weights
    tags = sim.pe_sparse[1]
    sn, sm = parse_sparse_pattern(pattern)
    k = X.count
    if k % sn or k < sn:
        raise Fault(E_SHAPE, 0, f"sparse multiply_moving K = {k} must be a multiple of n = {sn}")
    fx = c.fmt(X.dtype) if X.dtype in c.formats else None
    if fx is None or fx.width * sm > LANE_BITS * sn:
        raise Fault(E_FORMAT, 0, f"sparse multiply_moving: {X.dtype} elements do not pack "
                                 f"{sm // sn} to a 32-bit lane")
    try:
        check_pair(resolve_dense_format(fs, c), fx)
    except ValueError as e:
        raise Fault(E_FORMAT, 0, str(e)) from None
    lanes = sim.read_ap(xap)                            # [k, n] 32-bit lanes
    cr, wd = sm // sn, fx.width
    x = np.zeros((k * cr, n), np.uint32)
    for i in range(cr):
        x[i::cr] = (lanes >> np.uint32(i * wd)) & np.uint32((1 << wd) - 1)
    r = matmul_sparse(w[:k], tags[:k], fs, pattern, x, X.dtype, c)
    bank = P.offset // c.psum_bank_bytes
    M = w.shape[1]
    view = sim.psum32[:M, bank, :n]
    sim.psum32[:M, bank, :n] = psum_update(view, r, "acc" in ins.flags)


def _transpose(sim, ins):
    c = sim.cfg
    P = ins.aps.get("ap0", ZERO_AP)
    K, M = _last(sim)
    if not _psum_ok(sim, P, K, M) or K == 0:
        raise _static(sim, E_SHAPE, f"transpose: ap0 must be PSUM fp32 [0:{M}] at a bank's "
                                    f"entry 0 with the one dimension (1, K = {K}), not {P}")
    if K > c.psum_bank_fp32:
        raise Fault(E_SHAPE, 0, f"transpose K = {K} must be <= psum_bank_fp32 = "
                                f"{c.psum_bank_fp32}")
    w, fs = sim.pe_weights
    bank = P.offset // c.psum_bank_bytes
    sim.psum32[:M, bank, :K] = transpose(w, fs, c)


def _pe_state(sim):
    return sim.engine_state.setdefault("pe", {"free": 0, "dispatch": 0, "load_ready": None,
                                              "swap": None})


def _passes(sim, *dtypes):
    """Issues per column: ``cfg.fp32_passes`` with an FP32 operand (docs/tensor-engine.md)."""
    return sim.cfg.fp32_passes if "fp32" in dtypes else 1


def _t_load(sim, ins, issue):
    st = _pe_state(sim)
    M = elems_per_partition(ins.aps["ap1"]) * _passes(sim, ins.aps["ap1"].dtype)
    start = max(issue, st["dispatch"])
    if st["swap"] is not None:
        # the matmul that swapped the last weights in is dispatched at ``swap``, issues its
        # first beat a cycle later, and the guard counts from the cycle after that: so a tile
        # shorter than the load and the guard is load-bound (docs/tensor-engine.md)
        start = max(start, st["swap"] + pe_swap_guard(sim.cfg) + 2)
    st["load_ready"] = start + M
    return start, start + M, 0, _pe_complete(sim, ins, start, start + M)


def _pe_complete(sim, ins, dispatch, done):
    """When a tensor instruction completes to its sequencer (docs/core.md §4): at the dispatch
    of its command, unless it posts or raises an interrupt or is a sparse load (its tags are
    checked beat by beat). A posting matmul or transpose completes when its own operation's
    PSUM writes have landed (the engine's per-operation completion, its ``done``), and the
    matmuls after it keep streaming; a posting or sparse load only when the engine has
    drained (its ``done``: every earlier operation's), and the next matmul dispatches after
    that drain."""
    if ins.post is None and not ins.irq and not (
            ins.op == "load_stationary" and "sparse" in ins.flags):
        return dispatch
    st = _pe_state(sim)
    if ins.op == "load_stationary":
        done = max(done, st.get("ops_done", 0))
        st["free"] = max(st["free"], done)
    return done


def _t_mm(sim, ins, issue):
    st = _pe_state(sim)
    if ins.op == "multiply_moving":
        n = elems_per_partition(ins.aps["ap1"])
        cols = n * _passes(sim, ins.aps["ap1"].dtype, sim.pe_weights[1])
    else:
        n = cols = sim.pe_weights[0].shape[0]
    start = max(issue, st["free"])
    if st["load_ready"] is not None:
        start = max(start, st["load_ready"] + 1)
        st["load_ready"] = None
        st["swap"] = start
    st["dispatch"] = start
    st["free"] = start + cols
    K, M = sim.pe_weights[0].shape
    if ins.op == "multiply_moving":
        K = ins.aps["ap1"].count
    done = start + cols + pe_latency(sim.cfg)
    st["ops_done"] = done
    return (start, done, K * M * n if ins.op == "multiply_moving" else 0,
            _pe_complete(sim, ins, start, done))


def _pe_access(sim, ins):
    """The source AP read (not ap2 of a matmul, not ap1 of a transpose), the PSUM AP
    written."""
    return ap_access(sim, ins, {"load_stationary": ("ap1",), "multiply_moving": ("ap0", "ap1"),
                                 "transpose": ("ap0",)}[ins.op],
                      {"ap1": _src_bytes(ins)} if "sparse" in ins.flags else None)


register_op("load_stationary", _load_stationary, _t_load, _pe_access)
register_op("multiply_moving", _multiply_moving, _t_mm, _pe_access)
register_op("transpose", _transpose, _t_mm, _pe_access)


