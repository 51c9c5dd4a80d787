"""The calibration record (`calibration.json` in a `calibrate-<UTC>` directory, beside its comparison.json) as typed
data: what `hloscope calibrate` concluded about this machine at one mode's settings. explain/calibration.py builds
it from explain's report; `write_calibration` writes it (never over a file) and `load_calibration` reads it back,
validated.

Versioned with run.json and comparison.json (records.SCHEMA_VERSION). Units follow docs/api.md: durations and gaps
in seconds (fields ending in `_s`; a gap is signed, the others are never negative).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import msgspec
from msgspec import UNSET, UnsetType

from hloscope.runs.records import SCHEMA_VERSION, Count, Seconds, convert_section
from hloscope.runs.rundir import load_record, write_json_atomic
from hloscope.typed import Record

# A signed figure as recorded (a gap, a ratio): finite, and within what a step time can be.
Signed = Annotated[int, msgspec.Meta(gt=-(10**9), lt=10**9)] | Annotated[float, msgspec.Meta(gt=-1e9, lt=1e9)]

KIND = "calibration"
CALIBRATION_FILE = "calibration.json"
_WHAT = "calibration record"


class Calibration(Record, frozen=True, kw_only=True):
    """calibrate's conclusion (explain/calibration.py says how each figure is found). The A/A pair is A' (the same
    options again) against A; the delayed configuration is A with `delay_s` slept on the host before every step."""

    schema_version: int = SCHEMA_VERSION
    kind: str = KIND
    mode: str
    processes: Count  # per configuration
    baseline_step_s: Seconds | None
    resolvable_gap_s: Seconds | None  # the smallest gap this machine resolves here; None: unmeasured
    resolvable_gap_relative: Signed | None
    identical_verdict: str | None  # explain's verdict on A' against A
    identical_gap_s: Signed | None
    identical_gap_ci_s: list[Signed] | None
    identical_called_different: bool
    delay_s: Seconds  # asked for
    delay_slept_s: Seconds | None  # the median sleep the delayed runs measured; None: not recorded
    delay_verdict: str | None
    delay_gap_s: Signed | None
    delay_gap_ci_s: list[Signed] | None
    delay_found_s: Seconds  # the significant host-side parts of the delayed run's ledger, summed
    delay_node: str | None  # the host-side node most of it landed in
    delay_nodes: dict[str, Seconds] = msgspec.field(default_factory=dict)  # every significant host-side node -> seconds
    delay_found: bool = False  # a significant gap, and host-side parts that add up to the delay
    trustworthy: bool = False  # the A/A pair was no difference and the delay was found
    notes: list[str] = msgspec.field(default_factory=list)
    # the calibrate-<UTC> directory the record sits in (set by calibrate and load_calibration; not in the JSON)
    dir: str | UnsetType = UNSET

    def to_dict(self) -> dict[str, Any]:
        """The JSON document calibration.json holds and `calibrate --json` prints."""
        document = super().to_dict()
        document.pop("dir", None)
        return document


def write_calibration(record: Calibration, directory: Path) -> Calibration:
    """calibration.json in `directory`, never over an existing file; the record with `dir` set to `directory`.
    OutputError naming the file when it cannot be written or one is there already."""
    write_json_atomic(directory / CALIBRATION_FILE, record.to_dict(), replace=False)
    return msgspec.structs.replace(record, dir=str(directory))


def load_calibration(path: Path) -> Calibration:
    """Read and validate calibration.json (`path`: the file or its directory): a JSON object of kind calibration
    and a known schema version, each field of its type. InputError naming the file and the field otherwise."""
    file = path / CALIBRATION_FILE if path.is_dir() else path
    document = load_record(file, _WHAT, KIND, None, {})
    record = convert_section(file, document, Calibration, "", _WHAT)
    return msgspec.structs.replace(record, dir=str(file.parent))
