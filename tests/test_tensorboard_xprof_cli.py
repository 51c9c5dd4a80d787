"""XProf's own command line (`xprof`, from the xprof package) on what hloscope writes: xplane sessions open directly,
a Kineto trace only once converted to XSpace (what `hloscope tensorboard` serves), and XProf writes its caches into the
session folder it reads when it reuses a conversion (docs/tensorboard.md, "XProf's command line")."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest
from helpers import command

from hloscope.tensorboard.convert import convert_kineto_file

STEPPED = "hta/ns_resolution_trace__rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz"  # ProfilerStep#101..105, A100
AMD_JAX_XPLANE = "tracelens/test_data_jax_te_fused_attn_categorization__934987a2fc2f.xplane.pb"


def xprof(*args: str) -> tuple[int, dict]:
    """Run `xprof ARGS` (the console script beside this Python) and decode the JSON document it prints first."""
    result = command(Path(sys.executable).parent / "xprof", *args, timeout=600)
    document, _ = json.JSONDecoder().raw_decode(result.stdout.lstrip())
    return result.code, document


def test_xprof_reads_an_xplane_session_and_a_run_folder(fixtures_dir, tmp_path):
    session = tmp_path / "jax" / "plugins" / "profile" / "2025_01_01_00_00_00"
    session.mkdir(parents=True)
    shutil.copy(fixtures_dir / AMD_JAX_XPLANE, session / "mi355.xplane.pb")
    code, overview = xprof("get_overview", f"--session_id={session}")
    assert code == 0 and overview["capture"]["files_used"] == ["mi355"]
    code, modules = xprof("list_hlo_modules", f"--session_id={tmp_path / 'jax'}")  # a run folder: its latest session
    assert code == 0 and modules["status"] == "SUCCESS"
    assert (session / "mi355.xplane.pb").read_bytes() == (fixtures_dir / AMD_JAX_XPLANE).read_bytes()


def test_xprof_reads_a_converted_kineto_trace_but_not_the_json(fixtures_dir, tmp_path):
    code, refused = xprof("get_overview", f"--session_id={fixtures_dir / STEPPED}")
    assert code != 0 and "No .xplane.pb or .xspace.pb files found" in json.dumps(refused)
    session = tmp_path / "pytorch" / "plugins" / "profile" / "cmp"
    convert_kineto_file(fixtures_dir / STEPPED, session)
    code, steps = xprof("get_step_trace", f"--session_id={session}")
    assert code == 0
    assert steps["total_records"] == 5, steps  # ProfilerStep#101..105
    code, kernels = xprof("get_kernel_stats", f"--session_id={session}")
    assert code == 0 and "kernel" in json.dumps(kernels).lower()


@pytest.mark.parametrize("command", ["get_overview", "get_step_trace"])
def test_xprof_on_a_missing_session_fails(tmp_path, command):
    code, document = xprof(command, f"--session_id={tmp_path / 'missing'}")
    assert code != 0 and document
