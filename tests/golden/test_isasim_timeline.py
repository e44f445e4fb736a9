# SPDX-License-Identifier: Apache-2.0
"""tb/core/timeline.py: rows in display order, busy fractions (the union of each stream's
intervals, as IsaSim.stats), and a PNG written (matplotlib, Agg)."""

from golden.isasim import Event, IsaSim
from golden.kernels import layer_norm, random_inputs
from tb.core.timeline import busy, rows, write_png
from rtl.config import SMALL


def _ev(stream, start, done, op="x"):
    return Event(stream, 0, op, start, start, done, done)


def test_rows_order_and_busy_union():
    ev = [_ev("dma0.q1", 0, 10), _ev("act", 5, 15), _ev("pe", 0, 10), _ev("pe", 5, 20),
          _ev("dma0.q0", 30, 40), _ev("pe", 30, 35)]
    assert list(rows(ev)) == ["pe", "act", "dma0.q0", "dma0.q1"]
    cyc, f = busy(ev)
    assert cyc == 40
    assert f == {"pe": 25 / 40, "act": 10 / 40, "dma0.q0": 10 / 40, "dma0.q1": 10 / 40}
    assert busy(ev, cycles=80)[1]["pe"] == 25 / 80
    assert busy([]) == (0, {})


def test_png_of_a_kernel_run(tmp_path):
    case = layer_norm(SMALL, *random_inputs(SMALL, "layer_norm", D=16))
    sim = IsaSim(SMALL, dram_bytes=case.kp.dram)
    assert sim.run(case.kp.programs) is None
    path = tmp_path / "sub" / "ln.png"
    cyc, frac = write_png(sim.timeline, str(path), title="layer_norm")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and path.stat().st_size > 5000
    st = sim.stats()
    assert cyc == st["cycles"]
    assert frac == st["busy"]
