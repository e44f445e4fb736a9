# SPDX-License-Identifier: Apache-2.0
"""The `make synth` flow: yosys statistics, sky130 area-only Liberty, hierarchical array estimate.

The flow is checked twice: on small *fixture* designs defined here (an integer MAC and an N x N
grid of it built with ``Instance``; test fixtures only, never registered as product blocks), whose
expected figures follow from their construction, and on every block registered in
``synth/blocks.py`` at the small preset.
"""

import csv
import gc
import json

import pytest

from rtl.config import get_preset

pytestmark = pytest.mark.synth

amaranth = pytest.importorskip("amaranth")
from amaranth.hdl import Cat, ClockSignal, Instance, Module, ResetSignal, Signal  # noqa: E402
from amaranth.lib import memory, wiring  # noqa: E402
from amaranth.lib.wiring import In, Out  # noqa: E402

from synth import blocks as registry  # noqa: E402
from synth.cli import derive_estimates, main, plan  # noqa: E402
from synth.blocks import Block  # noqa: E402
from synth.design import Design  # noqa: E402
from synth.estimate import METRICS  # noqa: E402
from synth.flow import Job, run_jobs  # noqa: E402
from synth.liberty import read_lef_area, write_liberty  # noqa: E402
from synth.report import CSV_COLUMNS  # noqa: E402


# --- fixtures: a tiny MAC PE and a grid of it ------------------------------------------------
class FixturePE(wiring.Component):
    """Test fixture: 4x4-bit multiply, 12-bit accumulate; passes ``a`` right and ``b`` down."""
    a_in: In(4)
    b_in: In(4)
    a_out: Out(4)
    b_out: Out(4)
    acc: Out(12)

    def elaborate(self, platform):
        m = Module()
        m.d.sync += [self.a_out.eq(self.a_in), self.b_out.eq(self.b_in),
                     self.acc.eq(self.acc + self.a_in * self.b_in)]
        return m


class FixtureGrid(wiring.Component):
    """Test fixture: N x N FixturePE instances, a skew register triangle on the ``a`` edge and
    registered bottom-row outputs."""

    def __init__(self, n):
        self.n = n
        super().__init__({"a": In(4 * n), "b": In(4 * n), "o": Out(12 * n)})

    def elaborate(self, platform):
        m = Module()
        n = self.n
        a = [[Signal(4, name=f"a_{r}_{c}") for c in range(n + 1)] for r in range(n)]
        b = [[Signal(4, name=f"b_{r}_{c}") for c in range(n)] for r in range(n + 1)]
        accs = []
        for r in range(n):
            x = self.a[4 * r:4 * r + 4]
            for k in range(r):  # skew: row r delayed by r cycles
                d = Signal(4, name=f"skew_{r}_{k}")
                m.d.sync += d.eq(x)
                x = d
            m.d.comb += a[r][0].eq(x)
        for c in range(n):
            m.d.comb += b[0][c].eq(self.b[4 * c:4 * c + 4])
        for r in range(n):
            for c in range(n):
                acc = Signal(12, name=f"acc_{r}_{c}")
                accs.append(acc)
                m.submodules[f"pe_{r}_{c}"] = Instance(
                    "fixture_pe", i_clk=ClockSignal(), i_rst=ResetSignal(),
                    i_a_in=a[r][c], i_b_in=b[r][c], o_a_out=a[r][c + 1], o_b_out=b[r + 1][c],
                    o_acc=acc)
        # registered outputs: the bottom row's accumulators
        m.d.sync += self.o.eq(Cat(*accs[-n:]))
        return m


