# SPDX-License-Identifier: Apache-2.0
"""The one config: presets are valid, bad values raise errors naming the field and its range."""

import dataclasses

import pytest

from rtl.config import (BF16, CoreConfig, FORMATS, FPFormat, PRESETS, cfp8_format, get_preset,
                        parse_config, preset_from_env)


def test_presets_exist_and_are_consistent():
    assert {"small", "default", "trainium", "bf16_only", "fp8_only"} <= set(PRESETS)
    t = PRESETS["trainium"]
    assert (t.partitions, t.pe_rows, t.pe_cols, t.psum_banks, t.psum_bank_fp32) == \
        (128, 128, 128, 8, 512)
    for c in PRESETS.values():
        assert c.pe_rows == c.partitions and c.pe_cols <= c.partitions
        assert c.psum_bits == 32 * c.psum_bank_fp32 * c.psum_banks * c.partitions


def test_config_is_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        PRESETS["small"].pe_rows = 8


@pytest.mark.parametrize("field, value, message", [
    ("partitions", 3, r"'partitions' must be a power of two in \[2, 128\], not 3"),
    ("partitions", 256, r"'partitions' must be in \[2, 128\], not 256"),
    ("pe_rows", 8, r"'pe_rows' must be in \[16, 16\], not 8"),
    ("pe_cols", 32, r"'pe_cols' must be in \[1, 16\], not 32"),
    ("pe_cols", 6, r"'pe_cols' must be a power of two in \[1, 16\], not 6"),
    ("psum_banks", 0, r"'psum_banks' must be in \[1, 16\], not 0"),
    ("psum_bank_fp32", 100, r"'psum_bank_fp32' must be a power of two"),
    ("formats", ("bf16", "int4"), r"'formats' entries must be in"),
    ("formats", ("bf16", "bf16"), r"'formats' must not repeat"),
    ("mx_formats", ("mxfp6",), r"'mx_formats' entries must be in"),
    ("mx_block", 24, r"'mx_block' must be a power of two in \[2, 256\], not 24"),
    ("cfp8_exp_bits", 6, r"'cfp8_exp_bits' must be in \[3, 5\], not 6"),
    ("cfp8_bias", 200, r"'cfp8_bias' must be in \[-121, 146\] for 3 exponent bits, not 200"),
    ("sr_seed", 0, r"'sr_seed' must be in \[1, 4294967295\], not 0"),
    ("add_stages", 9, r"'add_stages' must be in \[0, 6\], not 9"),
    ("fp32_passes", 2, r"'fp32_passes' must be 1 or 4, not 2"),
    ("fp32_passes", 0, r"'fp32_passes' must be in \[1, 4\], not 0"),
    ("fp32_passes", 8, r"'fp32_passes' must be in \[1, 4\], not 8"),
    ("ap_dims", 0, r"'ap_dims' must be in \[1, 4\], not 0"),
    ("ap_dims", 5, r"'ap_dims' must be in \[1, 4\], not 5"),
    ("sbuf_banks", 3, r"'sbuf_banks' must be a power of two in \[1, 16\]"),
    ("sbuf_banks", 32, r"'sbuf_banks' must be in \[1, 16\], not 32"),
    ("axi_data_bits", 48, r"'axi_data_bits' must be a power of two in \[32, 1024\], not 48"),
    ("axi_data_bits", 16, r"'axi_data_bits' must be in \[32, 1024\], not 16"),
    ("axi_addr_bits", 65, r"'axi_addr_bits' must be in \[32, 64\], not 65"),
    ("dma_queues", 0, r"'dma_queues' must be in \[1, 16\], not 0"),
    ("dma_outstanding", 33, r"'dma_outstanding' must be in \[1, 32\], not 33"),
    ("semaphores", 100, r"'semaphores' must be a power of two in \[1, 256\], not 100"),
    ("semaphore_bits", 7, r"'semaphore_bits' must be in \[8, 32\], not 7"),
    ("fetch_depth", 0, r"'fetch_depth' must be in \[1, 16\], not 0"),
    ("issue_depth", 17, r"'issue_depth' must be in \[1, 16\], not 17"),
    ("watchdog_reset", -1, r"'watchdog_reset' must be in \[0, 4294967295\], not -1"),
    ("act_segments", 8, r"'act_segments' must be in \[16, 4096\], not 8"),
    ("act_segments", 384, r"'act_segments' must be a power of two in \[16, 4096\], not 384"),
    ("ring_size", 3, r"'ring_size' must be a power of two in \[1, 8\], not 3"),
    ("ring_size", 16, r"'ring_size' must be in \[1, 8\], not 16"),
    ("link_bits", 48, r"'link_bits' must be a power of two in \[32, 512\], not 48"),
    ("link_bits", 1024, r"'link_bits' must be in \[32, 512\], not 1024"),
    ("link_credits", 1, r"'link_credits' must be in \[2, 256\], not 1"),
    ("link_latency", 3, r"'link_latency' must be in \[4, 256\], not 3"),
    ("link_latency", 257, r"'link_latency' must be in \[4, 256\], not 257"),
])
def test_bad_values_name_the_field_and_range(field, value, message):
    with pytest.raises(ValueError, match=message):
        PRESETS["default"].replace(**{field: value})


