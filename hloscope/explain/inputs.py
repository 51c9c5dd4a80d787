"""Find the modes of a comparison directory (or any folder of run directories) and summarise each one."""

from __future__ import annotations

import os
from pathlib import Path

from hloscope.errors import HloscopeError, InputError, UsageError
from hloscope.explain.collect import summarize_run
from hloscope.explain.replicates import group_processes
from hloscope.explain.summary import ModeSummary
from hloscope.modes import run_label
from hloscope.runs.audit import recorded_mismatch_lines
from hloscope.runs.rundir import COMPARISON_FILE, comparison_run_dir, find_runs, load_comparison


def load_summaries(path: str | Path) -> tuple[list[ModeSummary], dict]:
    """(one summary per mode, comparison metadata {path, id, config}) for a comparison or a folder of runs."""
    path = Path(path)
    meta: dict = {"path": str(path)}
    if path.is_dir() and os.path.lexists(path / COMPARISON_FILE):  # a FIFO, folder or loop there is refused, named
        comparison = load_comparison(path)
        # the report lists the comparison's settings as recorded (every key, in the file's order)
        meta.update(id=comparison.comparison_id, config=comparison.to_dict().get("config") or {})
        mismatches = recorded_mismatch_lines(comparison.audit)
        if mismatches:  # compare's fairness audit: the modes did not run the same settings (explain lists them first)
            meta["audit_mismatches"] = mismatches
        if not comparison.modes:
            raise InputError(path / COMPARISON_FILE, "lists no modes: nothing to explain")
        by_devices = isinstance(comparison.config.devices, list)  # compare --devices 1,2,4
        summaries = []
        for entry in comparison.modes:
            run_dir, mode = path / entry.dir, entry.mode or entry.dir
            devices, status = entry.devices, entry.status
            try:
                comparison_run_dir(path, entry.dir)  # a link (out of the comparison) is never read: unreadable
                linked = None
            except InputError as error:
                linked = error
            if linked is not None:
                summary = ModeSummary(mode=mode, status="unreadable", notes=[str(linked)], run_dirs=[str(run_dir)])
            elif os.path.lexists(run_dir) or status not in _NEVER_WROTE:
                summary = _summarize(run_dir, mode)  # anything in its place, or missing though it ran: unreadable
            else:
                reason = entry.error or "no run directory was written"
                summary = ModeSummary(mode=mode, status=status or "failed", notes=[reason], run_mode=mode,
                                      devices=devices)
            if by_devices:  # one run per mode and device count: tell them apart by the count
                summary.mode = run_label(mode, summary.devices if summary.devices is not None else devices)
            elif entry.variant is not None:  # one of several configurations of a mode (calibrate)
                summary.mode = mode
            summaries.append(summary)
        return group_processes(summaries), meta
    runs = find_runs(path)
    summaries = [_summarize(run_dir, run_dir.name) for run_dir in runs]
    modes = [s.mode for s in summaries]
    for summary, run_dir in zip(summaries, runs):
        if modes.count(summary.mode) > 1:  # several runs of one mode: tell them apart by their path under `path`
            where = run_dir.relative_to(path).as_posix() if run_dir.is_relative_to(path) else run_dir.name
            summary.mode = f"{summary.mode} ({where})"
    return summaries, meta


def load_many(paths: list[Path]) -> tuple[list[ModeSummary], dict]:
    """Summaries of every run under each path (comparison directories, run directories, folders of runs), labelled so
    that no two runs share a name: the mode, then its directory where the mode repeats."""
    summaries, sources, mismatches = [], [], []
    for path in paths:
        found, meta = load_summaries(path)
        summaries += found
        sources += [path] * len(found)
        mismatches += [f"{path.name}: {line}" for line in meta.get("audit_mismatches", [])]
    labels = [s.mode for s in summaries]
    for summary, path in zip(summaries, sources):
        if labels.count(summary.mode) > 1 and len(paths) > 1:
            summary.mode = f"{summary.mode} ({path.name})"
    seen: dict[str, int] = {}
    for summary in summaries:  # the same directory given twice, or two comparisons with the same folder names
        seen[summary.mode] = seen.get(summary.mode, 0) + 1
        if seen[summary.mode] > 1:
            summary.mode = f"{summary.mode} #{seen[summary.mode]}"
    if len(paths) == 1:
        return summaries, meta
    meta = {"path": ", ".join(str(p) for p in paths), "paths": [str(p) for p in paths]}
    if mismatches:
        meta["audit_mismatches"] = mismatches
    return summaries, meta


def latest_comparison(root: Path) -> Path:
    """The comparison directory under `root` whose comparison.json was written last."""
    found = list(root.glob(f"*/{COMPARISON_FILE}")) if root.is_dir() else []
    if not found:
        raise UsageError(f"no comparison under {root}/: run `hloscope compare` first, or name a comparison directory")
    return max(found, key=lambda file: file.stat().st_mtime).parent


# Statuses compare records for a mode that may have ended before its run directory was written.
_NEVER_WROTE = ("failed", "interrupted", "refused", "skipped", None)


def _summarize(run_dir: Path, mode: str) -> ModeSummary:
    try:
        if not os.path.lexists(run_dir):
            raise InputError(run_dir, "missing: comparison.json lists this run directory but it is not there")
        if not run_dir.is_dir():
            raise InputError(run_dir, "not a directory (a run directory holding run.json was expected)")
        summary = summarize_run(run_dir)
        summary.run_dirs = [str(run_dir)]
        return summary
    except HloscopeError as error:  # one broken run never hides the others
        return ModeSummary(mode=mode, status="unreadable", notes=[str(error)], run_dirs=[str(run_dir)])
