"""compare's terminal progress: whatever stops the comparison (Ctrl-C in the audit, a failed replay), the status
line and the progress bar stop drawing, so that the terminal gets its cursor and its output back."""

from __future__ import annotations

import io

from rich.console import Console

from hloscope.cli.compare import TerminalProgress


def test_close_stops_a_status_and_a_bar_left_running() -> None:
    progress = TerminalProgress(Console(file=io.StringIO(), force_terminal=True))
    progress.auditing("jax")  # the audit was setting jax up when it was stopped
    assert progress.status is not None
    status = progress.status
    progress.close()
    assert progress.status is None and not status._live.is_started
    progress.running(3)
    bar = progress.bar
    assert bar is not None and bar.live.is_started
    progress.close()
    assert progress.bar is None and not bar.live.is_started
    progress.close()  # twice is harmless


def test_a_replay_status_stops_when_the_replay_is_told_done() -> None:
    output = io.StringIO()
    progress = TerminalProgress(Console(file=output, force_terminal=True, width=200))
    progress.replay_started("jax")
    status = progress.status
    progress.replay_done("jax", {"status": "failed", "error": "it broke"})
    assert progress.status is None and status is not None and not status._live.is_started
