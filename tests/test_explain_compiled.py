"""hloscope explain on a comparison compiled for a target GPU (`compare --target h100`): not timed, so the modes are
shown side by side and ranked on their roofline lower bound. Fast: no framework runs. Each mode is a run directory
built from the real run.json of a `compare --target h100` jax run (tests/data/compiled/jax_h100.run.json) and the real
deviceless-compiled H100 modules in fixtures/gpu_aot/; its `kernels` figures are counted here from XLA's
thunk_sequence.txt, its `roofline` comes from the module, and every figure of the report is checked against those."""

from __future__ import annotations

import json
import re
import shutil
from collections import Counter
from pathlib import Path

import pytest

from hloscope.hlo.roofline import roofline_for_module_file
from hloscope.render.explain_views import ROOFLINE_LABEL

TEMPLATE = Path(__file__).parent / "data" / "compiled" / "jax_h100.run.json"
HLO = "module_0001.jit_train_step.sm_9.0a_gpu_after_optimizations.txt"
THUNKS = "module_0001.jit_train_step.thunk_sequence.txt"
CONFIG = "module_0001.jit_train_step.gpu_target_config.pbtxt"


def _thunk_kinds(path: Path) -> Counter:
    """XLA's thunk kinds, read straight from the file: `002: kCustomKernel [...] name grid: ...`."""
    return Counter(line.split()[1] for line in path.read_text().splitlines() if line.strip())


def _compiled_run(run_dir: Path, mode: str, fixture: Path) -> dict:
    (run_dir / "hlo").mkdir(parents=True)
    for name in (HLO, THUNKS, CONFIG):
        shutil.copy(fixture / name, run_dir / "hlo" / name)
    record = json.loads(TEMPLATE.read_text())
    kinds = _thunk_kinds(fixture / THUNKS)
    common = {"module": "jit_train_step", "module_id": 1, "train_step": True}
    record.update(
        run_id=f"{mode}-compiled", mode=mode,
        artifacts=[{"kind": "hlo", "path": f"hlo/{HLO}", "stage": "after_optimizations", "platform": "gpu",
                    "format": "text", **common},
                   {"kind": "thunk_sequence", "path": f"hlo/{THUNKS}", "stage": "after_optimizations",
                    "platform": "gpu", "format": "text", **common},
                   {"kind": "other", "path": f"hlo/{CONFIG}", "stage": None, "platform": "gpu", **common}],
        kernels={"file": f"hlo/{THUNKS}", "kernel_launches": kinds["kCustomKernel"],
                 "library_calls": kinds["kConvolution"] + kinds["kCublasLtMatmul"] + kinds["kGemm"],
                 "copies": kinds["kCopy"]},
        roofline=roofline_for_module_file(run_dir / "hlo" / HLO)["step"])
    (run_dir / "run.json").write_text(json.dumps(record))
    return record


@pytest.fixture
def compiled_comparison(tmp_path, fixtures_dir) -> tuple[Path, dict]:
    root = tmp_path / "compare-h100"
    root.mkdir()
    records = {"vit": _compiled_run(root / "vit", "vit", fixtures_dir / "gpu_aot" / "vit_tiny_sm90_triton"),
               "mlp": _compiled_run(root / "mlp", "mlp", fixtures_dir / "gpu_aot" / "mlp_sm90_triton")}
    (root / "comparison.json").write_text(json.dumps({
        "schema_version": 1, "comparison_id": root.name, "config": {"model": "vit-tiny", "target": "h100"},
        "modes": [{"mode": m, "dir": m, "status": "compiled"} for m in records]}))
    return root, records


