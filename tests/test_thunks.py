"""XLA thunk_sequence.txt parsing, checked on the four real deviceless GPU compilations in fixtures/gpu_aot."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from hloscope.errors import InputError, ParseError
from hloscope.hlo.kernels import kernel_list
from hloscope.hlo.parser import parse_hlo_file
from hloscope.hlo.thunks import (
    _sanitized,
    attach_launches,
    find_thunk_sequence,
    parse_thunk_metadata_text,
    parse_thunk_sequence,
    parse_thunk_sequence_text,
)

FOLDERS = ["mlp_sm90_triton", "vit_tiny_sm90_triton", "vit_base_sm90_cublas", "vit_base_sm80_cublas"]

# Counts stated in fixtures/SOURCES.md (independently of this parser).
SOURCES_FACTS = {
    "vit_tiny_sm90_triton": {"kCustomKernel": 166, "kCopy": 13, "kConvolution": 2},
    "vit_base_sm90_cublas": {"kCustomKernel": 789, "kCublasLtMatmul": 243, "kCopy": 60, "kConvolution": 2},
}


def _thunk_file(fixtures_dir: Path, folder: str) -> Path:
    (path,) = (fixtures_dir / "gpu_aot" / folder).glob("*.thunk_sequence.txt")
    return path


def _grep_counts(path: Path) -> dict[str, int]:
    """Independent count: the second whitespace-separated word of every line."""
    counts: dict[str, int] = {}
    for line in path.read_text().splitlines():
        kind = line.split()[1]
        counts[kind] = counts.get(kind, 0) + 1
    return counts


@pytest.mark.parametrize("folder", FOLDERS)
def test_counts_match_an_independent_grep(fixtures_dir, folder):
    path = _thunk_file(fixtures_dir, folder)
    seq = parse_thunk_sequence(path)
    assert seq.counts_by_kind() == _grep_counts(path)
    assert len(seq.thunks) == len(path.read_text().splitlines())
    assert [t.index for t in seq.thunks] == list(range(1, len(seq.thunks) + 1))


@pytest.mark.parametrize("folder", sorted(SOURCES_FACTS))
def test_counts_match_sources_md(fixtures_dir, folder):
    seq = parse_thunk_sequence(_thunk_file(fixtures_dir, folder))
    assert seq.counts_by_kind() == SOURCES_FACTS[folder]


@pytest.mark.parametrize("folder", FOLDERS)
def test_kernel_launches_equal_fusions_in_the_entry_schedule(fixtures_dir, folder):
    """SOURCES.md: the number of kCustomKernel thunks equals the entry computation's fusion instructions."""
    seq = parse_thunk_sequence(_thunk_file(fixtures_dir, folder))
    (hlo,) = (fixtures_dir / "gpu_aot" / folder).glob("*gpu_after_optimizations.txt")
    text = hlo.read_text()
    entry = text[text.index("\nENTRY "):]
    entry = entry[:entry.index("\n}\n")]
    fusions = len(re.findall(r"= (?:\([^)]*\)|\S+) fusion\(", entry))  # array or tuple shape
    assert len(seq.launches) == fusions
    assert seq.counts_by_category()["kernel"] == fusions


def test_launch_dimensions_of_a_known_line(fixtures_dir):
    seq = parse_thunk_sequence(_thunk_file(fixtures_dir, "mlp_sm90_triton"))
    gemm = seq.thunks[4]  # "005: kCustomKernel ... gemm_fusion_dot_3 grid: [4096, 1, 1] threads: [64, 1, 1] ... 1536 bytes"
    assert (gemm.index, gemm.kind, gemm.name) == (5, "kCustomKernel", "gemm_fusion_dot_3")
    assert (gemm.grid, gemm.block, gemm.shared_memory_bytes) == ((4096, 1, 1), (64, 1, 1), 1536)
    assert gemm.to_dict()["blocks"] == 4096 and gemm.to_dict()["threads_per_block"] == 64
    copy = seq.thunks[0]
    assert (copy.kind, copy.name, copy.grid, copy.category) == ("kCopy", None, None, "copy")


def test_every_launch_has_dimensions(fixtures_dir):
    seq = parse_thunk_sequence(_thunk_file(fixtures_dir, "vit_base_sm80_cublas"))
    assert all(t.grid and t.block and t.shared_memory_bytes is not None for t in seq.launches)
    # the block never exceeds the A100's 1024 threads; kernels with the same name are reused XLA kernels
    assert max(t.to_dict()["threads_per_block"] for t in seq.launches) <= 1024
    assert seq.counts_by_category() == {"kernel": 884, "library": 245, "copy": 24, "other": 0}


