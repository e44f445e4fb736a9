# SPDX-License-Identifier: Apache-2.0
"""The kernel API's collectives (golden/kernel/cc_ops.py, golden/kernel/multi.py) and the
data-parallel step (golden/kernels/dp_step.py) on the multi-core golden simulator.

References are independent of the simulator: numpy data movement for the moves, exact sums
of small integers (exact in FP32 whatever the order) for the reductions, and for the dp step
the composition of golden/collective/algos.py, the golden matmul and the vector ALU, plus a
float64 bound. Bad input is checked when the operation is recorded (docs/collectives.md §16).
"""

import dataclasses
import re

import numpy as np
import pytest

from golden.kernel import Kernel
from golden.kernel.multi import MultiKernel, run_multi
from golden.kernels import MULTI_KERNELS, run_golden_multi
from rtl.config import DEFAULT, SMALL

CFG = SMALL
P = CFG.partitions


def _values(rng, n, shape):
    """Per-rank FP32 values that are small integers: every sum order gives the same bits."""
    return [rng.integers(-8, 9, shape).astype(np.float32) for _ in range(n)]


def _kernel(n, body):
    return MultiKernel.from_body(CFG, n, body, dram_bytes=1 << 14)


def _io(k, name, data, dtype="fp32"):
    x = k.dram_tensor(name, dtype=dtype, data=data)
    t = k.sbuf_tile(x.shape[0], x.shape[1], dtype)
    k.load(t, x)
    return t


def _out(k, name, tile):
    y = k.dram_tensor(name, (tile.parts, tile.elems), tile.dtype)
    k.store(y, tile)
    k.output(name, y)


def _f32(codes):
    return np.asarray(codes, np.uint32).view(np.float32)


