# SPDX-License-Identifier: Apache-2.0
"""Build-time checks of the kernel API (golden/kernel/checks.py): each bad kernel raises when
the operation is recorded, naming the operation (``tensor_tensor #2``), the operand and the
rule, and records no instruction; run-time errors name the error, engine, index and
operation."""

import re

import pytest

from golden.isasim import IsaSim
from golden.kernel import Kernel
from rtl.config import SMALL

P = SMALL.partitions


def _refused(k, exc, pattern, call):
    """``call()`` raises ``exc`` matching ``pattern`` and records no instruction."""
    before = k.emitted()
    with pytest.raises(exc, match=pattern):
        call()
    assert k.emitted() == before


def test_vector_shape_mismatch_names_operation_and_operand():
    k = Kernel(SMALL, dram_bytes=1 << 16)
    a, b, c = k.sbuf_tile(P, 8, "fp32"), k.sbuf_tile(P, 6, "fp32", "b6"), k.sbuf_tile(P, 8, "fp32")
    k.tensor_tensor(c, a, a, "add")
    _refused(k, ValueError, r"^tensor_tensor #2: b b6 \[4 x 6\] must have dst .*'s shape "
                            r"\[4 x 8\] \(the engine's operands share partitions and elements\)",
             lambda: k.tensor_tensor(c, a, b, "mult"))
    _refused(k, ValueError, r"^copy #1: src b6 \[4 x 6\] must have dst",
             lambda: k.copy(c, b))
    _refused(k, ValueError, r"^activation #1: src b6 \[4 x 6\] must have dst",
             lambda: k.activation(c, b, "exp"))
    _refused(k, ValueError, r"^tensor_reduce #1: dst .* must have 1 element per partition",
             lambda: k.tensor_reduce(c, a))
    _refused(k, ValueError, r"^select #1: on_true .* must have dst",
             lambda: k.select(c, a, b))


def test_format_not_enabled_is_a_build_error():
    cfg = SMALL.replace(name="small_bf16", formats=("bf16",), mx_formats=())
    k = Kernel(cfg, dram_bytes=1 << 16)
    h, b = k.sbuf_tile(P, 8, "fp16", "h"), k.sbuf_tile(P, 8, "bf16", "x")
    _refused(k, ValueError, r"^copy #1: src h format 'fp16' is not enabled by config "
                            r"'small_bf16': the vector engine takes \('fp32', 'bf16'\)",
             lambda: k.copy(b, h))
    _refused(k, ValueError, r"^memset #1: dst h format 'fp16' is not enabled",
             lambda: k.memset(h, 1.0))
    _refused(k, ValueError, r"^activation #1: dst h format 'fp16' is not enabled by config "
                            r"'small_bf16': the scalar engine",
             lambda: k.activation(h, b, "exp"))
    w = k.sbuf_tile(P, P, "fp16", "w")
    out = k.psum_tile(P, 8)
    _refused(k, ValueError, r"^matmul #1: stationary w format 'fp16' is not enabled by config "
                            r"'small_bf16': the tensor engine takes \('bf16',\)",
             lambda: k.matmul(out, w, b))
    _refused(k, ValueError, r"^transpose #1: stationary w format 'fp16' is not enabled",
             lambda: k.transpose(k.psum_tile(P, P), w))


def test_forbidden_format_pair():
    k = Kernel(SMALL, dram_bytes=1 << 16)
    w, x = k.sbuf_tile(P, P, "fp32", "w"), k.sbuf_tile(P, 8, "bf16", "x")
    _refused(k, ValueError, r"^matmul #1: stationary w \(fp32\) and moving x \(bf16\) are a "
                            r"forbidden format pair: fp32/tf32 pair only with fp32/tf32",
             lambda: k.matmul(k.psum_tile(P, 8), w, x))


def test_sparse_pattern_the_config_lacks():
    cfg = SMALL.replace(name="small_dense", sparse_patterns=())
    k = Kernel(cfg, dram_bytes=1 << 16)
    w, x = k.sbuf_tile(P, P, "fp32", "w"), k.sbuf_tile(P, 8, "fp32", "x")
    _refused(k, ValueError, r"^sparse_matmul #1: pattern must be one of the enabled patterns "
                            r"\(\) \(cfg 'small_dense'\), not '2:4'",
             lambda: k.sparse_matmul(k.psum_tile(P, 8), w, x, "2:4", "bf16", "bf16"))