def test_compiled_report_ranks_on_roofline_and_carries_run_json_figures(cli_run, compiled_comparison):
    root, records = compiled_comparison
    code, out, err = cli_run("explain", str(root), "--json")
    assert code == 0, err
    report = json.loads(out)
    bounds = {m: r["roofline"]["serial_s"] for m, r in records.items()}
    lowest = min(bounds, key=bounds.get)
    assert report["basis"] == "roofline_lower_bound" and report["fastest"] == lowest
    by_mode = {m["mode"]: m for m in report["modes"]}
    for mode, record in records.items():
        summary = report["summaries"][mode]
        assert by_mode[mode]["roofline_s"] == record["roofline"]["serial_s"]
        assert by_mode[mode]["gap_s"] == pytest.approx(bounds[mode] - bounds[lowest])
        assert by_mode[mode]["ratio"] == pytest.approx(bounds[mode] / bounds[lowest])
        assert summary["target"] == record["target"]["device"] == "NVIDIA H100 80GB HBM3"
        assert summary["thunk_kernels"] == record["kernels"]["kernel_launches"]
        assert summary["thunk_copies"] == record["kernels"]["copies"]
        assert summary["memory_estimate_bytes"] == record["memory"]["device_peak_estimate_bytes"]
        assert not any("--profile" in note for note in summary["notes"])  # a compiled run never ran
    # The HLO figures agree with XLA's own launch list and the fixtures' counts (SOURCES.md).
    vit = report["summaries"]["vit"]
    assert (vit["thunk_kernels"], vit["thunk_library_calls"], vit["thunk_copies"]) == (166, 2, 13)
    assert vit["kernels"] == vit["thunk_kernels"] + vit["thunk_library_calls"]
    assert vit["fusions"]["kLoop"] == 81 and vit["fusions"]["kInput"] == 38
    assert sum(n for kind, n in vit["fusions"].items() if kind.startswith("kCustom")) == 47
    assert vit["custom_calls"] == {"__cudnn$convBiasActivationForward": 2}
    text = (root / "vit" / "hlo" / HLO).read_text()
    assert vit["transposes"] == len(re.findall(r" transpose\(", text))
    mlp = report["summaries"]["mlp"]
    assert mlp["kernels"] == mlp["thunk_kernels"] == 24 and mlp["thunk_copies"] == 2
    assert (mlp["fusions"]["kLoop"], mlp["fusions"]["kInput"]) == (11, 5)


def test_compiled_report_side_by_side_in_terminal_markdown_and_html(cli_run, compiled_comparison, tmp_path):
    root, records = compiled_comparison
    code, term, err = cli_run("explain", str(root))
    assert code == 0, err
    code, md, err = cli_run("explain", str(root), "--format", "md")
    assert code == 0, err
    code, _, err = cli_run("explain", str(root), "--format", "html", "-o", str(tmp_path / "e.html"))
    assert code == 0, err
    html = (tmp_path / "e.html").read_text()
    vit_us = f"{records['vit']['roofline']['serial_s'] * 1e6:.3g} µs"
    mlp_us = f"{records['mlp']['roofline']['serial_s'] * 1e6:.3g} µs"
    for text in (term, md, html):
        assert "not a prediction" in text and "--profile" not in text
        assert vit_us in text and mlp_us in text
        assert "Triton" in text and "__cudnn$convBiasActivationForward" in text
    # Markdown: one row per figure, one column per mode, lowest bound first.
    rows = {line.split("|")[1].strip(): [c.strip() for c in line.split("|")[2:-1]]
            for line in md.splitlines() if line.startswith("| ")}
    modes = rows[""]
    lowest = min(records, key=lambda m: records[m]["roofline"]["serial_s"])
    assert modes[0] == lowest and set(modes) == set(records)
    column = {m: i for i, m in enumerate(modes)}
    assert rows[ROOFLINE_LABEL][column["vit"]] == vit_us
    assert rows["generated kernels (thunks)"][column["vit"]] == "166"
    assert rows["cuBLAS/cuDNN calls (thunks)"][column["vit"]] == "2"
    assert rows["copies (thunks)"][column["vit"]] == "13"
    assert rows["Triton fusions"][column["vit"]] == "47"
    assert rows["generated kernels (thunks)"][column["mlp"]] == "24"
    assert rows["vs lowest bound"][column[lowest]] == "1.00x"


@pytest.mark.parametrize("key, value, words", [
    ("kernel_launches", 166.5, "'kernels.kernel_launches' is float 166.5, expected an integer"),
    ("copies", True, "'kernels.copies' is bool True, expected an integer"),
])
def test_a_thunk_count_that_is_not_an_integer_is_named(cli_run, compiled_comparison, key, value, words):
    """The thunk counts are counts: a hand-edited run.json with a fraction or a boolean there is one line naming the
    file and the field, not a count shown as 166.5."""
    root, _ = compiled_comparison
    run_json = root / "vit" / "run.json"
    record = json.loads(run_json.read_text())
    record["kernels"][key] = value
    run_json.write_text(json.dumps(record))
    code, _, err = cli_run("explain", str(root))
    assert code == 2
    assert err.splitlines() == [f"hloscope: error: {run_json}: not a valid run.json: {words}"]