@pytest.mark.parametrize("n", [2, 4])
def test_every_collective_against_numpy(n):
    seed = 11 * n
    rng = np.random.default_rng(seed)
    E = 2 * n                                         # elements per partition
    xs = _values(rng, n, (P, E))
    mx = [rng.standard_normal((P, E)).astype(np.float32) for _ in range(n)]

    def body(k):
        r = k.rank
        t, m = _io(k, "x", xs[r]), _io(k, "m", mx[r])
        for name, shape in (("sum", (P, E)), ("max", (P, E)), ("gat", (P, n * E)),
                            ("a2a", (P, E)), ("sr", (P, E)), ("p2p", (P, E))):
            setattr(k, "_t_" + name, k.sbuf_tile(*shape, "fp32"))
        rs = k.sbuf_tile(1, P * E // n, "fp32")
        k.all_reduce(k._t_sum, t, "add")
        k.all_reduce(k._t_max, m, "max", stream=1)
        k.reduce_scatter(rs, t, "add")
        k.all_gather(k._t_gat, t, stream=2)
        k.all_to_all(k._t_a2a, t)
        k.send_recv(k._t_sr, t, 1 % n)
        k.send(t, (r + n - 1) % n, stream=3)
        k.recv(k._t_p2p, (r + 1) % n, stream=3)
        for name in ("sum", "max", "gat", "a2a", "sr", "p2p"):
            _out(k, name, getattr(k, "_t_" + name))
        _out(k, "rs", rs)

    run = run_multi(_kernel(n, body))
    assert run.errors == [None] * n, f"seed {seed}: {run.errors}"
    flat = [x.reshape(-1) for x in xs]                  # partition-major = row-major
    total = np.sum(xs, axis=0)
    big = np.maximum.reduce(mx)
    B = flat[0].size // n
    for r in range(n):
        o = {k: _f32(v) for k, v in run.outputs[r].items()}
        assert np.array_equal(o["sum"], total), f"seed {seed} rank {r}"
        assert np.array_equal(o["max"], big), f"seed {seed} rank {r}"
        assert np.array_equal(o["rs"].reshape(-1), total.reshape(-1)[r * B:(r + 1) * B])
        assert np.array_equal(o["gat"].reshape(-1), np.concatenate(flat))
        assert np.array_equal(o["a2a"].reshape(-1),
                              np.concatenate([flat[j][r * B:(r + 1) * B] for j in range(n)]))
        assert np.array_equal(o["sr"], xs[(r - 1) % n])
        assert np.array_equal(o["p2p"], xs[(r + 1) % n])
    # the ranks' outputs are identical bytes for the all-reduces
    assert all(np.array_equal(run.outputs[r]["sum"], run.outputs[0]["sum"]) for r in range(n))


def test_accl_failure_sequences():
    """ACCL's known failure sequences as kernels (all-to-all then all-reduce of its result; the
    same reduce three times into one buffer; two streams interleaved): every rank's bytes
    against numpy. Two streams issued in a different order on odd ranks would wait for each
    other for ever (one CC queue per core, in order): rejected when the kernel is built."""
    n, seed = 4, 7
    rng = np.random.default_rng(seed)
    xs = _values(rng, n, (P, 2 * n))
    ys = _values(rng, n, (P, 2 * n))

    def body(k):
        t, u = _io(k, "x", xs[k.rank]), _io(k, "y", ys[k.rank])
        a = k.sbuf_tile(P, 2 * n, "fp32")
        k.all_to_all(a, t)
        s = k.sbuf_tile(P, 2 * n, "fp32")
        k.all_reduce(s, a)
        r = k.sbuf_tile(P, 2 * n, "fp32")
        for _ in range(3):
            k.all_reduce(r, u)
        p, q = k.sbuf_tile(P, 2 * n, "fp32"), k.sbuf_tile(P, 2 * n, "fp32")
        calls = [lambda: k.all_reduce(p, t, "max", stream=5),
                 lambda: k.all_reduce(q, u, "min", stream=6)]
        for c in (calls if k.rank % 2 == 0 or not k._swap else calls[::-1]):
            c()
        for name, tile in (("s", s), ("r", r), ("p", p), ("q", q)):
            _out(k, name, tile)

    def swapped(k):
        k._swap = True
        body(k)

    with pytest.raises(ValueError, match=r"rank 1 all_reduce #5 \(its collective 5\) is on "
                                         r"stream 6, rank 0's collective 5 \(all_reduce #5\) "
                                         r"on stream 5: every rank must issue"):
        _kernel(n, swapped).build()

    def plain(k):
        k._swap = False
        body(k)

    run = run_multi(_kernel(n, plain))
    assert run.errors == [None] * n, f"seed {seed}: {run.errors}"
    flat = [x.reshape(-1) for x in xs]
    B = flat[0].size // n
    a2a = [np.concatenate([flat[j][r * B:(r + 1) * B] for j in range(n)]) for r in range(n)]
    for r in range(n):
        o = {k: _f32(v).reshape(-1) for k, v in run.outputs[r].items()}
        assert np.array_equal(o["s"], np.sum(a2a, axis=0)), f"seed {seed} rank {r}"
        assert np.array_equal(o["r"], np.sum(ys, axis=0).reshape(-1)), f"seed {seed} rank {r}"
        assert np.array_equal(o["p"], np.max(xs, axis=0).reshape(-1)), f"seed {seed} rank {r}"
        assert np.array_equal(o["q"], np.min(ys, axis=0).reshape(-1)), f"seed {seed} rank {r}"


def test_semaphores_follow_the_data():
    """Across engines: the all-reduce waits for the vector copy that produces its source
    (``s1``, the vector engine's semaphore), the vector operation that reads its destination
    waits for the CC engine's semaphore (``s5``), and the CC engine posts only because someone
    waits; the second collective, whose source nobody produces on another engine since, waits
    for nothing new."""
    def body(k):
        t = _io(k, "x", np.ones((P, 4), np.float32))
        c = k.sbuf_tile(P, 4, "fp32")
        k.copy(c, t)
        s = k.sbuf_tile(P, 4, "fp32")
        k.all_reduce(s, c)
        g = k.sbuf_tile(P, 8, "fp32")
        k.all_gather(g, c)
        d = k.sbuf_tile(P, 4, "fp32")
        k.tensor_scalar(d, s, "multiply", 2.0)
        _out(k, "y", d)

    kp = _kernel(2, body).build()[0]
    cc = kp.listing["cc"].splitlines()
    assert len(cc) == 2, cc
    assert "wait=s1>=1" in cc[0] and "post=s5+1" in cc[0], cc
    assert "wait=" not in cc[1] and "post=" not in cc[1], cc
    dve = kp.listing["dve"].splitlines()
    assert "wait=s5>=1" in dve[-1] and "tensor_scalar" in dve[-1], dve
    run = run_multi(_kernel(2, body))
    assert run.errors == [None, None]
    assert np.all(_f32(run.outputs[1]["y"]) == 4.0)


def test_bf16_all_reduce_rounds_once():
    """BF16 in, FP32 partial sums, one rounding into the BF16 destination: ranks hold 1,
    2**-9, 2**-9, 2**-9; the sum 1 + 3 * 2**-9 rounds (BF16: 8 significant bits) to
    1 + 2**-7. Chunk 3's sum starts at rank 0: rounding every partial to BF16 would keep 1."""
    import ml_dtypes
    vals = [np.full((P, 4), v, np.float32) for v in (1.0, 2.0 ** -9, 2.0 ** -9, 2.0 ** -9)]

    def body(k):
        t = _io(k, "x", vals[k.rank].astype(ml_dtypes.bfloat16), "bf16")
        s = k.sbuf_tile(P, 4, "bf16")
        k.all_reduce(s, t)
        _out(k, "y", s)

    run = run_multi(_kernel(4, body))
    assert run.errors == [None] * 4
    got = np.asarray(run.outputs[2]["y"], np.uint16).view(ml_dtypes.bfloat16).astype(np.float32)
    assert np.all(got == np.float32(1 + 2.0 ** -7)), got


# ---- bad input, at build time --------------------------------------------------------------

def _one(ranks=4, rank=1):
    k = Kernel(CFG, dram_bytes=1 << 14, rank=rank, ranks=ranks)
    return k, k.sbuf_tile(P, 8, "fp32"), k.sbuf_tile(P, 8, "fp32")


def test_integer_and_scale_formats_are_rejected():
    k, a, b = _one()
    e8 = k.sbuf_tile(P, 8, "e8m0")
    with pytest.raises(ValueError, match=r"all_reduce #1: src .* dtype must be one of "
                                         r"\['fp32', 'bf16', 'fp16'\] \(integer data is not "
                                         r"supported.*not 'e8m0'"):
        k.all_reduce(b, e8)
    i32 = dataclasses.replace(a, dtype="int32")
    with pytest.raises(ValueError, match=r"all_gather #1: src .* \(integer data is not supported"):
        k.all_gather(k.sbuf_tile(P, 32, "fp32"), i32)
    with pytest.raises(ValueError, match=r"reduce_scatter #1: src .* must be one of .*not "
                                         r"'fp8_e4m3'"):
        k.reduce_scatter(k.sbuf_tile(1, 8, "fp32"), k.sbuf_tile(P, 8, "fp8_e4m3"))


def test_reduce_ops_other_than_add_max_min_are_rejected():
    k, a, b = _one()
    for bad in ("multiply", "sum", 3, True):
        with pytest.raises(ValueError, match=r"all_reduce #\d+: op must be one of \['add', "
                                             r"'max', 'min'\].*not " + re.escape(repr(bad))):
            k.all_reduce(b, a, bad)
    k.all_reduce(b, a, 4)                           # ALU_MAX by code is accepted


def test_sizes_must_match_the_rule():
    k, a, b = _one(ranks=4, rank=1)
    with pytest.raises(ValueError, match=r"all_reduce #1: dst .* must hold 32 elements "
                                         r"\(all_reduce: as many as src\), not 28"):
        k.all_reduce(k.sbuf_tile(P, 7, "fp32"), a)
    with pytest.raises(ValueError, match=r"reduce_scatter #1: dst .* must hold 8 elements "
                                         r"\(reduce_scatter: chunk 1 of 32"):
        k.reduce_scatter(b, a)
    with pytest.raises(ValueError, match=r"all_gather #1: dst .* must hold 128 elements"):
        k.all_gather(b, a)
    with pytest.raises(ValueError, match=r"all_to_all #1: src .* multiple of the ring size 4"):
        k.all_to_all(k.sbuf_tile(P, 3, "fp32"), k.sbuf_tile(P, 3, "fp32").view(0, 3, 1))
    with pytest.raises(ValueError, match=r"send_recv #1: d must be in \[0, 3\], not 4"):
        k.send_recv(b, a, 4)
    with pytest.raises(ValueError, match=r"all_gather #2: dst .* dtype must be src .*'fp32'"):
        k.all_gather(k.sbuf_tile(P, 32, "bf16"), a)
    with pytest.raises(TypeError, match=r"all_reduce #2: src must be an SBUF or PSUM tile"):
        k.all_reduce(b, np.zeros(32, np.float32))
    with pytest.raises(ValueError, match=r"all_reduce #3: stream must be in \[0, 15\], not 16"):
        k.all_reduce(b, a, stream=16)


def test_send_recv_pairs():
    k, a, b = _one(ranks=4, rank=1)
    with pytest.raises(ValueError, match=r"recv #1: recv on stream 0 needs a send"):
        k.recv(b, 0)
    k.send(a, 3)
    with pytest.raises(ValueError, match=r"recv #2: frm must be rank 3 \(the send goes 2 "
                                         r"ranks ahead"):
        k.recv(b, 0)
    with pytest.raises(ValueError, match=r"send #2: to must be a rank in \[0, 3\], not 4"):
        k.send(a, 4, stream=1)
    with pytest.raises(ValueError, match=r"send on stream\(s\) \[0\] of rank 1 has no recv"):
        k.build()


def test_ranks_must_agree_at_build_time():
    def body(k):
        t = k.sbuf_tile(P, 8 if k.rank == 0 else 4, "fp32")
        k.all_reduce(k.sbuf_tile(P, t.elems, "fp32"), t)

    with pytest.raises(ValueError, match=r"rank 1 all_reduce #1 .* src elements 16 must equal "
                                         r"rank 0's all_reduce #1 32"):
        _kernel(2, body).build()

    def body2(k):
        t = k.sbuf_tile(P, 8, "fp32")
        k.all_reduce(k.sbuf_tile(P, 8, "fp32"), t, "max" if k.rank else "add")

    with pytest.raises(ValueError, match=r"reduce op 'max' must equal rank 0's"):
        _kernel(2, body2).build()

    def body3(k):
        t = k.sbuf_tile(P, 8, "fp32")
        if k.rank:
            k.all_reduce(k.sbuf_tile(P, 8, "fp32"), t)

    with pytest.raises(ValueError, match=r"rank 1 issues 1 collectives on stream 0, rank 0 0"):
        _kernel(2, body3).build()


# ---- the data-parallel step -----------------------------------------------------------------

@pytest.mark.parametrize("seed", [0, 1])
def test_dp_step_bit_exact_on_four_ranks(seed):
    """Seed 1 runs every rank with a random scheduling policy: the same bits."""
    import random
    case = MULTI_KERNELS["dp_step"](CFG, seed=seed, ranks=4)
    res = run_golden_multi(case, policies=None if seed == 0 else
                           [random.Random(seed * 10 + r) for r in range(4)])
    assert res["errors"] == [None] * 4, f"seed {seed}: {res['errors']}"
    for (r, name), (bad, worst) in res["check"].items():
        assert bad == 0, f"seed {seed} rank {r} {name}: {bad} codes differ"
        assert worst <= 1.0, f"seed {seed} rank {r} {name}: {worst} of the float64 bound"
    assert [c["op"] for c in res["collectives"]] == ["all_reduce", "all_reduce"]
    if seed == 0:                               # timed: the next layer's matmul overlaps
        # on the default preset: on small the next layer's four matmuls (22 cycles each) are
        # done before the all-reduce's input copy is, once the cycle model's prefetches take
        # the R channel in address order (all of rank 0's PE work ends at 680, the all-reduce
        # starts at 692)
        big = run_golden_multi(MULTI_KERNELS["dp_step"](DEFAULT, seed=seed, ranks=4))
        assert big["overlap"] is not None and big["overlap"] > 0, big["overlap"]
    # the expected codes are not the simulator's inputs: the weights did change
    w = case.kps[0].tensors["W2"]
    before = np.frombuffer(bytes(case.kps[0].dram[w.addr:w.addr + 4 * w.shape[1]]), np.uint32)
    assert not np.array_equal(before, case.expected[0]["W2"][0])


def test_dp_step_check_catches_a_wrong_sum():
    case = MULTI_KERNELS["dp_step"](CFG, seed=0, ranks=4)
    run = run_multi((case.cfg, case.kps))
    outs = [dict(o) for o in run.outputs]
    outs[2]["W1"] = np.array(outs[2]["W1"], np.uint32)
    outs[2]["W1"][0, 0] ^= 1
    chk = case.check(outs)
    assert chk[(2, "W1")][0] == 1 and chk[(1, "W1")][0] == 0


@pytest.mark.full
def test_dp_step_eight_ranks_random_policies():
    import random
    case = MULTI_KERNELS["dp_step"](CFG, seed=5, ranks=8)
    res = run_golden_multi(case, policies=[random.Random(i) for i in range(8)])
    assert res["errors"] == [None] * 8
    assert all(bad == 0 for bad, _ in res["check"].values()), res["check"]


# ---- the bidirectional all-to-all estimate (golden/collective/perf.py) -------------------------

@pytest.mark.parametrize("n, blocks", [(2, 0.5), (3, 1), (4, 2), (5, 3), (8, 8)])
def test_bidirectional_all_to_all_load(n, blocks):
    """The busiest directed link carries sum_{d < n/2} d blocks, plus n/4 when a block half way
    round is split (n even), counted by hand: n = 4: 1 + 2/2; n = 8: 1 + 2 + 3 + 4/2."""
    from golden.collective.perf import all_to_all_loads
    load, hops = all_to_all_loads(n, 64, directions=2)
    assert load == blocks * 64 and hops == n // 2
    assert all_to_all_loads(n, 64)[0] == n * (n - 1) // 2 * 64


def test_bidirectional_only_for_all_to_all():
    from golden.collective.perf import estimate
    e1 = estimate("all_to_all", 4, 1 << 16, "fp32", CFG)
    e2 = estimate("all_to_all", 4, 1 << 16, "fp32", CFG, directions=2)
    assert e2.peak == 2 * e1.peak and e2.cycles < e1.cycles / 2.9
    with pytest.raises(ValueError, match=r"directions=2 is modelled for all_to_all only"):
        estimate("all_reduce", 4, 1 << 16, "fp32", CFG, directions=2)
    with pytest.raises(ValueError, match=r"directions must be 1 or 2, not 3"):
        estimate("all_to_all", 4, 1 << 16, "fp32", CFG, directions=3)


def test_docs_busbw_table_is_the_golden_model():
    """docs/collectives.md §18's table equals the golden model's busbw table (bench_collectives writes the same) (default preset) to the
    three decimals it shows."""
    from pathlib import Path

    from golden.collective.perf import ROWS, RANKS, SIZES, message_estimate
    from rtl.config import get_preset
    cfg = get_preset("default")
    spec = {row: (op, dt, d) for row, op, dt, d in ROWS}
    text = Path(__file__).resolve().parent.parent.joinpath("docs", "collectives.md").read_text()
    sec = text[text.index("## 18."):]
    rows = {"all-reduce": ["all_reduce"], "all-gather, reduce-scatter": ["all_gather",
                                                                        "reduce_scatter"],
            "all-to-all, one direction": ["all_to_all"],
            "all-to-all, both directions (peak: 2 links)": ["all_to_all_bidir"],
            "all-reduce, BF16 in and out": ["all_reduce_bf16"]}
    seen, cur = 0, None
    for line in sec.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 2 + len(SIZES) or not cells[1].isdigit():
            continue
        cur = cells[0] or cur
        if cur not in rows:
            continue
        n = cells[1]
        for row in rows[cur]:
            got = [float(c) for c in cells[2:]]
            op, dt, d = spec[row]
            want = [round(message_estimate(op, int(n), s, dt, cfg, d).fraction, 3) for s in SIZES]
            assert got == want, (cur, n, got, want)
            seen += 1
    assert seen == 6 * len(RANKS), seen
