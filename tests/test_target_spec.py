"""GPU target files (GpuTargetConfigProto text): the shipped H100/A100 files, the peak rates read from them, bad files."""

from __future__ import annotations

import pytest

from hloscope.errors import InputError, ParseError
from hloscope.hlo.gpu_spec import PRIMITIVE_TYPES, parse_text_proto, resolve_target


def test_shipped_files_are_the_fixtures(fixtures_dir):
    for name, fixture in (("h100", "h100_sxm.txtpb"), ("a100", "a100_sxm_80.txtpb")):
        assert resolve_target(name).text == (fixtures_dir / "gpu_specs" / fixture).read_text()


def test_h100_rates_are_nvidias_dense_datasheet_figures():
    h100 = resolve_target("H100")
    assert (h100.device, h100.compute_capability, h100.core_count) == ("NVIDIA H100 80GB HBM3", "9.0a", 132)
    assert h100.memory_bandwidth_bytes_s == 3_352_320_000_000
    # H100 SXM datasheet (dense): FP32 67 TFLOP/s, TF32 495, BF16/FP16 989, FP8 1979, FP64 tensor core 67.
    assert h100.vector_flops_s["f32"] == pytest.approx(66.9e12, rel=1e-3)
    assert h100.matrix_flops_s["f32"] == pytest.approx(494.6e12, rel=1e-3)
    assert h100.matrix_flops_s["bf16"] == pytest.approx(989.2e12, rel=1e-3)
    assert h100.matrix_flops_s["f8e4m3fn"] == pytest.approx(1978.3e12, rel=1e-3)
    assert h100.matrix_flops_s["f64"] == pytest.approx(66.9e12, rel=1e-3)
    assert h100.has_roofline


def test_a100_file_has_no_tensor_core_table():
    a100 = resolve_target("a100")
    assert (a100.compute_capability, a100.core_count, a100.clock_ghz) == ("8.0", 108, 1.41)
    # Only fpus_per_core: 64 FP32 units x 108 SMs x 1.41 GHz x 2 = 19.5 TFLOP/s (A100 datasheet FP32).
    assert a100.vector_flops_s == {"f32": pytest.approx(19.49e12, rel=1e-3)}
    assert a100.matrix_flops_s == {}


def test_primitive_type_numbers_match_xla():
    from jax._src.lib import xla_client
    xla = {int(v): name.lower() for name, v in xla_client.PrimitiveType.__members__.items()}
    for number, name in PRIMITIVE_TYPES.items():
        assert xla[number] == name


def test_text_proto_reader():
    proto = parse_text_proto('a: 1\nb { c: "x y" d: 2.5 e: TRUE_ENUM }\nb { c: "z" }  # comment\nf: true\n')
    assert proto == {"a": 1, "b": [{"c": "x y", "d": 2.5, "e": "TRUE_ENUM"}, {"c": "z"}], "f": True}


@pytest.mark.parametrize("text, line, col", [
    ("gpu_device_info {\n  core_count: 1\n", 1, 17),      # a block never closed
    ("gpu_device_info {\n  core_count: }\n}\n", 2, 15),     # a value missing
    ('a: "open\n', 1, 4),                                  # unterminated string
    ("}\n", 1, 1),
])
def test_bad_text_names_line_and_column(tmp_path, text, line, col):
    path = tmp_path / "bad.txtpb"
    path.write_text(text)
    with pytest.raises(ParseError) as err:
        resolve_target(path)
    assert (err.value.line, err.value.col) == (line, col)
    assert str(err.value).startswith(f"{path}:{line}:{col}: ")


def test_not_a_target_file(tmp_path):
    path = tmp_path / "other.txtpb"
    path.write_text("platform_name: \"CUDA\"\n")
    with pytest.raises(InputError, match="no gpu_device_info"):
        resolve_target(path)
    with pytest.raises(InputError, match="no such GPU target file"):
        resolve_target(tmp_path / "missing.txtpb")


def test_a_user_file_gets_its_stem_as_name(tmp_path, fixtures_dir):
    path = tmp_path / "my_h100.txtpb"
    path.write_text((fixtures_dir / "gpu_specs" / "h100_sxm.txtpb").read_text())
    target = resolve_target(path)
    assert target.name == "my_h100" and target.path == str(path)
    assert target.to_json()["sm_count"] == 132
