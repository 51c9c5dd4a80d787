"""hloscope diff on real XLA GPU compilations (tests/fixtures SOURCES.md: gpu_aot), checked against independent counts."""

from __future__ import annotations

import itertools
import json
import re
from collections import Counter
from pathlib import Path

import pytest

from hloscope.diff.adapt import graph_from_module
from hloscope.diff.match import group_by_source, match_graphs
from hloscope.hlo.parser import parse_hlo_text

SM90 = "gpu_aot/vit_base_sm90_cublas"
SM80 = "gpu_aot/vit_base_sm80_cublas"
TINY = "gpu_aot/vit_tiny_sm90_triton"


def _after(folder: Path) -> Path:
    (path,) = folder.glob("*gpu_after_optimizations.txt")
    return path


def _fusion_kinds(path: Path) -> Counter:
    """Fusion instructions by kind, counted with a regex over the text (independent of hloscope's parser)."""
    kinds = Counter()
    for line in path.read_text().splitlines():
        match = re.search(r"\bfusion\(.*\bkind=(k\w+)", line)
        if match and " = " in line:
            kinds[match.group(1)] += 1
    return kinds


def _custom_calls(path: Path) -> Counter:
    return Counter(re.findall(r'custom_call_target="([^"]+)"', path.read_text()))


def _diff_json(cli_run, a: Path, b: Path, *options: str) -> dict:
    code, out, err = cli_run("diff", str(a), str(b), "--json", *options)
    assert code == 0, err
    return json.loads(out)


def _by_kind(fusions: dict) -> Counter:
    """hloscope names kCustom fusions by backend kind (`kCustom:__triton`); fold them back into kCustom."""
    out = Counter()
    for kind, n in fusions.items():
        out[kind.split(":")[0]] += n
    return out


def test_vit_base_h100_against_a100(cli_run, fixtures_dir):
    a, b = fixtures_dir / SM90, fixtures_dir / SM80
    kinds_a, kinds_b = _fusion_kinds(_after(a)), _fusion_kinds(_after(b))
    assert kinds_a == {"kLoop": 399, "kInput": 354, "kCustom": 36}  # SOURCES.md
    assert kinds_b == {"kLoop": 374, "kInput": 486, "kCustom": 24}
    report = _diff_json(cli_run, a, b, "--no-xla-cost")
    assert report["a"]["stage"] == report["b"]["stage"] == "after_optimizations"
    assert "xla_cost" not in report["a"]
    assert _by_kind(report["a"]["fusions"]) == kinds_a and _by_kind(report["b"]["fusions"]) == kinds_b
    assert _by_kind(report["delta"]["fusions"]) == {"kLoop": -25, "kInput": 132, "kCustom": -12}
    assert report["delta"]["kernels"] == report["b"]["kernels"] - report["a"]["kernels"]
    ops_a, ops_b = report["a"]["opcodes"], report["b"]["opcodes"]
    assert report["delta"]["opcodes"]["transpose"] == ops_b["transpose"] - ops_a["transpose"]
    # Every instruction of each side is either matched or reported as only on that side.
    m = report["matching"]
    assert report["matched"] + m["only_in_a"] == m["a_instructions"]
    assert report["matched"] + m["only_in_b"] == m["b_instructions"]
    assert report["matched"] > 0.7 * m["a_instructions"]
    assert all(g["count"] > 0 and g["opcodes"] for g in report["only_in_b"])
    # each side's roofline lower bound for the GPU XLA compiled it for, side by side
    assert report["a"]["roofline"]["device"] == "NVIDIA H100 80GB HBM3"
    assert report["b"]["roofline"]["device"] == "NVIDIA A100-SXM4-80GB"
    assert report["delta"]["roofline"]["serial_s"] == pytest.approx(
        report["b"]["roofline"]["serial_s"] - report["a"]["roofline"]["serial_s"])
    _code, out, _err = cli_run("diff", str(a), str(b), "--no-xla-cost", "--format", "md")
    row = next(line for line in out.splitlines() if line.startswith("| roofline LOWER BOUND serial |"))
    assert f"{report['b']['roofline']['serial_s'] * 1e3:.3f} ms" in row


def test_vit_tiny_triton_against_vit_base_cublas(cli_run, fixtures_dir):
    a, b = fixtures_dir / TINY, fixtures_dir / SM90
    report = _diff_json(cli_run, a, b)
    calls_a, calls_b = _custom_calls(_after(a)), _custom_calls(_after(b))
    assert calls_b["__cublas$lt$matmul"] == 243 and calls_a["__cublas$lt$matmul"] == 0
    assert report["delta"]["custom_calls"]["__cublas$lt$matmul"] == 243
    assert "__cudnn$convBiasActivationForward" not in report["delta"]["custom_calls"]  # 2 on both sides
    expected = _fusion_kinds(_after(b))
    expected.subtract(_fusion_kinds(_after(a)))
    assert _by_kind(report["delta"]["fusions"]) == {k: v for k, v in expected.items() if v}


