"""GPU target files (GpuTargetConfigProto text): the shipped H100/A100 files, the peak rates read from them, bad and
hostile files refused in one line before any run directory is made (`run --target`), a file read once from a pipe."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import BAD, assert_refused, hloscope

from hloscope.errors import InputError, ParseError
from hloscope.hlo import gpu_spec as spec_module
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


@pytest.mark.parametrize("case, words", [
    ("bad_escape", ("bad escape",)), ("deep", ("nested",)), ("negative", ("core_count",)),
    ("huge_int", ("GpuTargetConfigProto",)), ("fifo", ()), ("device", ("device",))])
def test_hostile_gpu_specs_are_refused_before_any_run(tmp_path, case, words):
    spec = tmp_path / "gpu.txtpb"
    body = 'gpu_device_info { core_count: 132 clock_rate_ghz: 1.98 memory_bandwidth: 3352000000000 }\n'
    if case == "bad_escape":
        spec.write_text('device_description_str: "H100 \\x"\n' + body)
    elif case == "deep":
        spec.write_text("a { " * 5000 + "} " * 5000)
    elif case == "negative":
        spec.write_text(body.replace("132", "-132"))
    elif case == "huge_int":
        spec.write_text(body.replace("core_count: 132", "core_count: " + "9" * 5000))
    elif case == "fifo":
        os.mkfifo(spec)  # nobody writes: reads as empty at once, never blocks
    else:
        spec = Path("/dev/zero")
    out = tmp_path / "out"
    result = hloscope("run", "--mode", "jax", "--target", spec, "--out", out, timeout=60)
    assert_refused(result, spec, words=words)
    assert not out.exists() or not any(out.iterdir()), "a run directory was made for a refused target"


def test_a_target_spec_from_a_pipe_is_read_once():
    body = (Path(spec_module.__file__).parent.parent / "data" / "gpu_specs")
    text = next(body.iterdir()).read_text()
    reader, writer = os.pipe()
    path = f"/proc/self/fd/{reader}"
    child = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdout.write(sys.stdin.read())"],
                             stdin=subprocess.PIPE, stdout=writer)
    os.close(writer)
    child.communicate(text.encode())
    first = spec_module.resolve_target(path)
    second = spec_module.resolve_target(path)  # the pipe is drained: this comes from the one read
    os.close(reader)
    assert first is second and first.core_count


@pytest.mark.parametrize("name, position", [("rel_empty.hlo", False), ("rel_garbage.hlo", False),
                                            ("rel_png.hlo", False), ("rel_kineto_as.hlo", True)])
def test_broken_gpu_target_file_is_refused_before_any_run(tmp_path, name, position):
    """`run --target PATH` reads a GpuTargetConfigProto text file: refused in one line, and no run directory is made."""
    path = BAD / name
    out = tmp_path / "out"
    result = hloscope("run", "--mode", "jax", "--model", "vit-tiny", "--target", path, "--out", out)
    assert_refused(result, path, position=position)
    assert not out.exists() or list(out.iterdir()) == []
