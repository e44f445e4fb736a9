# SPDX-License-Identifier: Apache-2.0
"""``tb/core/run_kernel.py``: a kernel file run on golden and on the RTL core with one call
(the tiny kernel of ``tests/run_kernel_tiny.py`` on the regression's core build, shared with
tests/test_core.py), a mismatch reported with its output, index, both values and the command,
bad ``KERNEL`` specs named, the build cache key, and the activity-trace decoding."""

from pathlib import Path

import numpy as np
import pytest

from golden.kernel import Kernel
from tb.core import timeline
from tb.core.build import build_key, integration_cfg, sources_digest
from tb.core.run_kernel import (KernelBuildError, KernelSpecError, build_program, compare_outputs, core_config,
                                format_report, load_kernel, main, rtl_error_text,
                                run_golden_program, run_kernel)

TINY = str(Path(__file__).with_name("run_kernel_tiny.py"))


# ---- bad KERNEL specs (no build, no run) ----------------------------------------------------

def test_spec_missing_file(tmp_path):
    with pytest.raises(KernelSpecError, match=r"KERNEL file '.*nope\.py' does not exist"):
        load_kernel(f"{tmp_path}/nope.py:f")


def test_spec_missing_function():
    with pytest.raises(KernelSpecError, match=r"has no function 'nope' \(its functions: "
                                              r"copy_wrong_shape, gemm_relu, not_a_kernel\)"):
        load_kernel(f"{TINY}:nope")


def test_spec_without_function():
    with pytest.raises(KernelSpecError, match="must be 'path/to/file.py:function'"):
        load_kernel(TINY)


def test_spec_not_a_kernel(cfg):
    fn, name = load_kernel(f"{TINY}:not_a_kernel")
    with pytest.raises(KernelSpecError, match=r"'not_a_kernel' must return a "
                                              r"golden.kernel.Kernel .*not int"):
        build_program(fn, name, cfg)


def test_spec_no_output(cfg):
    def bare(c):
        k = Kernel(c)
        k.dram_tensor("X", (1, 1), "fp32")
        return k
    with pytest.raises(KernelSpecError, match="'bare' marks no output"):
        build_program(bare, "bare", cfg)


def test_kernel_that_does_not_build(cfg, tmp_path):
    """An operation's own check (a matmul of mismatched shapes) stops the run before anything
    runs, naming the kernel and the operation."""
    def bad(c):
        k = Kernel(c)
        a, b = k.sbuf_tile(4, 4, "bf16"), k.sbuf_tile(2, 8, "bf16")
        k.matmul(k.psum_tile(4, 8), a, b)
        return k
    with pytest.raises(KernelBuildError, match=r"kernel 'bad' does not build for .*: matmul #1"):
        run_kernel(bad, cfg, out_dir=tmp_path, quiet=True)
    assert not any(tmp_path.iterdir())


def test_command_exit_status_on_bad_spec(tmp_path, capsys):
    """The command: status 2, the message names the file, nothing runs."""
    assert main([f"{tmp_path}/missing.py:f", "--config", "small"]) == 2
    assert "missing.py" in capsys.readouterr().err


# ---- the core config and the build cache key (no build) ------------------------------------

def test_core_config_shares_the_regression_build(cfg):
    fn, name = load_kernel(f"{TINY}:gemm_relu")
    kp = build_program(fn, name, cfg)
    assert core_config(cfg, kp) == integration_cfg(cfg)


def test_build_key_changes_with_config_options_and_sources(cfg):
    src = sources_digest()
    assert len(src) == 40 and src == sources_digest()
    opts = {"unit": "core", "waves": False}
    k = build_key(cfg, opts, src)
    assert k == build_key(cfg, dict(opts), src)
    assert k != build_key(cfg.replace(semaphores=2 * cfg.semaphores), opts, src)
    assert k != build_key(cfg, {**opts, "waves": True}, src)
    assert k != build_key(cfg, opts, "0" * 40)