class FixtureMem(wiring.Component):
    """Test fixture: a 16 x ``width`` memory with a registered read port (16 x ``width``
    memory bits); with ``lanes`` > 1 its write port has that many lane enables
    (``granularity = width // lanes``, as the SBUF's byte lanes)."""

    def __init__(self, width=8, lanes=1):
        self.width, self.lanes = width, lanes
        super().__init__({"addr": In(4), "data": In(width), "we": In(lanes), "q": Out(width)})

    def elaborate(self, platform):
        m = Module()
        m.submodules.mem = mem = memory.Memory(shape=self.width, depth=16, init=[])
        wp = mem.write_port(granularity=self.width // self.lanes) if self.lanes > 1 \
            else mem.write_port()
        rp = mem.read_port()
        m.d.comb += [wp.addr.eq(self.addr), wp.data.eq(self.data), wp.en.eq(self.we),
                     rp.addr.eq(self.addr), self.q.eq(rp.data)]
        return m


def _build_grid(cfg, variant):
    return Design(top=FixtureGrid(cfg.pe_rows), modules={"fixture_pe": FixturePE()})


FIX_PE = Block(name="fixture_pe", module="tests.test_synth", build=lambda c, v: FixturePE())
FIX_MEM = Block(name="fixture_mem", module="tests.test_synth", build=lambda c, v: FixtureMem())
FIX_BE_V = Block(name="fixture_mem_be", module="tests.test_synth",
                 build=lambda c, v: FixtureMem(32, lanes=4))
FIX_BE_IL = Block(name="fixture_mem_be_il", module="tests.test_synth",
                  build=lambda c, v: FixtureMem(32, lanes=4), rtlil=True)
FIX_GRID = Block(name="fixture_grid", module="tests.test_synth", build=_build_grid, array=True,
                 pe_module="fixture_pe")


@pytest.fixture(scope="module")
def small():
    return get_preset("small")


@pytest.fixture(scope="module")
def outdir(tmp_path_factory):
    return tmp_path_factory.mktemp("synth")


# --- Liberty ---------------------------------------------------------------------------------
def test_area_only_liberty_areas_come_from_the_lefs(tmp_path):
    areas = write_liberty(tmp_path / "hd.lib")
    # sky130_fd_sc_hd rows are 2.72 um high; nand2_1 is 1.38 um wide, dfxtp_1 7.36 um.
    assert areas["nand2_1"] == pytest.approx(1.38 * 2.72)
    assert areas["dfxtp_1"] == pytest.approx(7.36 * 2.72)
    assert read_lef_area("xor2_1") > read_lef_area("nand2_1")
    text = (tmp_path / "hd.lib").read_text()
    assert "NO TIMING" in text and "cell_rise" not in text


# --- the flow on fixtures ----------------------------------------------------------------------
@pytest.fixture(scope="module")
def fixture_results(small, outdir):
    from synth.cli import array_cfg
    jobs = [Job(FIX_PE, None, small, fmax=True), Job(FIX_MEM, None, small),
            Job(FIX_BE_V, None, small), Job(FIX_BE_IL, None, small)]
    jobs += [Job(FIX_GRID, None, array_cfg(small, n), extra={"format_cfg": "small", "n": n})
             for n in (2, 4, 8, 16)]
    res = run_jobs(jobs, outdir, processes=2, progress=None)
    for r in res:
        assert "error" not in r, r.get("traceback")
    return {(r["row"], r.get("n")): r for r in res}


def test_fixture_pe_counts(fixture_results):
    pe = fixture_results[("fixture_pe", None)]
    # 4 + 4 + 12 register bits; a 4x4 multiplier and a 12-bit adder need gates.
    assert pe["flip_flops"] == 20
    assert pe["cells"] > pe["flip_flops"]
    assert pe["transistors"] == 4 * pe["nand2_equiv"]
    assert pe["transistors"] >= 16 * pe["flip_flops"] + 4 * (pe["cells"] - pe["flip_flops"])
    assert pe["um2_sky130"] >= 20 * read_lef_area("dfxtp_1")
    # our per-cell sum of the Liberty areas agrees with yosys' own `stat -liberty` total
    assert pe["um2_sky130"] == pytest.approx(pe["yosys_area"], abs=0.1)
    assert pe["ecp5_luts"] > 0 and pe["memory_bits"] == 0
    assert pe["fmax_mhz"] is not None and 20 < pe["fmax_mhz"] < 1000, pe.get("fmax_note")


def test_memory_bits_stay_out_of_the_gate_count(fixture_results):
    mem = fixture_results[("fixture_mem", None)]
    assert mem["memory_bits"] == 16 * 8
    # the 128 bits are not flip-flops: only the address/data logic is left as gates
    assert mem["flip_flops"] < 16 * 8
    assert mem["sram_um2"] > 0


def test_rtlil_blocks_are_read_as_rtlil(fixture_results, outdir):
    """A block with ``rtlil=True`` reaches yosys as Amaranth's RTLIL (``design.il``); the
    byte-enabled memory is memory bits either way, not flip-flops."""
    v, il = fixture_results[("fixture_mem_be", None)], fixture_results[("fixture_mem_be_il", None)]
    assert v["memory_bits"] == il["memory_bits"] == 16 * 32
    assert il["flip_flops"] < 16 * 32 and v["flip_flops"] < 16 * 32
    work = outdir / "work" / "small"
    assert (work / "fixture_mem_be_il" / "design.il").exists()
    assert not (work / "fixture_mem_be_il" / "design.v").exists()
    assert "read_rtlil design.il" in (work / "fixture_mem_be_il" / "asic.ys").read_text()
    assert (work / "fixture_mem_be" / "design.v").exists()


def test_grid_hierarchy_counts_pe_once_per_instance(fixture_results):
    pe = fixture_results[("fixture_pe", None)]
    for n in (2, 4, 8):
        g = fixture_results[("fixture_grid", n)]
        m = g["modules"]["fixture_pe"]
        assert m["count"] == n * n
        assert m["tree"]["cells"] == pe["cells"]
        assert m["tree"]["transistors"] == pe["transistors"]
        # the liberty mapping of the same module may differ by a few cells between runs
        assert m["tree"]["um2_sky130"] == pytest.approx(pe["um2_sky130"], rel=0.03)
        # skew triangle n(n-1)/2 * 4 bits + n 12-bit output registers, outside the PEs
        assert g["flip_flops"] == n * n * pe["flip_flops"] + 4 * n * (n - 1) // 2 + 12 * n


def test_area_grows_with_size_and_estimate_within_5_percent(fixture_results, small):
    sizes = (2, 4, 8, 16)
    grids = {n: fixture_results[("fixture_grid", n)] for n in sizes}
    for metric in ("cells", "transistors", "um2_sky130", "ecp5_luts"):
        vals = [grids[n][metric] for n in sizes]
        assert vals == sorted(set(vals)), (metric, vals)
        # N^2 PEs dominate: quadrupling the PE count at least triples the area
        assert vals[3] > 3 * vals[2] and vals[2] > 3 * vals[1], (metric, vals)
    est = [{"block": FIX_GRID, "variant": None, "fc": small, "sizes": sizes,
            "targets": (32, 64), "in_preset": False}]
    rows, checks = derive_estimates(list(grids.values()), est)
    (chk,) = checks
    assert chk["n"] == 16
    for metric, (e, s, rel) in chk["metrics"].items():
        if metric != "memory_bits":
            assert rel < 0.05, (metric, e, s)
    by_n = {r["n"]: r for r in rows}
    for metric in METRICS:
        if metric != "memory_bits":
            assert grids[16][metric] < by_n[32][metric] < by_n[64][metric]
            # 4x the PEs, and the fitted edge grows no faster than the PE count
            assert 3.5 < by_n[32][metric] / grids[16][metric] < 4.5, metric


# --- registered blocks at the small preset -----------------------------------------------------
def test_cli_writes_csv_markdown_and_plots(outdir):
    """Fast tier: the real CLI on one real registered block (the FP32 adder) at the small preset."""
    assert registry.is_available(registry.get_block("fp32_adder"))
    rc = main(["--config", "small", "--no-fmax", "--blocks", "fp32_adder", "--out", str(outdir)])
    assert rc == 0
    with open(outdir / "area.csv") as f:
        rows = list(csv.DictReader(f))
    assert tuple(rows[0].keys()) == CSV_COLUMNS
    assert [r["block"] for r in rows] == ["fp32_adder"] and rows[0]["preset"] == "small"
    r = rows[0]
    assert int(r["cells"]) > 0 and int(r["transistors"]) > 0 and float(r["um2_sky130"]) > 0
    assert int(r["ecp5_luts"]) > 0 and r["fmax_mhz"] == "n/a" and r["memory_bits"] == "0"
    assert float(r["nand2_equiv"]) == int(r["transistors"]) / 4
    assert (outdir / "area.md").read_text().startswith("# Synthesis report")
    assert (outdir / "area_breakdown.png").stat().st_size > 1000
    meta = json.loads((outdir / "area_full.json").read_text())["meta"]
    assert meta["preset"] == "small"


def test_whole_engine_beyond_direct_limit_is_named_not_synthesized():
    """The Trainium preset's engine (16,384 PEs) is not handed to yosys; the report says why,
    while its array is still synthesized at the direct sizes and estimated at 128 x 128."""
    from rtl.config import get_preset
    trn = get_preset("trainium")
    blocks = [registry.get_block("tensor_engine"), registry.get_block("tensor_array")]
    jobs, est, skipped = plan(trn, blocks, fmax=False, sweep=False)
    assert not [j for j in jobs if j.block.name == "tensor_engine"]
    assert len(skipped) == 1 and "tensor_engine" in skipped[0] and "128 x 128" in skipped[0]
    assert {j.extra["n"] for j in jobs if j.block.name == "tensor_array"} == {2, 4, 8, 16}
    assert est and 128 in est[0]["targets"]


def test_default_run_schedule_and_place_and_route():
    """The default ``make synth``: the array and then the PE's place and route start first
    (the longest jobs), and the blocks with ``default_pnr = False`` are synthesized but not
    placed and routed, unless named with ``--blocks``."""
    from rtl.config import get_preset
    cfg = get_preset("default")
    blocks = [b for b in registry.BLOCKS if b.default]
    jobs, _, _ = plan(cfg, blocks, fmax=True, sweep=False, default_run=True)
    assert [j.row for j in jobs[:2]] == ["tensor_array", "tensor_pe"] and jobs[1].fmax
    off = {b.name for b in blocks if not b.default_pnr}
    assert off and not [j for j in jobs if j.block.name in off and j.fmax]
    named, _, _ = plan(cfg, [registry.get_block(n) for n in sorted(off)], fmax=True, sweep=False)
    assert all(j.fmax for j in named)


@pytest.mark.full
@pytest.mark.timeout(3 * 3600)  # every block at small: the scalar engine alone took 18 min
def test_every_registered_block_reports_nonzero_cells(small, outdir):
    avail, missing = registry.available_blocks()
    assert avail, f"no registered block is available yet (missing: {[b.name for b in missing]})"
    jobs, est, skipped = plan(small, avail, fmax=False, sweep=False)
    assert not skipped, skipped
    res = run_jobs(jobs, outdir, processes=2, progress=None)
    for r in res:
        assert "error" not in r, r.get("traceback")
        assert r["cells"] > 0 and r["transistors"] > 0 and r["um2_sky130"] > 0, r["row"]
        assert r["ecp5_luts"] > 0, r["row"]
    # every job planned gave its row (a default run: a block's default variants only, e.g.
    # the MAC's "all"), and every available block has one
    names = {r["row"] for r in res}
    assert {j.row for j in jobs} <= names, sorted({j.row for j in jobs} - names)
    assert {b.name for b in avail} <= {r["block"] for r in res}


@pytest.mark.full
def test_tensor_array_estimate_within_5_percent(small, outdir):
    """The real array (BF16-only small config to keep the PE small): synthesized at 2, 4, 8, 16;
    area grows as N^2 PEs + fitted edge; the estimate of 16 from 2, 4, 8 is within 5 %."""
    from synth.cli import array_cfg
    b = registry.get_block("tensor_array")
    assert registry.is_available(b)
    fc = small.replace(name="small_bf16", formats=("bf16",), mx_formats=())
    sizes = (2, 4, 8, 16)
    jobs = [Job(b, None, array_cfg(fc, n), extra={"format_cfg": fc.name, "n": n}) for n in sizes]
    res = run_jobs(jobs, outdir, processes=2, progress=None)
    for r in res:
        assert "error" not in r, r.get("traceback")
    grids = {r["n"]: r for r in res}
    for metric in ("cells", "flip_flops", "transistors", "um2_sky130", "ecp5_luts"):
        vals = [grids[n][metric] for n in sizes]
        assert vals == sorted(set(vals)), (metric, vals)
        assert vals[3] > 3 * vals[2] and vals[2] > 3 * vals[1], (metric, vals)
    est = [{"block": b, "variant": None, "fc": fc, "sizes": sizes, "targets": (32,),
            "in_preset": False}]
    rows, (chk,) = derive_estimates(res, est)
    assert chk["n"] == 16
    for metric, (e, s, rel) in chk["metrics"].items():
        if metric != "memory_bits":
            assert rel < 0.05, (metric, e, s)


def test_update_readme_replaces_only_the_marked_table(tmp_path):
    from synth.report import README_BEGIN, README_END, update_readme
    row = {"row": "mac_bf16", "preset": "small", "cells": 10, "flip_flops": 2, "transistors": 80,
           "nand2_equiv": 20.0, "um2_sky130": 50.0, "ecp5_luts": 5, "ecp5_mult18": 0,
           "fmax_mhz": None, "memory_bits": 0}
    p = tmp_path / "README.md"
    p.write_text("intro\n")
    assert not update_readme(p, [row], "small") and p.read_text() == "intro\n"
    p.write_text(f"intro\n{README_BEGIN}\nold table\n{README_END}\noutro\n")
    assert update_readme(p, [row], "small")
    text = p.read_text()
    assert text.startswith("intro\n") and text.endswith(f"{README_END}\noutro\n")
    assert "old table" not in text and "| mac_bf16 | small | 10 | 2 | 80 | 20 |" in text


def test_pe_mode_set_configs():
    """``python -m synth.pe_settings --mode-sets`` synthesizes four distinct PEs of the preset:
    packed modes and sparsity each on and off, at the preset's own depths."""
    from rtl.config import get_preset
    from rtl.tensor.layouts import TensorLayouts
    from synth.pe_settings import MODE_SETS, mode_set_configs
    cfg = get_preset("default")
    cfgs = mode_set_configs(cfg)
    assert len({c.name for c in cfgs}) == len(cfgs) == len(MODE_SETS)
    for (_, packed, sparse), c in zip(MODE_SETS, cfgs):
        tl = TensorLayouts(c)
        assert (bool(tl.packed), bool(tl.sparse)) == (packed, sparse), c.name
        assert (c.mul_stages, c.add_stages, c.fp32_passes) == (cfg.mul_stages, cfg.add_stages,
                                                               cfg.fp32_passes)


# --- the whole-core report (synth/core.py) -----------------------------------------------------
def test_glue_run_counts_the_top_only_and_flat_run_matches(small, outdir):
    """A ``glue`` block synthesizes the top's own logic (the PEs are blackboxes: only the skew
    and output registers are left); a ``flatten`` block gives the whole grid in one module."""
    import dataclasses
    glue = dataclasses.replace(FIX_GRID, name="fixture_grid_glue", array=False, glue=True)
    flat = dataclasses.replace(FIX_GRID, name="fixture_grid_flat", array=False, flatten=True)
    c = small.replace(name="small_2x2", partitions=2, pe_rows=2, pe_cols=2)
    res = run_jobs([Job(b, None, c, ecp5=False) for b in (glue, flat)], outdir,
                   processes=1, progress=None)
    for r in res:
        assert "error" not in r, r.get("traceback")
    g, f = res
    assert g["flip_flops"] == 4 * 1 + 12 * 2            # skew triangle + 2 output registers
    assert g["modules"]["fixture_grid_glue"]["count"] == 1 and "fixture_pe" not in g["modules"]
    # flattened, registers whose outputs nothing reads go (4 PEs of at most 20 FFs each, of
    # which at least the 12 accumulator bits are read)
    assert g["flip_flops"] + 4 * 4 <= f["flip_flops"] <= g["flip_flops"] + 4 * 20
    assert f["ecp5_luts"] is None and "ecp5_error" not in f     # ASIC figures only
    assert set(f["modules"]) == {"fixture_grid_flat"}


# the top is elaborated one level only: its engines are built, never elaborated
@pytest.mark.filterwarnings("ignore::amaranth.hdl.UnusedElaboratable")
def test_core_parts_cover_every_submodule_of_the_top(small):
    """Every submodule of the NeuronCore top has a part in the whole-core report (a new engine
    in the top fails here until ``synth.core`` reports it), and the parts are built as the top
    builds them: the SBUF with the top's row and DMA ports, one sequencer per engine."""
    from rtl.core.neuroncore import ENGINES_BUILT, NeuronCore
    from synth import core
    for cfg in (small, small.replace(name="small_ring1", ring_size=1)):
        subs = NeuronCore(cfg).elaborate(None)._named_submodules
        parts = {name: core.top_part(name) for name in subs}
        used = {p for p in core.PARTS if core.PARTS[p].count(cfg)} - {"glue"}
        assert set(parts.values()) == used, (sorted(set(parts.values()) ^ used))
        top_sbuf = subs["sbuf"][0].signature
        ours = core.PARTS["sbuf"].block.build(cfg, None).signature
        assert (ours.row_ports, ours.part_ports) == (top_sbuf.row_ports, top_sbuf.part_ports)
        assert core.PARTS["sequencer"].count(cfg) == len(ENGINES_BUILT) == \
            sum(n.startswith("seq_") for n in subs)
        assert core.PARTS["dma"].count(cfg) == sum(n.startswith("dma") for n in subs)
        assert core.PARTS["link"].count(cfg) == ("link_tx" in subs) == ("link_rx" in subs)
    with pytest.raises(KeyError, match="no part"):
        core.top_part("permute")
    del subs, top_sbuf, ours
    gc.collect()    # their warnings while this test's filter holds


def test_cache_key_covers_the_factory_file_not_the_report_code():
    """A part's first cache key hashes ``rtl/``, the flow's files and the file of its factory:
    the core parts' is ``synth/core_parts.py``, a registry block's ``synth/blocks.py``; the
    report code (``synth/core.py``, ``cli.py``, ``report.py``) is in none of them."""
    import hashlib
    from pathlib import Path
    from synth import core, flow
    root = Path(flow.__file__).parent
    h = {f: hashlib.sha256((root / f).read_bytes()).hexdigest()[:16]
         for f in ("core_parts.py", "blocks.py")}
    assert flow.job_source_hash(core.PARTS["tensor"].block) == h["core_parts.py"]
    assert flow.job_source_hash(core.FLAT) == h["core_parts.py"]
    assert flow.job_source_hash(registry.get_block("mac")) == h["blocks.py"]
    assert not {"core.py", "cli.py", "report.py"} & set(flow.FLOW_FILES)


def _fake(part, row, um2, bits=0, modules=None):
    return {"core_part": part, "row": row, "um2_sky130": um2, "memory_bits": bits, "cells": 10,
            "flip_flops": 2, "modules": modules or {}}


def test_core_table_sums_parts_times_counts(small, tmp_path):
    """The table from given part results: counts multiply, subtrees split the tensor part,
    memories are costed as SRAM macros, shares add to 1, the flat run gives the error."""
    from synth import core
    from synth.flow import SRAM_UM2_PER_BIT
    jobs = core.core_jobs(small, flat=True)
    parts = [j.extra["core_part"] for j in jobs]
    assert parts[0] == "flat" and set(parts) == set(core.PARTS) | {"flat"}
    assert all(not j.ecp5 and not j.fmax for j in jobs)
    assert core.PARTS["dma"].count(small) == small.dma_engines
    assert core.PARTS["link"].count(small.replace(ring_size=1)) == 0

    def sub(um2, bits=0):
        return {"count": 1, "tree": {"um2_sky130": um2, "memory_bits": bits, "cells": 1,
                                      "flip_flops": 1}}
    res = [_fake("tensor", "core_tensor", 1000.0, 64,
                 {"core_tensor.engine.array": sub(600.0), "core_tensor.engine.psum": sub(100.0, 64)}),
           _fake("dma", "core_dma", 50.0), _fake("sbuf", "core_sbuf", 20.0, 1024),
           _fake("link", "core_link_tx", 7.0), _fake("link", "core_link_rx", 5.0)]
    res += [_fake(p, f"core_{p}", 1.0) for p in core.PARTS if p not in ("tensor", "dma", "sbuf",
                                                                        "link")]
    rows, s = core.core_table(small, res)
    by = {r["key"]: r for r in rows}
    assert by["tensor_array"]["logic_um2"] == 600.0
    assert by["tensor_ctl"]["logic_um2"] == 300.0 and by["tensor_ctl"]["sram_bits"] == 0
    assert by["psum"]["um2"] == pytest.approx(100.0 + 64 * SRAM_UM2_PER_BIT)
    assert by["dma"]["logic_um2"] == 50.0 * small.dma_engines
    from rtl.core.neuroncore import ENGINES_BUILT
    assert by["sequencers"]["logic_um2"] == float(len(ENGINES_BUILT))
    assert by["interconnect"]["logic_um2"] == 2.0
    assert by["link_ports"]["logic_um2"] == 12.0 and by["link_ports"]["in_core"]
    assert by["sequencers"]["label"] == f"sequencers ({', '.join(ENGINES_BUILT)})"
    assert s["sram_bits"] == 64 + 1024
    assert s["core_um2"] == pytest.approx(sum(r["um2"] for r in rows if r["in_core"]))
    assert sum(r["share"] for r in rows if r["in_core"]) == pytest.approx(1.0)
    assert "estimate_error" not in s
    rows, s = core.core_table(small, res + [_fake("flat", "core_flat", s["logic_um2"] * 1.02,
                                                  s["sram_bits"])])
    assert s["estimate_error_logic"] == pytest.approx(1 - 1 / 1.02)
    md, s = core.write_core_report(small, res, tmp_path / "small", tmp_path / "core_area.json")
    for f in ("core_area.md", "core_area.json", "core_area.png", "core_area.svg"):
        assert (tmp_path / "small" / f).stat().st_size > 0, f
    idx = json.loads((tmp_path / "core_area.json").read_text())["small"]
    assert idx["core_um2"] == pytest.approx(s["core_um2"]) and "dma_um2" in idx
    assert "**core**" in md and "estimate (leaf × count)" in md


@pytest.mark.full
@pytest.mark.timeout(3 * 3600)
def test_whole_core_estimate_within_3_percent_of_flat(small, outdir):
    """The whole-core report on small, and the core synthesized flat in one run: the sum of the
    parts is within 3 % of the flat core (logic and total with SRAM macros)."""
    from synth.cli import core_report
    assert core_report(small, outdir, outdir / "small", flat=True) == 0
    s = json.loads((outdir / "small" / "core_area.json").read_text())
    print(f"estimate error: {100 * s['estimate_error']:.2f} % (logic "
          f"{100 * s['estimate_error_logic']:.2f} %)")
    assert s["estimate_error"] < 0.03 and s["estimate_error_logic"] < 0.03
    assert s["core_um2"] > 0 and s["sram_bits"] >= small.sbuf_bits + small.psum_bits


def test_scaled_core_from_two_reference_configs():
    """Trainium scale: rows linear in P through the P = 8 and 16 references, the array as
    rows x cols x PE + a fitted edge, SBUF/PSUM bits of the config."""
    from rtl.tensor.array import pe_module_name
    from synth import core
    trn = get_preset("trainium")
    assert core.needs_scaling(trn) and not core.needs_scaling(get_preset("default"))
    refs = core.scaled_refs(trn)
    assert [c.partitions for c in refs] == [8, 16] and refs[1] is get_preset("default")
    assert refs[0].name == "default__partitions_8__pe_cols_8__pe_rows_8"

    def results(c, pe, edge, per_p):
        n = c.pe_rows
        sub = {"count": 1, "tree": {"um2_sky130": n * n * pe + edge, "memory_bits": 0,
                                     "cells": 1, "flip_flops": 1}}
        psum = {"count": 1, "tree": {"um2_sky130": 10.0 * n, "memory_bits": c.psum_bits,
                                      "cells": 1, "flip_flops": 1}}
        pem = {"count": n * n, "tree": {"um2_sky130": pe, "cells": 1, "flip_flops": 1}}
        t = _fake("tensor", "core_tensor", n * n * pe + edge + 10.0 * n + 5.0, c.psum_bits,
                  {"core_tensor.engine.array": sub, "core_tensor.engine.psum": psum,
                   pe_module_name(c): pem})
        return [t, _fake("sbuf", "core_sbuf", 3.0 * n, c.sbuf_bits)] + [
            _fake(p, f"core_{p}", per_p * n + 1.0) for p in core.PARTS
            if p not in ("tensor", "sbuf")]
    res = [results(refs[0], 100.0, 8 * 8 + 64 / 2, 2.0),
           results(refs[1], 100.0, 16 * 8 + 256 / 2, 2.0)]
    rows, s = core.scaled_table(trn, refs, res)
    by = {r["key"]: r for r in rows}
    assert by["tensor_array"]["logic_um2"] == pytest.approx(128 * 128 * 100.0 + 128 * 8
                                                            + 128 * 128 / 2)
    assert by["psum"]["logic_um2"] == pytest.approx(1280.0)
    assert by["psum"]["sram_bits"] == trn.psum_bits and by["sbuf"]["sram_bits"] == trn.sbuf_bits
    assert by["sbuf"]["logic_um2"] == pytest.approx(3.0 * 128)
    assert by["vector"]["logic_um2"] == pytest.approx(2.0 * 128 + 1.0)
    assert by["tensor_ctl"]["logic_um2"] == pytest.approx(5.0)
    assert s["core_um2"] == pytest.approx(sum(r["um2"] for r in rows if r["in_core"]))
