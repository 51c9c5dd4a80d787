"""Rich progress bars on stderr: over files, for the per-file work of `trace stats` and `trace export`
(hloscope.trace.job.run_per_file reports to it); over phases, for `tensorboard` converting a Kineto trace."""

from __future__ import annotations

from rich.console import Console
from rich.progress import (
    BarColumn,
    DownloadColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)


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


class PhaseProgressBar:
    """One step of a longer job at a time on stderr (transient), e.g. `hloscope tensorboard` converting a Kineto trace:
    a bar with the bytes read when the phase knows its total, else a spinner with the count so far."""

    def __init__(self, console: Console | None = None):
        self._console = console or Console(stderr=True)
        self._bar: Progress | None = None
        self._task: TaskID | None = None

    def phase(self, description: str, total: int | None) -> None:
        self.stop()
        columns = ([TextColumn("{task.description}"), BarColumn(), DownloadColumn(), TimeRemainingColumn()]
                   if total is not None else [SpinnerColumn(), TextColumn("{task.description}"),
                                              TextColumn("{task.completed:,.0f}"), TimeElapsedColumn()])
        self._bar = Progress(*columns, console=self._console, transient=True)
        self._task = self._bar.add_task(description, total=total)
        self._bar.start()

    def update(self, completed: int) -> None:
        if self._bar is not None and self._task is not None:
            self._bar.update(self._task, completed=completed)

    def stop(self) -> None:
        if self._bar is not None:
            self._bar.stop()
        self._bar, self._task = None, None
