"""Typed access to the optional parts of a run record (run.json) that the analyses read.

`rundir.load_run` checks what every run.json must have; the sections read here (timing, config, environment,
compiles) are optional and may be absent or null. A value of the wrong type (a hand-edited or foreign run.json) is an
InputError naming the file and the field, so that it never becomes a crash inside an analysis or a renderer.
"""

from __future__ import annotations

from pathlib import Path

from hloscope.errors import InputError


class RunFields:
    def __init__(self, run: dict, path: str | Path | None = None):
        self.run = run
        self.path = Path(path) if path is not None else Path(run.get("_dir", ".")) / "run.json"

    def _wrong(self, where: str, value, expected: str) -> InputError:
        return InputError(self.path, f"not a valid run.json: '{where}' is {type(value).__name__} {value!r:.40}, "
                                     f"expected {expected}")

    def section(self, name: str) -> dict:
        value = self.run.get(name)
        if value is not None and not isinstance(value, dict):
            raise self._wrong(name, value, "an object")
        return value or {}

    def number(self, name: str, key: str) -> float | None:
        value = self.section(name).get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
            raise self._wrong(f"{name}.{key}", value, "a number")
        return value

    def count(self, name: str, key: str) -> int | None:
        value = self.section(name).get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
            raise self._wrong(f"{name}.{key}", value, "an integer")
        return value

    def numbers(self, name: str, key: str) -> list[float]:
        value = self.section(name).get(key)
        if value is None:
            return []
        if not isinstance(value, list) or any(isinstance(v, bool) or not isinstance(v, (int, float)) for v in value):
            raise self._wrong(f"{name}.{key}", value, "a list of numbers")
        return list(value)

    def text(self, name: str, key: str) -> str | None:
        value = self.section(name).get(key)
        if value is not None and not isinstance(value, str):
            raise self._wrong(f"{name}.{key}", value, "a string")
        return value
