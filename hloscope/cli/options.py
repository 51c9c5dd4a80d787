"""Checked option types shared by every command (run, compare, replay, explain, diff): the one place for their bounds.

Click refuses a value outside them before the command does anything (no directory made, no work started), in its usual
usage error. The bounds are sane limits, not hardware ones (docs/run.md, "Option bounds"); a NaN or infinite float is
refused everywhere (click.FloatRange lets NaN through, since NaN compares false with every bound).
"""

from __future__ import annotations

import math
from typing import Any

import click

MAX_SEED = 2**32 - 1  # numpy's, torch's and JAX's generators all take a seed up to 2**32 - 1
MAX_STEPS = 100_000
MAX_WARMUP = 10_000
MAX_PROFILE_STEPS = 1_000
MAX_BATCH_SIZE = 65_536
MAX_SEQ_LEN = 131_072
MAX_TOP_ROWS = 1_000  # rows of a "top N" table (hlo stats, trace stats)
MAX_SOURCE_DEPTH = 256  # path components of an op_name kept (hlo stats --source-depth)


class FiniteFloatRange(click.FloatRange):
    """click.FloatRange that also refuses NaN and +-inf."""

    name = "finite float range"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        number = click.FLOAT.convert(value, param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number.", param, ctx)
        return super().convert(number, param, ctx)


SEED = click.IntRange(0, MAX_SEED)
STEPS = click.IntRange(1, MAX_STEPS)
WARMUP = click.IntRange(1, MAX_WARMUP)
PROFILE_STEPS = click.IntRange(1, MAX_PROFILE_STEPS)
BATCH_SIZE = click.IntRange(1, MAX_BATCH_SIZE)
SEQ_LEN = click.IntRange(2, MAX_SEQ_LEN)
TOP_ROWS = click.IntRange(1, MAX_TOP_ROWS)
SOURCE_DEPTHS = click.IntRange(1, MAX_SOURCE_DEPTH)
TIMEOUT_S = FiniteFloatRange(min=1)