def test_access_pattern_fields():
    for c in PRESETS.values():
        assert c.ap_dims == 4
        assert c.psum_bytes_per_partition == c.psum_banks * 4 * c.psum_bank_fp32
        top = max(c.sbuf_bytes_per_partition, c.psum_bytes_per_partition)
        assert 1 << c.ap_addr_bits == top       # both sizes are powers of two
    s = PRESETS["small"]
    assert (s.psum_bytes_per_partition, s.ap_addr_bits) == (1024, 12)
    assert s.replace(ap_dims=2).ap_dims == 2
    assert s.to_dict()["derived"]["ap_addr_bits"] == 12


@pytest.mark.parametrize("field, value", [("pe_cols", 4.0), ("sr_seed", True),
                                          ("formats", ["bf16"]), ("ap_dims", 4.0),
                                          ("fp32_passes", 4.0), ("packed_modes", 1)])
def test_wrong_types_raise_type_error(field, value):
    with pytest.raises(TypeError, match=f"'{field}'"):
        PRESETS["default"].replace(**{field: value})


def test_cfp8_bias_range_matches_fp32_subset():
    for e in (3, 4, 5):
        lo = (1 << e) - 2 - 127
        hi = 150 - (7 - e)
        assert cfp8_format(e, lo).is_fp32_subset and cfp8_format(e, hi).is_fp32_subset
        for bad in (lo - 1, hi + 1):
            with pytest.raises(ValueError, match="cfp8_bias"):
                cfp8_format(e, bad)


def test_format_policies():
    assert FORMATS["fp8_e4m3"].max_finite == 240.0
    assert FORMATS["fp8_e4m3fn"].max_finite == 448.0
    assert FORMATS["fp8_e5m2"].max_finite == 57344.0
    assert FORMATS["fp4_e2m1"].max_finite == 6.0
    assert FORMATS["fp8_e4m3fn"].nan_code == 0x7F and FORMATS["fp8_e4m3fn"].inf_code is None
    assert BF16.nan_code == 0x7FC0 and BF16.inf_code == 0x7F80
    with pytest.raises(ValueError, match="'overflow' must be 'saturate' for a format without Inf"):
        FPFormat(name="x", exp_bits=4, man_bits=3, bias=7, specials="fn")


def test_preset_lookup(monkeypatch):
    with pytest.raises(ValueError, match=r"CONFIG must be one of \[.*'small'.*\], not 'huge'"):
        get_preset("huge")
    monkeypatch.setenv("CONFIG", "trainium")
    assert preset_from_env() is PRESETS["trainium"]
    monkeypatch.setenv("CONFIG", "")
    assert preset_from_env("small") is PRESETS["small"]