def test_table_that_does_not_fit_sbuf_is_named():
    k = Kernel(SMALL, dram_bytes=1 << 16)
    big = k.sbuf_tile(P, (SMALL.sbuf_bytes_per_partition - 128) // 4, "fp32", "big")
    x = big.view(0, 8)
    _refused(k, ValueError, r"^activation #1: sbuf_tile 'table_exp' of 57 fp32 \(\d+ bytes per "
                            r"partition\) does not fit the SBUF: \d+ of 4096 bytes per "
                            r"partition in use, the largest free run \d+ bytes \(tiles that "
                            r"fit a bank are spread over the 4 banks: allocate the big ones "
                            r"first\): the exp activation table loads through a "
                            r"temporary SBUF tile of 57 words per partition \(call "
                            r"load_table\('exp'\) before allocating the big tiles\)",
             lambda: k.activation(x, x, "exp"))


def test_sbuf_fragmented_by_small_tiles():
    """Small tiles spread over the banks leave no run long enough for a big one: the message
    gives the largest free run and the way out."""
    k = Kernel(SMALL, dram_bytes=1 << 16)
    k.sbuf_tile(P, 8, "bf16", "s0")
    k.sbuf_tile(P, 8, "bf16", "s1")
    bank = SMALL.sbuf_bytes_per_partition // SMALL.sbuf_banks
    free = SMALL.sbuf_bytes_per_partition - bank - 16
    with pytest.raises(ValueError, match=rf"^sbuf_tile 'big' of {(free + 16) // 4} fp32 .* 32 "
                                         rf"of {SMALL.sbuf_bytes_per_partition} bytes per "
                                         rf"partition in use, the largest free run {free} "
                                         rf"bytes .*allocate the big ones first\)$"):
        k.sbuf_tile(P, (free + 16) // 4, "fp32", "big")
    assert k.sbuf_tile(P, free // 4, "fp32", "fits").elems == free // 4


def test_psum_capacity():
    k = Kernel(SMALL, dram_bytes=1 << 16)
    n = SMALL.psum_bank_fp32 + 1
    with pytest.raises(ValueError, match=rf"^psum_tile 'acc' n must be in \[1, "
                                         rf"{SMALL.psum_bank_fp32}\] \(psum_bank_fp32: FP32 "
                                         rf"entries of a bank\), not {n}$"):
        k.psum_tile(P, n, name="acc")
    with pytest.raises(ValueError, match=rf"^psum_tile bank must be in \[0, "
                                         rf"{SMALL.psum_banks - 1}\] \(psum_banks - 1\)"):
        k.psum_tile(P, 8, bank=SMALL.psum_banks)
    with pytest.raises(ValueError, match=r"^psum_tile parts must be in \[1, 4\] \(partitions\)"):
        k.psum_tile(P + 1, 8)
    assert k.emitted() == {e: 0 for e in k.emitted()}


def test_stationary_wider_than_the_array():
    """The stationary's M (elements) must fit pe_cols: matmul, transpose, sparse weights."""
    k = Kernel(SMALL, dram_bytes=1 << 16)
    C = SMALL.pe_cols
    w = k.sbuf_tile(P, 2 * C, "bf16", "wide")
    x = k.sbuf_tile(P, 8, "bf16", "x")
    rule = rf"has M = {2 * C} elements per partition: the stationary's M must be <= pe_cols = {C}"
    _refused(k, ValueError, rf"^matmul #1: stationary wide {rule}",
             lambda: k.matmul(k.psum_tile(P, 8), w, x))
    _refused(k, ValueError, rf"^transpose #1: stationary wide {rule}",
             lambda: k.transpose(k.psum_tile(P, P), w))
    wp = k.sbuf_tile(P, 2 * C, "fp32", "wpairs")
    xl = k.sbuf_tile(P, 8, "fp32", "lanes")
    _refused(k, ValueError, rf"^sparse_matmul #1: weights wpairs has M = {2 * C}",
             lambda: k.sparse_matmul(k.psum_tile(P, 8), wp, xl, "2:4", "bf16", "bf16"))


def test_sparse_formats():
    """sparse_matmul: 8/16-bit weight formats of the config; moving formats whose m/n
    elements share a 32-bit lane."""
    k = Kernel(SMALL, dram_bytes=1 << 16)
    wp, xl = k.sbuf_tile(P, 4, "fp32", "wpairs"), k.sbuf_tile(P, 8, "fp32", "lanes")
    _refused(k, ValueError, r"^sparse_matmul #1: sparse_matmul w_fmt must be an 8- or 16-bit "
                            r"format of the config and weights a tile of twice its bytes, not "
                            r"'fp32', fp32",
             lambda: k.sparse_matmul(k.psum_tile(P, 8), wp, xl, "2:4", "fp32", "bf16"))
    _refused(k, ValueError, r"^sparse_matmul #2: sparse_matmul x_fmt must be one of \(.*\) and "
                            r"moving a 4-byte tile, not 'fp32', fp32",
             lambda: k.sparse_matmul(k.psum_tile(P, 8), wp, xl, "2:4", "bf16", "fp32"))


def test_reduction_the_engine_has():
    k = Kernel(SMALL, dram_bytes=1 << 16)
    a, d = k.sbuf_tile(P, 8, "fp32", "a"), k.sbuf_tile(P, 1, "fp32", "d")
    _refused(k, ValueError, r"^tensor_reduce #1: op must be one of \['add', 'max', 'min'\] "
                            r"\(the reductions tensor_reduce has\), not 'multiply'",
             lambda: k.tensor_reduce(d, a, "multiply"))


def test_operand_without_an_ap_slot():
    """tensor_reduce has no src1 AP slot (rtl.isa): a tile pre_operand is refused when recorded,
    not when the program is encoded."""
    k = Kernel(SMALL, dram_bytes=1 << 16)
    a, d = k.sbuf_tile(P, 8, "fp32", "a"), k.sbuf_tile(P, 1, "fp32", "d")
    col = k.sbuf_tile(P, 1, "fp32", "col")
    _refused(k, ValueError, r"^tensor_reduce #1: pre_operand col must be a number, not a tile: "
                            r"tensor_reduce has no ap2 operand slot \(its APs are "
                            r"\['ap0', 'ap1'\]\)",
             lambda: k.tensor_reduce(d, a, "max", pre_op="multiply", pre_operand=col))
    k.tensor_reduce(d, a, "max", pre_op="multiply", pre_operand=2.0)
    k.build()


def test_per_partition_operand_partitions():
    k = Kernel(SMALL, dram_bytes=1 << 16)
    a, c = k.sbuf_tile(P, 8, "fp32", "a"), k.sbuf_tile(P, 8, "fp32", "c")
    col = k.sbuf_tile(P - 1, 1, "fp32", "col")
    _refused(k, ValueError, rf"^tensor_scalar #1: operand col has {P - 1} partitions, src a "
                            rf"{P}: they must be equal",
             lambda: k.tensor_scalar(c, a, "multiply", col))
    _refused(k, ValueError, rf"^activation #1: per_partition col has {P - 1} partitions",
             lambda: k.activation(c, a, "exp", bias_tile=col))


def test_labels_count_per_operation_and_nested_ops_share_one():
    k = Kernel(SMALL, dram_bytes=1 << 16)
    a = k.sbuf_tile(P, 8, "fp32")
    k.memset(a, 1.0)
    k.activation(a, a, "exp")        # its table load: DMA + act_table_load, one operation
    k.tensor_tensor(a, a, a, "add")
    kp = k.build()
    assert kp.operations["act"] == ["activation #1"] * len(kp.operations["act"])
    assert kp.operations["dve"][0] == "memset #1"
    assert kp.operations["dve"][-1] == "tensor_tensor #1"
    assert set(kp.operations["sp"]) == {"activation #1"}
    assert kp.operation("dve", 99) is None


def test_run_time_error_names_error_engine_index_operation():
    k = Kernel(SMALL, dram_bytes=1 << 16)
    a, b, c = k.sbuf_tile(P, 8, "fp32"), k.sbuf_tile(P, 6, "fp32"), k.sbuf_tile(P, 8, "fp32")
    k.memset(a, 1.0)
    k.memset(b, 1.0)
    k.op("tensor_tensor", c, [a, b])      # the raw path: not checked at build time
    kp = k.build()
    sim = IsaSim(SMALL, dram_bytes=kp.dram)
    err = kp.locate(sim.run(kp.programs))
    assert err.code == 5 and err.source == "dve"
    assert kp.operation("dve", err.index) == "op #1"
    text = str(err)
    assert re.match(rf"E_SHAPE on dve instruction {err.index} \(op #1\): tensor_tensor", text)
    assert "VecInstr" not in text and len(text) < 200 and "\n" not in text
    assert "VecInstr" in err.detail                          # the whole detail is kept
    assert repr(err).startswith(f"SimError(E_SHAPE, source='dve', index={err.index}")
    assert len(repr(err)) < 250
