"""The XLA flags of a run: `--xla-flags` (run, compare), what it does to the run process's XLA_FLAGS, and the flags a
recorded run was made with, so that explain --test-hypotheses can run one configuration with another's flags.

`--xla-flags TEXT` replaces the XLA_FLAGS the run process inherited: the run's XLA flags are exactly TEXT (`""`: none),
whatever the shell exported, so that a run can be made again from its record alone. Without the option the inherited
XLA_FLAGS is kept, as before. Either way hloscope then adds its own flags where a run needs them (`--dump-hlo` for
torch_xla, `--devices N` on a CPU host), and run.json records the option in `config.xla_flags` (null: not given) and
the value in effect after the mode's setup in `environment.env.XLA_FLAGS`. The flags a recorded run requested leave
out hloscope's additions: its dump flags, and the host-platform device count where `--devices N` set it (a device
count the user exported stays, so that the re-run runs on the same devices).

A value is whitespace-separated `--name` or `--name=value` tokens of printable ASCII: the value reaches the child
process as one argument (`--xla-flags=TEXT`, no shell) and its environment, never anything that parses it further.
"""

from __future__ import annotations

import os
import re
import sys

# One XLA flag: `--name` or `--name=value`, the value printable ASCII without spaces (XLA_FLAGS splits on spaces).
_FLAG = re.compile(r"--[A-Za-z0-9_][A-Za-z0-9_.-]*(=[\x21-\x7e]*)?")
# A sane bound on the text (XLA has a few hundred flags; a value this long is not a list of them).
MAX_CHARS = 16384
# Flags hloscope adds for itself (and XLA's default that torch_xla adds on import): not part of what a run requested,
# and set again by the run that repeats it. Prefixes: `--xla_dump_to=...`, `--xla_dump_hlo_as_text`, ...
HLOSCOPE_OWN_FLAGS = ("--xla_dump", "--xla_cpu_enable_fast_math=false")
# The host-platform device count, set by `--devices N` (backends/devices.py); hloscope's own only where the record's
# config.devices is N. Defined here, the lower layer, so that both may use it.
HOST_DEVICE_COUNT_FLAG = "--xla_force_host_platform_device_count"


def check(text: str) -> str:
    """`text` with its flags separated by single spaces; ValueError (its message says what is wrong) when it is not a
    string of XLA flags."""
    if not isinstance(text, str):
        raise ValueError(f"XLA flags must be text, got {type(text).__name__}")
    if len(text) > MAX_CHARS:
        raise ValueError(f"XLA flags of {len(text)} characters: more than {MAX_CHARS}")
    tokens = text.split()
    bad = next((token for token in tokens if not _FLAG.fullmatch(token)), None)
    if bad is not None:
        shown = bad if len(bad) <= 60 else bad[:57] + "..."
        raise ValueError(f"{shown!r} is not an XLA flag (--name or --name=value, printable ASCII)")
    return " ".join(tokens)


def apply(flags: str | None) -> None:
    """In the run process, before any framework starts: XLA_FLAGS becomes `flags` (None: the inherited value stays;
    "": XLA_FLAGS is removed)."""
    if flags is None:
        return
    if flags:
        os.environ["XLA_FLAGS"] = flags
    else:
        os.environ.pop("XLA_FLAGS", None)
    # jax's persistent compile cache keys a program on every command-line argument that starts with --xla, as absl
    # passes XLA flags. The option's own arguments (its value is now XLA_FLAGS, which the key holds) made a run given
    # `--xla-flags=F`, `--xla-flags F` or XLA_FLAGS=F miss the programs the others cached.
    sys.argv[1:] = [argument for argument in sys.argv[1:] if not argument.startswith("--xla")]


def requested(flags_in_effect: str, devices: object = None) -> str:
    """The flags a run asked for, from the XLA_FLAGS it recorded: hloscope's own additions removed. The host-platform
    device count is hloscope's only where `--devices N` (`devices`, the record's config.devices) set it: N > 1 and the
    flag's value N; otherwise a user exported it, and it stays (a re-run without it runs on another device count)."""
    return " ".join(f for f in flags_in_effect.split()
                    if not f.startswith(HLOSCOPE_OWN_FLAGS) and not _added_device_count(f, devices))


def _added_device_count(flag: str, devices: object) -> bool:
    """Whether `flag` is the host-platform device count that `--devices` (hloscope.backends.devices) set."""
    name, _, value = flag.partition("=")
    if name != HOST_DEVICE_COUNT_FLAG:
        return False
    return isinstance(devices, int) and not isinstance(devices, bool) and devices > 1 and value == str(devices)


def recorded(record: dict) -> str | None:
    """The XLA flags a run was made with, from its run.json (a dict): `config.xla_flags` when the option was given,
    else the XLA_FLAGS it recorded in effect, less hloscope's own flags ("" when it recorded none); None when the
    record has no environment to tell. ValueError when the recorded value is not a string of XLA flags."""
    config = record.get("config")
    given = config.get("xla_flags") if isinstance(config, dict) else None
    if given is not None:
        return check(given)
    environment = record.get("environment")
    env = environment.get("env") if isinstance(environment, dict) else None
    if not isinstance(env, dict):
        return None
    value = env.get("XLA_FLAGS", "")
    return requested(check(value), config.get("devices") if isinstance(config, dict) else None)