def test_finds_the_sequence_beside_a_gpu_module(fixtures_dir):
    folder = fixtures_dir / "gpu_aot" / "vit_tiny_sm90_triton"
    (hlo,) = folder.glob("*sm_9.0a_gpu_after_optimizations.txt")
    assert find_thunk_sequence(hlo) == _thunk_file(fixtures_dir, "vit_tiny_sm90_triton")
    (report,) = folder.glob("*memory-usage-report.txt")
    assert find_thunk_sequence(report) == _thunk_file(fixtures_dir, "vit_tiny_sm90_triton")
    assert find_thunk_sequence(folder / "unrelated.txt") is None


def test_nested_command_buffer_and_metadata(tmp_path):
    text = ("000: kCommandBuffer [source       | next=007 (1)] \n"
            "    001: kCustomKernel [source | sink] loop_broadcast_fusion grid: [1, 1, 1] threads: [64, 1, 1]  "
            "shared_memory: 0 bytes\n"
            "    002: kCublasLtMatmul [source | sink] kCublasLtMatmul\n")
    seq_path = tmp_path / "module_0001.m.thunk_sequence.txt"
    seq_path.write_text(text)
    (tmp_path / "module_0001.m.thunk_metadata.txt").write_text(
        'thunk_metadata {\n  thunk_info {\n    profile_annotation: "command_buffer_1"\n  }\n'
        '  thunk_kind: "kCommandBuffer"\n}\n'
        'thunk_metadata {\n  thunk_info {\n    profile_annotation: "loop_broadcast_fusion"\n    thunk_id: 1\n  }\n'
        '  thunk_kind: "kCustomKernel"\n}\n'
        'thunk_metadata {\n  thunk_info {\n    profile_annotation: "custom-call.3"\n    thunk_id: 2\n  }\n'
        '  thunk_kind: "kCublasLtMatmul"\n}\n')
    seq = parse_thunk_sequence(seq_path)
    assert [(t.kind, t.depth, t.hlo_op) for t in seq.thunks] == [
        ("kCommandBuffer", 0, None), ("kCustomKernel", 1, "loop_broadcast_fusion"), ("kCublasLtMatmul", 1, "custom-call.3")]
    assert seq.counts_by_category() == {"kernel": 1, "library": 1, "copy": 0, "other": 1}
    assert parse_thunk_metadata_text("garbage") == {}


def test_bad_input_names_file_line_and_column(tmp_path):
    good = "001: kCopy         [source       | next=009 (8)] kCopy\n"
    with pytest.raises(ParseError) as err:
        parse_thunk_sequence_text(good + "   this is not a thunk\n", "x.txt")
    assert (err.value.line, err.value.col) == (2, 4)
    assert str(err.value).startswith("x.txt:2:4: not a thunk line")
    with pytest.raises(ParseError) as err:
        parse_thunk_sequence_text("002: kCustomKernel [source | sink] f grid: [1, 1] threads: [1, 1, 1]  "
                                  "shared_memory: 0 bytes\n", "y.txt")
    assert err.value.line == 1
    with pytest.raises(InputError, match="no thunks"):
        parse_thunk_sequence_text("\n\n", "empty.txt")
    with pytest.raises(InputError, match="no such file"):
        parse_thunk_sequence(tmp_path / "missing.thunk_sequence.txt")


@pytest.mark.parametrize("folder", FOLDERS)
def test_hlo_launches_join_the_thunk_sequence_one_to_one(fixtures_dir, folder):
    (hlo,) = (fixtures_dir / "gpu_aot" / folder).glob("*gpu_after_optimizations.txt")
    (module,) = parse_hlo_file(hlo)
    rows = kernel_list(module, "gpu")
    joined = attach_launches(rows, parse_thunk_sequence(_thunk_file(fixtures_dir, folder)))
    assert joined["agrees"], joined["reason"]
    launches = joined["launches"]
    assert [r["name"] for r in launches] == [r["name"] for r in rows]
    assert all(r["grid"] for r in launches if r["kind"] == "generated")
    # A reused kernel is one XLA emitted for an identical fusion earlier in the schedule.
    emitted = set()
    for row in launches:
        if row["kind"] != "generated":
            continue
        if row["reused_kernel"]:
            assert row["kernel_name"] in emitted
        else:
            assert row["kernel_name"] == _sanitized(row["name"])
        emitted.add(row["kernel_name"])
    # a launch list that does not match is reported, not silently joined
    broken = attach_launches(rows[1:], parse_thunk_sequence(_thunk_file(fixtures_dir, folder)))
    assert broken["agrees"] is False and "thunks" in broken["reason"]
    swapped = attach_launches([{**rows[0], "kind": "cublas"}, *rows[1:]],
                              parse_thunk_sequence(_thunk_file(fixtures_dir, folder)))
    assert swapped["agrees"] is False and swapped["reason"].startswith("launch 1:")