def test_sources_digest_sees_an_rtl_edit(tmp_path):
    for rel in ("rtl/a.py", "tb/core/build.py", "tb/runner.py"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("x = 1\n")
    d = sources_digest(tmp_path)
    (tmp_path / "rtl/a.py").write_text("x = 2\n")
    assert sources_digest(tmp_path) != d


# ---- the trace decoding (no build) ---------------------------------------------------------

def test_rtl_timeline_decodes_the_activity_port(cfg):
    """One engine: waits over [2, 5), issues at 5, retires at 9; a second instruction issues at
    9 without waiting and retires at 12; a DMA descriptor on queue 1 moves data over [3, 8)."""
    from rtl.core.neuroncore import activity_layout
    from rtl.isa import ENGINES
    lay = activity_layout(cfg)
    x = ENGINES.index("dve")

    def b(field, i=0):
        return 1 << (lay[field][0] + i)
    w, iss, ret = b("waiting", x), b("issued", x), b("retired", x)
    busy, done = b("dma_busy"), b("dma_done", 1)
    trace = [(2, w), (3, w | busy), (5, iss | busy), (8, iss | done), (9, ret | done), (12, done)]
    tl = timeline.rtl_timeline(trace, 12, lay, ("dve",), 1, cfg.dma_queues)
    assert tl["engines"]["dve"] == {"exec": [(5, 9, 0), (9, 12, 1)], "wait": [(2, 5, 0)]}
    assert tl["dma"] == {"dma0.q1": [(3, 8, 0)]}
    f = timeline.fractions(tl, 12)
    assert f["dve"] == {"executing": 7 / 12, "waiting": 3 / 12}


# ---- golden + RTL (one short Verilator run on the regression's core build) -----------------

@pytest.mark.xdist_group("core")
def test_tiny_kernel_on_golden_and_rtl(cfg, tmp_path_factory):
    out = tmp_path_factory.mktemp("tiny")
    rep = run_kernel(f"{TINY}:gemm_relu", cfg, out_dir=out, quiet=True)
    assert rep.ok, rep
    assert rep.checked == {"Y": cfg.pe_cols * 8}
    assert rep.rtl_cycles > 0 and rep.golden_cycles > 0
    for e in ("pe", "dve", "sp"):
        f = rep.fractions[e]
        assert 0 < f["executing"] <= 1 and 0 <= f["waiting"] <= 1 - f["executing"] + 1e-9
    assert rep.fractions["dve"]["waiting"] > 0      # the vector engine waits for the matmul
    for kind in ("png", "svg", "html"):
        assert Path(rep.files[kind]).stat().st_size > 0
    svg = Path(rep.files["svg"]).read_text()
    assert "multiply_moving (matmul #1)" in svg and "tensor_scalar (tensor_scalar #1)" in svg


@pytest.mark.xdist_group("core")
def test_mismatch_is_reported(cfg, tmp_path):
    """A golden run whose expectation is corrupted (a test double) makes the run fail with the
    output's name, the first differing index, both values and the command."""
    def corrupted(kp, c):
        g = run_golden_program(kp, c)
        y = g["outputs"]["Y"].copy()
        y[1, 2] ^= 1
        g["outputs"]["Y"] = y
        return g
    rep = run_kernel(f"{TINY}:gemm_relu", cfg, out_dir=tmp_path, golden=corrupted, quiet=True)
    assert not rep.ok and len(rep.mismatches) == 1
    m = rep.mismatches[0]
    assert "output Y" in m and "1 element(s) differ, first at [1, 2]" in m
    assert "RTL 0x" in m and "golden 0x" in m
    assert "reproduce: python -m tb.core.run_kernel" in m and "gemm_relu" in m


def test_compare_outputs_names_every_differing_output(cfg):
    """Without the RTL: two outputs, one differs (codes and values both shown)."""
    fn, name = load_kernel(f"{TINY}:gemm_relu")
    kp = build_program(fn, name, cfg)
    want = {"Y": np.zeros((cfg.pe_cols, 8), np.uint32)}
    got = {"Y": want["Y"].copy()}
    got["Y"][3, 4] = 0x3F800000
    (m,) = compare_outputs(kp, cfg, want, got, "CMD")
    assert "first at [3, 4]: RTL 0x3f800000 (1.0), golden 0x0 (0.0); reproduce: CMD" in m
    assert compare_outputs(kp, cfg, want, want, "CMD") == []


@pytest.mark.xdist_group("core")
def test_runtime_error_named_on_golden_and_rtl(cfg, tmp_path):
    """An instruction that fails when it runs: both sides name the error, the engine, the
    queue index and the kernel operation; no output is compared."""
    rep = run_kernel(f"{TINY}:copy_wrong_shape", cfg, out_dir=tmp_path, quiet=True)
    assert not rep.ok and not rep.mismatches and not rep.checked
    assert rep.golden_error.startswith("E_SHAPE on dve instruction 0 (instr #1)")
    assert rep.rtl_error.startswith("E_SHAPE on dve instruction 0 (instr #1)")
    assert "RTL error: E_SHAPE on dve instruction 0 (instr #1)" in format_report(rep)


def test_rtl_error_text_sources(cfg):
    """The RTL's ERR_CODE source field: an engine (with its operation), the DMA, the
    semaphore file."""
    from rtl.core.csr import ERR_SRC_DMA, ERR_SRC_SEM
    from rtl.isa import E_AXI, E_SEM, E_SHAPE, ENGINES
    fn, name = load_kernel(f"{TINY}:gemm_relu")
    kp = build_program(fn, name, cfg)
    pe = ENGINES.index("pe")
    assert rtl_error_text(kp, {"code": E_SHAPE, "source": pe, "pc": 1, "info": 2}) == \
        f"E_SHAPE on pe instruction 1 ({kp.operation('pe', 1)}): info 0x2"
    assert rtl_error_text(kp, {"code": E_AXI, "source": ERR_SRC_DMA, "pc": 0, "info": 5}) \
        .startswith("E_AXI on the DMA")
    assert rtl_error_text(kp, {"code": E_SEM, "source": ERR_SRC_SEM, "pc": 0, "info": 3}) \
        .startswith("E_SEM on the semaphore file (semaphore 3)")


def test_build_reused_only_under_its_key(cfg, tmp_path, monkeypatch):
    """``SimBuild(key=...)``: a finished build of the same key is reused without calling the
    design function; another key clears the stored key and elaborates (here the design
    function raises, standing in for the rebuild), so a stale build is never run."""
    from tb import runner
    monkeypatch.setattr(runner, "BUILD", tmp_path)
    name = "core_cachetest"
    d = runner.build_dir_for(cfg, name)
    d.mkdir(parents=True)
    (d / name).write_text("binary")
    (d / "build_key.txt").write_text("k1")

    def design():
        raise RuntimeError("elaborated")
    sim = runner.SimBuild(design, unit="core", cfg=cfg, name=name, public_depth=1, key="k1")
    assert sim.cached and sim.build_seconds == 0.0
    with pytest.raises(RuntimeError, match="elaborated"):
        runner.SimBuild(design, unit="core", cfg=cfg, name=name, public_depth=1, key="k2")
    assert not (d / "build_key.txt").exists()
    with pytest.raises(RuntimeError, match="elaborated"):     # nor the old key any more
        runner.SimBuild(design, unit="core", cfg=cfg, name=name, public_depth=1, key="k1")