def test_renamed_module_with_one_inserted_transpose(fixtures_dir):
    """Every instruction renamed (names share nothing) and one transpose inserted before an attention matmul: the
    matcher pairs every instruction with its true counterpart and reports only the transpose, under its source op."""
    text = (fixtures_dir / TINY / "module_0001.jit_train_step.before_optimizations.txt").read_text()
    weight = "%params__vit____encoder____layer____0____attention____attention____value____kernel__.1"
    dot = f"%dot_general.52 = f32[8,17,64]{{2,1,0}} dot(%add.150, {weight})"
    assert text.count(dot) == 1
    inserted = (f'%inserted = f32[64,64]{{1,0}} transpose({weight}), dimensions={{1,0}}, '
                f'metadata={{op_name="jit(train_step)/attention/value/transpose"}}\n  '
                f"%dot_general.52 = f32[8,17,64]{{2,1,0}} dot(%add.150, %inserted)")
    renamed: dict[str, str] = {}
    counter = itertools.count()
    b_text = re.sub(r"%([A-Za-z_][\w.\-]*)", lambda m: "%" + renamed.setdefault(m.group(1), f"v{next(counter)}"),
                    text.replace(dot, inserted))
    graph_a = graph_from_module(parse_hlo_text(text)[0])
    graph_b = graph_from_module(parse_hlo_text(b_text)[0])
    matching = match_graphs(graph_a, graph_b)
    assert len(graph_a.nodes) > 1000
    assert matching.only_in_a == []
    (only,) = matching.only_in_b
    assert graph_b.nodes[only].name == renamed["inserted"]
    truth = {f"{renamed[ka.split('/')[0]]}/{renamed[ka.split('/')[1]]}" for ka in graph_a.nodes}
    assert all(kb == f"{renamed[ka.split('/')[0]]}/{renamed[ka.split('/')[1]]}" for ka, kb in matching.pairs.items())
    assert len(matching.pairs) == len(truth) == len(graph_a.nodes)
    assert [group.to_dict() for group in group_by_source(graph_b, matching.only_in_b)] == [{
        "op_name": "attention/value/transpose", "count": 1, "opcodes": {"transpose": 1}, "sources": 1,
        "examples": [renamed["inserted"]], "graphs": {graph_b.nodes[only].graph: 1}}]


@pytest.mark.parametrize("fmt,marker", [("md", "## Structural matching"), ("html", "<!DOCTYPE html>")])
def test_report_files_are_written_once(cli_run, fixtures_dir, tmp_path, fmt, marker):
    out = tmp_path / f"diff.{fmt}"
    args = ("diff", str(fixtures_dir / SM90), str(fixtures_dir / SM80), "--format", fmt, "-o", str(out), "--no-xla-cost")
    code, _, err = cli_run(*args)
    assert code == 0, err
    text = out.read_text()
    assert marker in text and "kInput" in text and "486" in text
    assert "http" not in text  # the HTML names no URL (nor does the Markdown)
    code, _, err = cli_run(*args)
    assert code == 2 and "already exists; use --force" in err and err.count("\n") == 1
    assert out.read_text() == text
    assert cli_run(*args, "--force")[0] == 0


def test_bad_inputs_give_one_line_and_exit_2(cli_run, fixtures_dir, tmp_path):
    code, _, err = cli_run("diff", str(tmp_path / "missing"), str(fixtures_dir / SM90))
    assert code == 2 and "missing: no such file or directory" in err and err.count("\n") == 1
    broken = tmp_path / "broken.hlo"
    broken.write_text("HloModule m\n\nENTRY main {\n  p = f32[2] parameter(0)\n  ROOT n = f32[2] negate(p\n}\n")
    code, _, err = cli_run("diff", str(broken), str(fixtures_dir / SM90))
    assert code == 2 and str(broken) in err and "Traceback" not in err and err.count("\n") == 1
    code, _, err = cli_run("diff", str(fixtures_dir / SM90), str(fixtures_dir / SM80), "--json", "--format", "md")
    assert code == 2 and "exclude each other" in err


def test_a_and_b_are_exactly_the_hlo_stats_records(cli_run, fixtures_dir):
    a, b = _after(fixtures_dir / TINY), _after(fixtures_dir / SM90)
    report = _diff_json(cli_run, a, b)
    for side, path in (("a", a), ("b", b)):
        code, out, err = cli_run("hlo", "stats", str(path), "--json")
        assert code == 0, err
        (module,) = json.loads(out)["modules"]
        assert report[side] == module


def test_side_by_side_rows_cover_what_the_issue_lists(cli_run, fixtures_dir):
    """Kernels, fusions by kind, custom calls, FLOPs, bytes, memory (temp, total), collectives, transposes and copies,
    dot precision: each a row of the report with the figures of the JSON (H100 against A100, SOURCES.md counts)."""
    a, b = fixtures_dir / SM90, fixtures_dir / SM80
    code, out, err = cli_run("diff", str(a), str(b), "--no-xla-cost", "--format", "md")
    assert code == 0, err
    rows = {line.split(" | ")[0][2:]: line.split(" | ")[1:] for line in out.splitlines() if line.startswith("| ")}
    expected = {"kernels": ["1,034", "1,129", "+95 |"], "fusion kInput": ["354", "486", "+132 |"],
                "custom-call __cublas$lt$matmul": ["243", "243", " |"], "transpose instructions": ["150", "270", "+120 |"],
                "copy instructions": ["60", "24", "-36 |"], "dots f32 x f32 -&gt; f32 \\[ALG_UNSET\\]": ["243", "243", " |"],  # Markdown-escaped
                "collectives count": ["0", "0", " |"]}
    for label, cells in expected.items():
        assert rows[label] == cells, (label, rows.get(label))
    report = _diff_json(cli_run, a, b, "--no-xla-cost")
    for key in ("temp_bytes", "total_bytes"):
        figures = [report[side]["memory"]["buffer_assignment"][key] for side in ("a", "b")]
        assert rows[f"memory buffer_assignment {key}"][:2] == [f"{v / 1e9:.3g} G" for v in figures]
    for key, scale, unit in (("flops", 1e12, "T"), ("bytes_accessed", 1e9, "G")):
        assert rows[key][:2] == [f"{report[side][key] / scale:.3g} {unit}" for side in ("a", "b")]
