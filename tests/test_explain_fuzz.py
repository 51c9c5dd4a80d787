"""Property-based tests (hypothesis) of the run records explain reads (tests/test_trace_fuzz.py has the trace
readers', tests/test_hlo_fuzz.py the HLO parser's): a real run record whose values are replaced by values of other
types: `load_run` + explain's collector + explain + every renderer return or raise HloscopeError (this found the
wrong-typed-field crashes fixed in run_fields.py).

In-process and quick (a few hundred examples in seconds); each example writes one small file.
"""

from __future__ import annotations

import copy
import io
import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hloscope.errors import HloscopeError
from hloscope.explain.engine import explain
from hloscope.explain.inputs import load_summaries
from hloscope.render import explain_html, explain_md, explain_term
from hloscope.runs.rundir import load_run

FAST = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                          HealthCheck.too_slow])

# ------------------------------------------------------------------------------------------------- run records

RUN_RECORD = {
    "schema_version": 1, "run_id": "jax-1", "mode": "jax", "status": "ok", "error": None,
    "config": {"model": "vit-tiny", "batch_size": 8, "data": "device", "precision": "fp32", "steps": 3},
    "environment": {"platform": "cpu", "backend": "cpu", "precision": {"matmul_precision": "default"}},
    "timing": {"step_times_s": [0.002, 0.0021, 0.0019], "median_s": 0.002, "mean_s": 0.002, "p10_s": 0.0019,
               "p90_s": 0.0021, "first_step_s": 1.1, "throughput_img_s": 4000.0},
    "memory": {"peak_host_rss_bytes": 700_000_000}, "compiles": {"in_window": {"xla_compiles": 0}},
    "loss": {"first": 2.3, "last": 2.1}, "artifacts": [],
}
WEIRD_VALUES = st.sampled_from([None, "x", "1.5", -1, 0, 10**30, 1e308, float("nan"), [], {}, [None], ["x"], True,
                                {"a": 1}])


def _leaf_paths(value, path=()):
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _leaf_paths(item, (*path, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _leaf_paths(item, (*path, index))
    if path:
        yield path


LEAVES = sorted(_leaf_paths(RUN_RECORD), key=str)


@FAST
@given(changes=st.lists(st.tuples(st.sampled_from(LEAVES), WEIRD_VALUES), min_size=1, max_size=3))
def test_run_record_with_values_of_other_types_never_crashes_explain(tmp_path, changes):
    from rich.console import Console

    record = copy.deepcopy(RUN_RECORD)
    for path, value in changes:
        target = record
        try:
            for key in path[:-1]:
                target = target[key]
            target[path[-1]] = copy.deepcopy(value)  # sampled values are shared objects
        except (KeyError, IndexError, TypeError):  # an earlier change replaced a container on this path
            pass
    run = tmp_path / "runs" / "jax"
    run.mkdir(parents=True, exist_ok=True)
    (run / "run.json").write_text(json.dumps(record))
    summaries, meta = load_summaries(run.parent)  # a broken run is summarised as unreadable, never refused
    report = explain(summaries)
    report.comparison = meta
    try:
        json.dumps(report, default=str)
        explain_md.render(report)
        explain_html.render(report)
        explain_term.render(report, Console(file=io.StringIO(), width=120))
    except HloscopeError:
        pass
    (summary,) = summaries
    try:
        record = load_run(run)
    except HloscopeError:  # a record refused: the mode is unreadable, and what was wrong is said, naming the file
        assert summary.status == "unreadable"
        assert str(run / "run.json") in summary.notes[0]
    else:  # a record read: the mode is summarised from it
        assert summary.status != "unreadable"
        assert summary.mode == record.mode
