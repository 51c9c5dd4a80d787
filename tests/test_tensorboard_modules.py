"""`hloscope tensorboard`: a JAX run's module list (graph viewer, memory viewer) holds the train step only.

XProf lists the `<module>.hlo_proto.pb` files it extracts from the xplane (xprof/profile_plugin.py
`hlo_module_list_impl`); checked by running XProf's own extraction (`xspace_to_tool_names`) on the view's copy and on
the original, and against the programs whose XLA ops the raw events (jaxlib's ProfileData) show inside the steps.
Uses conftest's real comparison, as tests/test_diff_steps.py does (HLOSCOPE_TEST_COMPARISON, or one recorded once).
"""

from __future__ import annotations

import bisect
import shutil
from pathlib import Path

import pytest

from hloscope.tensorboard.logdir import ViewLogdir

pytestmark = pytest.mark.slow


def _xprof_modules(xplane: Path, folder: Path) -> list[str]:
    from xprof.convert.raw_to_tool_data import xspace_to_tool_names

    folder.mkdir()
    shutil.copyfile(xplane, folder / "host.xplane.pb")
    xspace_to_tool_names([str(folder / "host.xplane.pb")])
    return sorted(p.name.removesuffix(".hlo_proto.pb") for p in folder.glob("*.hlo_proto.pb"))


def _raw_programs_in_steps(xplane: Path) -> set[tuple[str, int]]:
    from jaxlib._profile_data import ProfileData

    markers, ops = [], []
    for plane in ProfileData.from_file(str(xplane)).planes:
        for line in plane.lines:
            for event in line.events:
                stats = dict(event.stats)
                if event.name == "train_step":
                    markers.append(event.start_ns)
                elif stats.get("hlo_op") == event.name and "program_id" in stats:
                    ops.append((event.start_ns, stats["hlo_module"], int(stats["program_id"])))
    markers.sort()
    return {(module, program) for start, module, program in ops if bisect.bisect_right(markers, start) > 0}


def test_jax_module_list_keeps_the_modules_that_ran_in_the_steps(comparison, tmp_path):
    view = ViewLogdir(comparison / "jax", tmp_path / "logdir")
    view.root.mkdir()
    (session,) = view.sync()
    (original,) = session.files
    (served,) = view.session_dir(session.name).glob("*.xplane.pb")
    assert not served.is_symlink()  # a filtered copy in the view; the user's file is untouched
    ran = _raw_programs_in_steps(original)
    assert {module for module, _ in ran} == {"jit_train_step"}
    expected = sorted(f"{module}({program})" for module, program in ran)
    before = _xprof_modules(original, tmp_path / "original")
    after = _xprof_modules(served, tmp_path / "served")
    # the profile also holds programs run outside the steps (the PRNG's seeding, the state's dtype conversion)
    assert len(before) > len(expected) and set(expected) <= set(before)
    assert after == expected
    kept, dropped = view.module_filters[session.name]
    assert kept == expected and dropped == len(before) - len(expected)


def test_multi_graph_run_keeps_every_graph(comparison, tmp_path):
    view = ViewLogdir(comparison / "torch_xla_compile", tmp_path / "logdir")
    view.root.mkdir()
    (session,) = view.sync()
    (original,) = session.files
    ran = _raw_programs_in_steps(original)
    assert len({module for module, _ in ran}) >= 3
    (served,) = view.session_dir(session.name).glob("*.xplane.pb")
    modules = _xprof_modules(served, tmp_path / "served")
    assert {f"{m}({p})" for m, p in ran} <= set(modules)
