"""Each reading command's `--json` on real files, byte for byte against the output recorded in tests/data/json_outputs:
what a user's scripts read from hloscope never changes unnoticed. A change that is meant (a defect fixed, a field
added) records the new output with `HLOSCOPE_RECORD_OUTPUTS=1 pytest tests/test_json_outputs.py` and says in its commit
which output changed and why. Paths are written relative to the fixtures and the repository, so that the outputs do
not depend on where either lives."""

from __future__ import annotations

import os

import pytest
from helpers import FIXTURES, REPO, fixture

OUTPUTS = REPO / "tests" / "data" / "json_outputs"
RECORD_ENV = "HLOSCOPE_RECORD_OUTPUTS"

# name -> the command's arguments; a fixture is named by its fixtures-relative path, a repository file by "repo:PATH"
COMMANDS = {
    "hlo_stats_kernel_reuse": ("hlo", "stats", "--json", "openxla_xla/gpu_tests/kernel_reuse.hlo"),
    "hlo_stats_gpu_dump": ("hlo", "stats", "--json", "gpu_aot/mlp_sm90_triton"),
    "trace_stats_kineto": ("trace", "stats", "--json",
                           "hta/critical_path__alexnet__benchmark_result_2869224_1695835535_trace.json.gz"),
    "trace_stats_xplane": ("trace", "stats", "--json",
                           "tracelens/test_data_jax_te_fused_attn_categorization__934987a2fc2f.xplane.pb"),
    "diff_sm90_against_sm80": ("diff", "--json", "gpu_aot/vit_base_sm90_cublas", "gpu_aot/vit_base_sm80_cublas"),
    "explain_recorded_comparison": ("explain", "--json", "repo:tests/data/records/compare-vit-tiny"),
}


def _argument(text: str) -> str:
    if text.startswith("repo:"):
        return str(REPO / text.removeprefix("repo:"))
    return str(fixture(text)) if "/" in text else text


def _portable(output: str) -> str:
    """The output with the fixtures' and the repository's locations as <fixtures> and <repo>."""
    for root, name in ((FIXTURES, "<fixtures>"), (REPO / "tests" / "data" / "fetched", "<fixtures>"), (REPO, "<repo>")):
        output = output.replace(str(root.resolve()), name).replace(str(root), name)
    return output


@pytest.mark.parametrize("name", COMMANDS)
def test_json_output_is_the_recorded_one(name, cli_run):
    code, stdout, stderr = cli_run(*map(_argument, COMMANDS[name]))
    assert code == 0, stderr
    output = _portable(stdout)
    recorded = OUTPUTS / f"{name}.json"
    if os.environ.get(RECORD_ENV) == "1":
        OUTPUTS.mkdir(exist_ok=True)
        recorded.write_text(output, encoding="utf-8")
    assert recorded.is_file(), f"no recorded output {recorded}: record it with {RECORD_ENV}=1"
    assert output == recorded.read_text(encoding="utf-8"), f"{' '.join(COMMANDS[name])}: --json changed"
