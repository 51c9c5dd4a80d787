"""A rich progress bar over files on stderr, for the per-file work of `trace stats` and `trace export`
(hloscope.trace.job.run_per_file reports to it)."""

from __future__ import annotations

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeRemainingColumn


class FileProgressBar:
    """Shown only while files are read (transient); `completed` counts what has arrived, resumed files included."""

    def __init__(self, console: Console | None = None):
        self._bar = Progress(TextColumn("[progress.description]{task.description}"), BarColumn(), MofNCompleteColumn(),
                             TimeRemainingColumn(), console=console or Console(stderr=True), transient=True)
        self._task: TaskID | None = None

    def start(self, total: int, completed: int, label: str) -> None:
        self._task = self._bar.add_task(label, total=total, completed=completed)
        self._bar.start()

    def advance(self) -> None:
        if self._task is not None:
            self._bar.advance(self._task)

    def stop(self) -> None:
        self._bar.stop()

    @property
    def completed(self) -> int:
        return 0 if self._task is None else int(self._bar.tasks[0].completed)
