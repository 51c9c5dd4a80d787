"""Round three, engineer C's part (docs/reliability.md): option values checked before any work (hloscope/cli/options.py),
`-o -` as stdout for every -o, a symlink loop at an artifact, a damaged StableHLO / HLO module given to replay, and a
negative measured overhead reported as an anomaly."""

from __future__ import annotations

import pytest
from helpers import assert_refused, first_good_hlo, good_run, hloscope, needs_fixtures

# ----------------------------------------------------------------------------------- a symlink loop at an artifact


@needs_fixtures
@pytest.mark.parametrize("command", [("explain",), ("hlo", "stats"), ("diff",)], ids=" ".join)
def test_symlink_loop_at_an_artifact_is_one_line(command, tmp_path):
    run = good_run(tmp_path / "runs")
    hlo = next((run / "hlo").glob("*after_optimizations.txt"))
    hlo.unlink()
    hlo.symlink_to(hlo.name)  # a link to itself
    args = (*command, run, first_good_hlo(), "--no-xla-cost") if command == ("diff",) else (*command, run)
    assert_refused(hloscope(*args, timeout=120), hlo, words=("symlink loop",))