def test_fmt_resolves_cfp8_from_config():
    c = PRESETS["default"].replace(cfp8_exp_bits=4, cfp8_bias=9)
    assert c.fmt("cfp8") == cfp8_format(4, 9)
    with pytest.raises(ValueError, match="format must be one of"):
        c.fmt("fp64")
    assert isinstance(CoreConfig(), CoreConfig)


def test_memory_and_dma_fields():
    for c in PRESETS.values():
        assert c.sbuf_word_bytes == max(4, c.axi_data_bits // 8)
        assert c.sbuf_bank_bytes * c.sbuf_banks == c.sbuf_bytes_per_partition
        assert c.sbuf_bank_bytes >= 16 * c.sbuf_word_bytes
        assert c.dma_engines == max(1, c.partitions // 8)
    s = PRESETS["small"]
    assert (s.sbuf_word_bytes, s.sbuf_bank_bytes, s.dma_engines) == (8, 1024, 1)
    assert PRESETS["trainium"].dma_engines == 16
    # a bank must hold 16 words: 64-byte partitions with 16-byte words allow one bank only
    tiny = s.replace(sbuf_bytes_per_partition=256, axi_data_bits=128, sbuf_banks=1)
    assert tiny.sbuf_bank_bytes == 256
    with pytest.raises(ValueError, match=r"'sbuf_banks' must be a power of two in \[1, 1\]"):
        tiny.replace(sbuf_banks=2)


@pytest.mark.parametrize("value, message", [
    (("3:16",), r"'sparse_patterns' entries must be in \("),
    (("4:16", "4:16"), r"'sparse_patterns' must not repeat a pattern"),
    (("4:16",), None),
])
def test_sparse_patterns_validated(value, message):
    d = PRESETS["default"]
    if message is None:
        assert d.replace(sparse_patterns=value).sparsity == value
        return
    with pytest.raises(ValueError, match=message):
        d.replace(sparse_patterns=value)


def test_sparse_patterns_need_rows_and_a_narrow_format():
    s = PRESETS["small"]
    two = dict(partitions=2, pe_rows=2, pe_cols=2)
    with pytest.raises(ValueError, match=r"entry '4:16' needs partitions % 4 == 0, not "
                                         r"partitions=2"):
        s.replace(sparse_patterns=("4:16",), **two)
    assert s.replace(sparse_patterns=("2:4",), **two).sparsity == ("2:4",)
    with pytest.raises(ValueError, match=r"entry '2:4' needs an enabled format of at most 16 "
                                         r"bits in 'formats'"):
        s.replace(sparse_patterns=("2:4",), formats=("fp32", "tf32"))
    with pytest.raises(ValueError, match=r"entry '4:16' needs an enabled format of at most 8 "
                                         r"bits"):
        s.replace(sparse_patterns=("4:16",), formats=("bf16",))
    with pytest.raises(TypeError, match="'sparse_patterns' must be a tuple or None"):
        s.replace(sparse_patterns=["4:16"])


def test_sparsity_default_resolves_to_what_fits():
    # None = every pattern the rows and formats allow, 4:16 first; () = no sparsity
    assert PRESETS["default"].sparsity[0] == "4:16"
    assert set(PRESETS["default"].sparsity) >= {"4:16", "2:4", "1:4", "4:8", "1:2"}
    assert PRESETS["bf16_only"].sparsity == ("4:8", "2:4", "1:2")
    two = PRESETS["small"].replace(partitions=2, pe_rows=2, pe_cols=2)
    assert two.sparsity == ("2:8", "2:4", "1:4", "1:2")
    assert PRESETS["small"].replace(formats=("fp32",), mx_formats=()).sparsity == ()
    assert PRESETS["small"].replace(sparse_patterns=()).sparsity == ()


def test_dma_element_ops_is_a_bool():
    assert PRESETS["default"].dma_element_ops is True
    assert PRESETS["small"].replace(dma_element_ops=False).dma_element_ops is False
    for bad in (1, 0, "yes", None):
        with pytest.raises(TypeError, match=r"'dma_element_ops' must be a bool, not"):
            PRESETS["small"].replace(dma_element_ops=bad)


# --- CONFIG overrides: "preset:field=value,..." and TOML files (rtl.config.parse_config) ------

def test_override_string_applies_fields_and_names_the_config():
    c = parse_config("default:pe_rows=8,pe_cols=4")
    d = PRESETS["default"]
    assert (c.partitions, c.pe_rows, c.pe_cols) == (8, 8, 4)     # partitions follows pe_rows
    assert c.psum_banks == d.psum_banks and c.formats == d.formats
    assert c.name == "default__partitions_8__pe_cols_4__pe_rows_8"
    # order of the overrides does not change the name; a value equal to the preset's is no change
    assert parse_config("default:pe_cols=4,pe_rows=8").name == c.name
    assert parse_config("default:pe_rows=16") == d
    assert parse_config(" small ") == PRESETS["small"]


def test_override_value_types():
    c = parse_config("small:formats=bf16+fp8_e4m3,mx_formats=,packed_modes=false,"
                     "sr_seed=0x1234")
    assert c.formats == ("bf16", "fp8_e4m3") and c.mx_formats == ()
    assert c.packed_modes is False and c.sr_seed == 0x1234
    # a name that would not be a short identifier is a hash of the preset and the overrides
    s = parse_config("small:sparse_patterns=4:16+2:4")
    assert s.sparse_patterns == ("4:16", "2:4")
    assert s.name.startswith("small__") and len(s.name) == len("small__") + 8
    assert parse_config("small:sparse_patterns=2:4+4:16").name != s.name


def test_toml_file_and_string_give_the_same_config(tmp_path):
    f = tmp_path / "my_core.toml"
    f.write_text('preset = "default"\npe_cols = 8\nformats = ["bf16", "fp8_e4m3"]\n')
    a = parse_config(str(f))
    b = parse_config("default:formats=bf16+fp8_e4m3,pe_cols=8")
    assert a == b and a.name == b.name == "default__formats_bf16_fp8_e4m3__pe_cols_8"
    (tmp_path / "p.toml").write_text("pe_cols = 4\n")                 # preset defaults to default
    assert parse_config(str(tmp_path / "p.toml")).name == "default__pe_cols_4"


@pytest.mark.parametrize("text, exc, message", [
    ("default:foo=1", ValueError, r"no field 'foo'; fields: partitions, pe_rows, pe_cols"),
    ("default:name=x", ValueError, r"no field 'name'"),
    ("default:pe_cols=abc", TypeError, r"'pe_cols' must be an integer, not 'abc'"),
    ("default:pe_cols=32", ValueError, r"'pe_cols' must be in \[1, 16\], not 32"),
    ("default:packed_modes=3", TypeError, r"'packed_modes' must be a bool, not 3"),
    ("default:pe_cols", ValueError, r"override 'pe_cols' must be field=value"),
    ("default:pe_cols=4,pe_cols=8", ValueError, r"'pe_cols' is given twice"),
    ("huge:pe_cols=4", ValueError, r"CONFIG must be one of"),
    ('preset = "small"\nbogus = 1\n', ValueError, r"no field 'bogus'"),
    ('preset = 3\n', TypeError, r"'preset' must be a string, not 3"),
    ("no/such/file.toml", ValueError, r"cannot read the TOML file"),
])
def test_bad_overrides_raise_with_the_usual_messages(text, exc, message):
    with pytest.raises(exc, match=message):
        parse_config(text)


def test_preset_from_env_takes_overrides(monkeypatch, tmp_path):
    monkeypatch.setenv("CONFIG", "small:pe_cols=2")
    assert preset_from_env().name == "small__pe_cols_2"
    f = tmp_path / "c.toml"
    f.write_text('preset = "small"\npsum_banks = 2\n')
    monkeypatch.setenv("CONFIG", str(f))
    assert preset_from_env().psum_banks == 2
