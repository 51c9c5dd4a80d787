"""Checked option types shared by every command (run, compare, replay, explain, diff), from the bounds of limits.py.

Click refuses a value outside them before the command does anything (no directory made, no work started), in its usual
usage error. The bounds are sane limits, not hardware ones (docs/run.md, "Option bounds"); a NaN or infinite float is
refused everywhere (click.FloatRange lets NaN through, since NaN compares false with every bound).
"""

from __future__ import annotations

import math
from typing import Any

import click

from hloscope.limits import (
    MAX_BATCH_SIZE,
    MAX_HOST_DELAY_MS,
    MAX_MIN_GAP,
    MAX_PROFILE_STEPS,
    MAX_REPEATS,
    MAX_SEED,
    MAX_SEQ_LEN,
    MAX_SOURCE_DEPTH,
    MAX_STEPS,
    MAX_TOP_ROWS,
    MAX_WARMUP,
)
from hloscope.runs import xla_flags


class FiniteFloatRange(click.FloatRange):
    """click.FloatRange that also refuses NaN and +-inf."""

    name = "finite float range"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        number = click.FLOAT.convert(value, param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number.", param, ctx)
        return super().convert(number, param, ctx)


class XlaFlags(click.ParamType):
    """--xla-flags: whitespace-separated `--name[=value]` XLA flags (hloscope.runs.xla_flags.check)."""

    name = "XLA flags"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        try:
            return xla_flags.check(value)
        except ValueError as error:
            self.fail(str(error), param, ctx)


SEED = click.IntRange(0, MAX_SEED)
STEPS = click.IntRange(1, MAX_STEPS)
WARMUP = click.IntRange(1, MAX_WARMUP)
PROFILE_STEPS = click.IntRange(1, MAX_PROFILE_STEPS)
BATCH_SIZE = click.IntRange(1, MAX_BATCH_SIZE)
SEQ_LEN = click.IntRange(2, MAX_SEQ_LEN)
TOP_ROWS = click.IntRange(1, MAX_TOP_ROWS)
SOURCE_DEPTHS = click.IntRange(1, MAX_SOURCE_DEPTH)
REPEATS = click.IntRange(1, MAX_REPEATS)
TIMEOUT_S = FiniteFloatRange(min=1)
MIN_GAP = FiniteFloatRange(0, MAX_MIN_GAP)
HOST_DELAY_MS = FiniteFloatRange(0, MAX_HOST_DELAY_MS)
XLA_FLAGS = XlaFlags()
