"""`hloscope replay PATH`: run a captured train-step program alone through jaxlib's XLA and time it."""

from __future__ import annotations

import json
from pathlib import Path

import click

from hloscope.api import replay, replays
from hloscope.cli.options import PROFILE_STEPS, SEED, STEPS, WARMUP
from hloscope.errors import one_line
from hloscope.render.replay_text import render_text
from hloscope.render.run_tables import replay_summary_line
from hloscope.runs.rundir import COMPARISON_FILE, RUN_FILE


@click.command("replay")
@click.argument("path", type=click.Path(path_type=str))
@click.option("--device", type=click.Choice(["cpu", "cuda"]), default="cpu", show_default=True)
@click.option("--steps", type=STEPS, default=50, show_default=True, help="timed executions")
@click.option("--warmup", type=WARMUP, default=10, show_default=True, help="untimed executions first (the first compiles)")
@click.option("--profile", is_flag=True, help="also write an xplane of the replay beside the run's own")
@click.option("--profile-steps", type=PROFILE_STEPS, default=6, show_default=True)
@click.option("--seed", type=SEED, default=0, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="print the replay record as JSON")
def command(path: str, device: str, steps: int, warmup: int, profile: bool, profile_steps: int, seed: int,
            as_json: bool) -> None:
    """Replay PATH (a run directory made with --dump-hlo, a comparison directory: each XLA mode's run in turn, or an
    HLO / StableHLO module file) with jaxlib's XLA on one device, timed as `run` times a step; writes replay.json (a
    new name if one exists) in the run directory."""
    folder = Path(path)
    if folder.is_dir() and not (folder / RUN_FILE).exists() and (folder / COMPARISON_FILE).exists():
        _comparison(folder, device, steps, warmup, profile, as_json)
        return

    record = replay(path, device=device, steps=steps, warmup=warmup, profile=profile, profile_steps=profile_steps,
                    seed=seed, on_skip=lambda line: click.echo(f"hloscope replay: {line}", err=True))
    if as_json:
        click.echo(json.dumps(record.to_dict(), indent=1, default=str))
    else:
        click.echo(render_text(record))
    if record.status == "not_replayable":
        raise SystemExit(1)


def _comparison(folder, device: str, steps: int, warmup: int, profile: bool, as_json: bool) -> None:
    """A comparison directory: each XLA mode's run replayed in its own subprocess, one line each as it ends. A mode
    whose run the replay refused as bad input (a damaged or hostile file, named) is one line on stderr instead, the
    others are replayed and written all the same, and the exit code is then 2 (as for a run directory refused alone);
    else 1 when no replay succeeded, 0 otherwise."""
    done = replays(folder, device, steps, warmup, profile, on_done=lambda mode, replay: _told(mode, replay, as_json))
    if as_json:
        click.echo(json.dumps(done, indent=1))
    if any(replay.get("refused") for replay in done):
        raise SystemExit(2)
    if not any(replay["status"] in ("ok", "partial") for replay in done):
        raise SystemExit(1)


def _told(mode: str, replay: dict, as_json: bool) -> None:
    if replay.get("refused"):  # bad input: the one line naming the file, on stderr, as a refusal always is
        click.echo(f"hloscope: error: {one_line(str(replay.get('error')))}", err=True)
    elif not as_json:
        click.echo(replay_summary_line(mode, replay))
