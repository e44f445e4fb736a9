# SPDX-License-Identifier: Apache-2.0
"""The cycle model of a posting tensor instruction (docs/core.md §4): a matmul or transpose
that posts completes when its own operation's PSUM writes have landed (``done``) and the
matmuls after it stream on without a gap; a load that posts completes only when the engine
has drained every earlier operation, and the next matmul waits for that."""

from golden.asm import assemble
from golden.isasim import IsaSim, pe_latency
from rtl.config import SMALL

K, M, N = SMALL.pe_rows, SMALL.pe_cols, 16
BANK = SMALL.psum_bank_bytes
LOAD = f"load_stationary ap1=sbuf.bf16[0:{K}]@0x0{{1x{M}}}"


def _mm(bank, post=""):
    return (f"multiply_moving ap0=psum.fp32[0:{M}]@0x{bank * BANK:x}{{1x{N}}} "
            f"ap1=sbuf.bf16[0:{K}]@0x100{{1x{N}}}{post}")


def _pe(prog):
    sim = IsaSim(SMALL)
    assert sim.run({"pe": assemble("\n".join(prog) + "\n")}) is None
    return [e for e in sim.timeline if e.stream == "pe"]


def test_posting_matmul_completes_with_its_op_without_a_drain():
    ev = _pe([LOAD, _mm(0), _mm(1, " post=s0+1"), _mm(2), _mm(3)])
    mm = [e for e in ev if e.op == "multiply_moving"]
    # back to back: each starts N cycles after the one before, the post notwithstanding
    assert [b.start - a.start for a, b in zip(mm, mm[1:])] == [N] * 3, mm
    post = mm[1]
    assert post.done == post.start + N + pe_latency(SMALL)
    assert post.retire >= post.done
    # it completed before the matmuls after it were done
    assert post.retire < mm[-1].done
    # without the post every matmul retires at its dispatch
    assert all(e.retire < e.done for e in _pe([LOAD] + [_mm(b) for b in range(4)])[1:])


def test_posting_load_waits_for_the_engine_to_drain():
    ev = _pe([LOAD, _mm(0), _mm(1), LOAD + " post=s0+1", _mm(2)])
    mm = [e for e in ev if e.op == "multiply_moving"]
    ld = [e for e in ev if e.op == "load_stationary"][1]
    assert ld.retire >= mm[1].done             # every earlier operation's writes landed
    assert mm[2].start >= mm[1].done           # the next matmul after the drain
