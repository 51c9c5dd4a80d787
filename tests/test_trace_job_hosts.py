"""A TensorBoard log directory of several hosts' xplanes (`plugins/profile/<run>/<host>.xplane.pb`) read as
one job, a rank per host. Built from real xplanes (XProf's V100 multi-worker demo, TraceLens' two MI300X hosts) copied
under the host names such profiles carry, and checked host by host against `jax.profiler.ProfileData` read here."""

from __future__ import annotations

import json
import shutil

import pytest

RUN = "2026_12_01_10_00_00"
# (host, fixture): sorted by host, so rank = position (xplanes carry no rank)
HOSTS = [
    ("34.83.195.179_6003", "xprof/gpu_tf_multi_worker/v100_worker.xplane.pb"),  # the demo's own name for it
    ("34.83.195.180_6003", "xprof/gpu_tf_multi_worker/v100_worker.xplane.pb"),
    ("chi-mi300x-013.ord.vultr.cpe.ice.amd.com", "tracelens/traces__mi300__jax_conv_minimal_legacy__chi-mi300x-013.xplane.pb"),
    ("tw003", "tracelens/traces__mi300__jax_conv_minimal_08__tw003.xplane.pb"),
]


@pytest.fixture
def logdir(real_file, tmp_path):
    run = tmp_path / "logdir" / "plugins" / "profile" / RUN
    run.mkdir(parents=True)
    for host, relative in HOSTS:
        source = real_file(relative)
        shutil.copyfile(source, run / f"{host}.xplane.pb")
    return tmp_path / "logdir"


def profile_data_figures(path) -> dict:
    """One host's figures from XLA's own reader: GPU "Stream" lines are the executions (kernels: those with
    kernel_details, as XProf's kernel_stats counts), "Steps" lines the step markers (the earliest marker of a step
    number is its window); device work belongs to the last step that started at or before it."""
    from jax.profiler import ProfileData

    executions = []
    kernels = 0
    markers: dict[int, tuple[float, float]] = {}
    for plane in ProfileData.from_file(str(path)).planes:
        if not plane.name.startswith("/device:GPU"):
            continue
        for line in plane.lines:
            for event in line.events:
                start, end = event.start_ns / 1000, (event.start_ns + event.duration_ns) / 1000
                if line.name.startswith("Stream"):
                    executions.append((start, end))
                    kernels += "kernel_details" in dict(event.stats)
                elif line.name == "Steps":
                    number = int(dict(event.stats).get("step_name", event.name))
                    if number not in markers or start < markers[number][0]:
                        markers[number] = (start, end)
    steps = []
    windows = sorted(markers.items(), key=lambda item: item[1][0])
    for index, (number, (start, end)) in enumerate(windows):
        following = windows[index + 1][1][0] if index + 1 < len(windows) else float("inf")
        mine = sorted((s, e) for s, e in executions if start <= s < following)
        busy, current = 0.0, None
        for s, e in mine:  # the union of the step's execution intervals
            if current is None or s > current[1]:
                busy += 0.0 if current is None else current[1] - current[0]
                current = [s, e]
            else:
                current[1] = max(current[1], e)
        busy += 0.0 if current is None else current[1] - current[0]
        span = max(e for _, e in mine) - mine[0][0] if mine else 0.0
        steps.append({"step": number, "duration_us": end - start, "busy_us": busy, "idle_us": span - busy})
    return {"kernels": kernels, "device_time_us": sum(e - s for s, e in executions), "steps": steps}


def test_hosts_of_a_tensorboard_logdir_are_the_ranks(logdir, cli_run):
    code, out, err = cli_run("trace", "stats", "--json", "--jobs", "1", str(logdir))
    assert code == 0, err
    document = json.loads(out)
    ranks = document["job"]["ranks"]
    assert [(row["rank"], row["host"]) for row in ranks] == [(rank, host) for rank, (host, _) in enumerate(HOSTS)]
    run = logdir / "plugins" / "profile" / RUN
    figures = {}
    for row, (host, _) in zip(ranks, HOSTS):
        expected = figures[host] = profile_data_figures(run / f"{host}.xplane.pb")
        assert row["file"] == str(run / f"{host}.xplane.pb")
        assert row["kernels"] == expected["kernels"]
        assert row["device_time_us"] == pytest.approx(expected["device_time_us"], abs=1e-3)
        assert row["steps"] == len(expected["steps"])
        assert row["busy_us"] == pytest.approx(sum(s["busy_us"] for s in expected["steps"]), abs=1e-3)
        assert row["idle_us"] == pytest.approx(sum(s["idle_us"] for s in expected["steps"]), abs=1e-3)
        durations = [s["duration_us"] for s in expected["steps"]]
        assert row["median_step_us"] == (pytest.approx(sorted(durations)[len(durations) // 2]) if durations else None)
    # the figures differ between fixtures, so a host's row cannot have come from another host's file
    assert figures[HOSTS[0][0]]["kernels"] == 1330 and figures[HOSTS[2][0]]["kernels"] == 25
    assert figures[HOSTS[3][0]]["kernels"] == 235
    # step 0 is on the two V100 hosts only, the same length on both (copies of one profile)
    (step,) = document["job"]["steps"]
    v100_step = figures[HOSTS[0][0]]["steps"][0]
    assert (step["step"], step["ranks"]) == (v100_step["step"], 2)
    assert step["slowest_us"] == pytest.approx(v100_step["duration_us"]) and step["behind_next_us"] == 0
    assert {step["slowest_rank"], step["next_rank"]} == {0, 1}
    # a V100 host's kernel mix is its twin's: they are equally far from the job's median mix
    mix = {row["rank"]: row["distance"] for row in document["job"]["kernel_mix"]["ranks"]}
    assert mix[0] == mix[1] and mix[2] > 0.5 and mix[3] > 0.5


def test_host_selection_and_export(logdir, cli_run, tmp_path):
    code, out, err = cli_run("trace", "stats", "--json", "--jobs", "1", "--ranks", "2-3", str(logdir))
    assert code == 0, err
    assert [row["host"] for row in json.loads(out)["job"]["ranks"]] == [HOSTS[2][0], HOSTS[3][0]]
    import duckdb
    out_dir = tmp_path / "parquet"
    code, _, err = cli_run("trace", "export", "--jobs", "1", str(logdir), str(out_dir))
    assert code == 0, err
    rows = duckdb.sql(f"SELECT rank, host, count(*) FILTER (WHERE kind = 'kernel') FROM read_parquet('{out_dir}/**/*"
                      ".parquet', hive_partitioning = true) GROUP BY ALL ORDER BY rank").fetchall()
    run = logdir / "plugins" / "profile" / RUN
    assert rows == [(rank, host, profile_data_figures(run / f"{host}.xplane.pb")["kernels"])
                    for rank, (host, _) in enumerate(HOSTS)]
