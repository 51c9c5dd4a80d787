"""The one base of hloscope's typed results and records (hlo stats' modules, trace records, the diff report, the
replay and calibration records, explain's replay split): a frozen msgspec Struct whose `to_dict()` is its JSON."""

from __future__ import annotations

from typing import Any

import msgspec


class Record(msgspec.Struct, frozen=True, kw_only=True):
    """Fields in the JSON's key order; a field a record does not hold is UNSET and left out of `to_dict()`."""

    def to_dict(self) -> dict[str, Any]:
        """The JSON object: keys in field order, UNSET fields left out."""
        document: dict[str, Any] = msgspec.to_builtins(self)
        return document
