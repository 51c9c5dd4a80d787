"""`--max-batch`: the largest batch whose compiled train step fits the target GPU's memory, found by compiling only.

The search starts from the run's own compile at --batch-size. While the batch fits, it doubles it until one does not
fit; when --batch-size itself does not fit, it halves it until one fits (down to batch 1). Then it bisects between the
largest batch that fitted and the smallest that did not, until they are neighbours. "Fits" is the step's peak (XLA's
memory analysis, hloscope/targets/device_memory.py) at most the memory an XLA program may use on the target
(device_memory.ALLOCATOR_FRACTION of the device's). Every compile is recorded (batch, peak, fits, seconds), so the
answer can be checked against the figures it rests on.

The search assumes the peak grows with the batch. It does from a few dozen images on (activations dominate), but
not always below: XLA picks Triton or cuBLAS GEMMs by shape, and a cuBLAS workspace (4 MiB) can make a small batch
need more than a larger one (vit-tiny on an H100: batch 8 compiled with Triton GEMMs and needed less than half of
batch 4's peak). Where the compiles show a larger batch needing less, the message says so, and that batches the
search skipped may fit or not whatever their neighbours did.

Bounds: at most `max_compiles` compiles (--max-batch-compiles) and SEARCH_TIME_S seconds; a search cut short by
either says how far it got ("at least N").
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from hloscope.backends.base import MAX_BATCH_COMPILES

DEFAULT_MAX_COMPILES = MAX_BATCH_COMPILES
SEARCH_TIME_S = 3600.0     # a compile takes 5-60 s on a CPU (vit-tiny: ~10 s); a torch_xla capture runs real steps
GROWTH = 2

Point = dict[str, Any]


def search_max_batch(first: Point, try_batch: Callable[[int], Point], usable_bytes: int, max_compiles: int,
                     time_budget_s: float = SEARCH_TIME_S, on_point: Callable[[Point], None] | None = None,
                     clock: Callable[[], float] = time.monotonic) -> dict[str, Any]:
    """Search from `first` (the compile at the run's batch size: batch_size, status, peak_bytes, fits) with
    `try_batch(batch) -> point` compiling one more; returns run.json's `max_batch`."""
    started = clock()
    points: list[Point] = [first]
    stopped_by: str | None = None

    def probe(batch: int) -> Point | None:
        nonlocal stopped_by
        if len(points) >= max_compiles:
            stopped_by = "compiles"
            return None
        if clock() - started > time_budget_s:
            stopped_by = "time"
            return None
        point = try_batch(batch)
        points.append(point)
        if on_point is not None:
            on_point(point)
        if point.get("fits") is None:
            stopped_by = "failure"
            return None
        return point

    lowest_fit: int | None = None   # the largest batch known to fit
    highest_miss: int | None = None  # the smallest batch known not to fit
    if first.get("fits") is None:
        stopped_by = "failure"
    elif first["fits"]:
        lowest_fit = first["batch_size"]
        while stopped_by is None and highest_miss is None:
            point = probe(lowest_fit * GROWTH)
            if point is not None:
                lowest_fit, highest_miss = ((point["batch_size"], None) if point["fits"]
                                            else (lowest_fit, point["batch_size"]))
    else:
        highest_miss = first["batch_size"]
        while stopped_by is None and lowest_fit is None and highest_miss > 1:
            point = probe(max(1, highest_miss // GROWTH))
            if point is not None:
                lowest_fit, highest_miss = ((point["batch_size"], highest_miss) if point["fits"]
                                            else (None, point["batch_size"]))
    while (stopped_by is None and lowest_fit is not None and highest_miss is not None
           and highest_miss - lowest_fit > 1):
        point = probe((lowest_fit + highest_miss) // 2)
        if point is not None:
            if point["fits"]:
                lowest_fit = point["batch_size"]
            else:
                highest_miss = point["batch_size"]
    exact = lowest_fit is not None and highest_miss == lowest_fit + 1
    return {"batch_size": lowest_fit, "exact": exact, "at_least": lowest_fit is not None and not exact,
            "smallest_not_fitting": highest_miss, "usable_bytes": usable_bytes, "max_compiles": max_compiles,
            "time_budget_s": time_budget_s, "stopped_by": None if exact else stopped_by,
            "message": _message(lowest_fit, highest_miss, exact, stopped_by, points, usable_bytes, max_compiles,
                                time_budget_s),
            "search_s": round(clock() - started, 3), "compiles": points}


def _mib(n_bytes: int | None) -> str:
    return "?" if n_bytes is None else f"{n_bytes / 2**20:,.1f} MiB"


def peak_inversion(points: list[Point]) -> tuple[Point, Point] | None:
    """Two compiles in which the larger batch needed less memory (smaller, larger), the widest such drop; None where
    the peaks grew with the batch."""
    measured = sorted((p for p in points if p.get("peak_bytes") is not None), key=lambda p: p["batch_size"])
    found: tuple[Point, Point] | None = None
    for index, larger in enumerate(measured):
        for smaller in measured[:index]:
            if (smaller["batch_size"] < larger["batch_size"] and larger["peak_bytes"] < smaller["peak_bytes"]
                    and (found is None or smaller["peak_bytes"] - larger["peak_bytes"]
                         > found[0]["peak_bytes"] - found[1]["peak_bytes"])):
                found = (smaller, larger)
    return found


def _message(fit: int | None, miss: int | None, exact: bool, stopped_by: str | None, points: list[Point],
             usable: int, max_compiles: int, budget_s: float) -> str:
    message = _answer(fit, miss, exact, stopped_by, points, usable, max_compiles, budget_s)
    inversion = peak_inversion(points)
    if inversion is None:
        return message
    smaller, larger = inversion
    return (f"{message}; the peak does not grow with the batch here (batch {larger['batch_size']} needs "
            f"{_mib(larger['peak_bytes'])}, batch {smaller['batch_size']} {_mib(smaller['peak_bytes'])}: XLA chose "
            "other kernels), so batches not compiled may fit or not whatever their neighbours did")


def _answer(fit: int | None, miss: int | None, exact: bool, stopped_by: str | None, points: list[Point],
            usable: int, max_compiles: int, budget_s: float) -> str:
    peak_of = {p["batch_size"]: p.get("peak_bytes") for p in points}
    why = {"compiles": f"the search stopped at its bound of {max_compiles} compiles",
           "time": f"the search stopped at its time bound of {budget_s:.0f} s",
           "failure": "the search stopped: " + next((f"batch {p['batch_size']} failed to compile: "
                                                     f"{p.get('error') or 'no memory analysis'}"
                                                     for p in points if p.get("fits") is None), "")}.get(
        stopped_by or "", "")
    if exact and fit is not None and miss is not None:
        return (f"{fit} (batch {miss} needs {_mib(peak_of.get(miss))} > {_mib(usable)} usable; batch {fit} needs "
                f"{_mib(peak_of.get(fit))})")
    if fit is None and miss == 1:
        return f"none: even batch 1 needs {_mib(peak_of.get(1))}, more than the {_mib(usable)} usable"
    if fit is None:
        return f"not found: {why}"
    if miss is None:
        return f"at least {fit}: batch {fit} still fits ({_mib(peak_of.get(fit))} of {_mib(usable)}); {why}"
    return f"at least {fit}, below {miss}: {why}"
