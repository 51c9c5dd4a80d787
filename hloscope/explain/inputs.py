"""Find the modes of a comparison directory (or any folder of run directories) and summarise each one."""

from __future__ import annotations

from pathlib import Path

from hloscope.errors import HloscopeError, UsageError
from hloscope.explain.collect import summarize_run
from hloscope.explain.summary import ModeSummary


def load_summaries(path: str | Path) -> tuple[list[ModeSummary], dict]:
    """(one summary per mode, comparison metadata {path, id, config}) for a comparison or a folder of runs."""
    from hloscope.rundir import COMPARISON_FILE, find_runs, load_comparison

    path = Path(path)
    meta: dict = {"path": str(path)}
    if path.is_dir() and (path / COMPARISON_FILE).is_file():
        comparison = load_comparison(path)
        meta.update(id=comparison.get("comparison_id"), config=comparison.get("config") or {})
        summaries = []
        for entry in comparison["modes"]:
            run_dir = path / entry["dir"]
            if (run_dir / "run.json").is_file():
                summaries.append(_summarize(run_dir, entry.get("mode", entry["dir"])))
            else:
                reason = entry.get("error") or "no run directory was written"
                summaries.append(ModeSummary(mode=entry.get("mode", entry["dir"]), status=entry.get("status") or "failed",
                                             notes=[str(reason)]))
        return summaries, meta
    runs = find_runs(path)
    summaries = [_summarize(run_dir, run_dir.name) for run_dir in runs]
    modes = [s.mode for s in summaries]
    for summary, run_dir in zip(summaries, runs):
        if modes.count(summary.mode) > 1:  # several runs of one mode: tell them apart by directory
            summary.mode = f"{summary.mode} ({run_dir.name})"
    return summaries, meta


def latest_comparison(root: Path) -> Path:
    """The comparison directory under `root` whose comparison.json was written last."""
    from hloscope.rundir import COMPARISON_FILE

    found = list(root.glob(f"*/{COMPARISON_FILE}")) if root.is_dir() else []
    if not found:
        raise UsageError(f"no comparison under {root}/: run `hloscope compare` first, or name a comparison directory")
    return max(found, key=lambda file: file.stat().st_mtime).parent


def _summarize(run_dir: Path, mode: str) -> ModeSummary:
    try:
        return summarize_run(run_dir)
    except HloscopeError as error:  # one broken run never hides the others
        return ModeSummary(mode=mode, status="unreadable", notes=[str(error)])
