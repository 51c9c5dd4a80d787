"""The mode registry (hloscope/modes.py) is the only place that lists modes, and every entry in it resolves."""

from __future__ import annotations

import ast
import inspect
import re
from importlib.util import find_spec

import pytest
from helpers import REPO, python

from hloscope import modes
from hloscope.backends.base import Session
from hloscope.cli.compare import command as compare
from hloscope.cli.run import command as run
from hloscope.modes import MODES, Mode, get_mode, mode_name, parse_modes, resolve

PACKAGE = REPO / "hloscope"
REGISTRY = PACKAGE / "modes.py"
# Mode names and their run-directory names: a literal list of two or more of them anywhere else is a second table.
NAMES = {m.name for m in MODES} | {m.dir_name for m in MODES}
_TOKEN = re.compile(r"[A-Za-z0-9_+]+")


def _strings(node: ast.AST) -> list[str]:
    return [n.value for n in ast.walk(node) if isinstance(n, ast.Constant) and isinstance(n.value, str)]


def hard_coded_mode_lists(source: str, filename: str) -> list[str]:
    """`file:line: what` for each literal that lists modes: a tuple/list/set of two or more mode names (and nothing
    else), a dict keyed by two or more of them, or one string naming three or more (a help text)."""
    found = []
    for node in ast.walk(ast.parse(source, filename=filename)):
        where = f"{filename}:{getattr(node, 'lineno', '?')}"
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            strings = [e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
            named = [s for s in strings if s in NAMES]
            if len(named) >= 2 and len(named) == len(strings):  # not a list of packages that happen to include some
                found.append(f"{where}: {named}")
        elif isinstance(node, ast.Dict):
            named = [k.value for k in node.keys if isinstance(k, ast.Constant) and k.value in NAMES]
            if len(named) >= 2:
                found.append(f"{where}: dict keyed by {named}")
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            named = {token for token in _TOKEN.findall(node.value) if token in NAMES}
            if len(named) >= 3:
                found.append(f"{where}: string naming {sorted(named)}")
    return found


def test_no_module_but_the_registry_lists_the_modes():
    files = sorted(p for p in PACKAGE.rglob("*.py") if p != REGISTRY)
    assert len(files) > 50
    problems = [problem for path in files
                for problem in hard_coded_mode_lists(path.read_text(encoding="utf-8"), str(path.relative_to(REPO)))]
    assert problems == [], "mode lists outside hloscope/modes.py (derive them from the registry):\n" + "\n".join(problems)


def test_the_check_catches_the_tables_it_replaced():
    old = ('MODE_DIRS = {"pytorch": "pytorch", "torch_xla+compile": "torch_xla_compile"}\n'
           'TARGET_MODES = ("jax", "torch_xla")\n'
           'CHOICES = ["pytorch", "torch_xla", "jax"]\n'
           'HELP = "Comma-separated modes: pytorch,pytorch+compile,torch_xla,torch_xla+compile,jax"\n'
           'ONE = "run --mode jax"\n')
    assert [p.split(":")[1] for p in hard_coded_mode_lists(old, "old.py")] == ["1", "2", "3", "4"]


def test_the_registry_imports_no_framework():
    code = ("import sys, hloscope.modes, hloscope.backends, hloscope.backends.base, hloscope.cli.run, hloscope.cli.compare;"
            "print(sorted(m for m in ('torch', 'torch_xla', 'jax', 'flax', 'transformers', 'tensorflow') "
            "if m in sys.modules))")
    done = python("-c", code, timeout=120)
    assert done.code == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_entries_are_consistent():
    assert len({m.name for m in MODES}) == len({m.dir_name for m in MODES}) == len(MODES)
    for mode in MODES:
        assert isinstance(mode, Mode) and get_mode(mode.name) is mode
        assert re.fullmatch(r"[A-Za-z0-9_]+", mode.dir_name)  # a folder name and a run-id prefix
        assert mode_name(mode.framework, mode.compile) == mode.name
        assert mode.dumps in (modes.DUMPS_XLA_HLO, modes.DUMPS_INDUCTOR, modes.DUMPS_NONE)
        assert mode.trace_format in (modes.TRACE_XPLANE, modes.TRACE_KINETO)
        assert set(mode.imports) <= set(mode.packages) and mode.runs_on
        assert mode.devices and set(mode.devices) <= {"cpu", "cuda", "tpu"}
        assert mode.target_capture is None or mode.xla  # --target compiles XLA graphs
    assert parse_modes(",".join(m.name for m in reversed(MODES))) == [m.name for m in reversed(MODES)]
    assert mode_name("jax", True) == "jax"  # JAX is always jitted: --compile-model changes nothing


def test_the_cli_offers_exactly_the_registry():
    (choice,) = [p for p in run.params if p.name == "mode"]
    assert set(choice.type.choices) == {m.name for m in MODES} | set(modes.FRAMEWORKS)
    (option,) = [p for p in compare.params if p.name == "modes"]
    assert ",".join(m.name for m in MODES) in option.help


@pytest.mark.parametrize("mode", MODES, ids=lambda m: m.name)
def test_every_entry_resolves_where_its_framework_is_installed(mode):
    missing = [p for p in mode.packages if find_spec(p) is None]
    assert not missing, f"{mode.name} needs {', '.join(missing)}, pinned in requirements.txt: run scripts/setup.sh"
    session = resolve(mode.session)
    assert inspect.isclass(session) and issubclass(session, Session)
    for path in (mode.target_capture, mode.preflight):
        if path is not None:
            function = resolve(path)
            assert callable(function)
    if mode.target_capture:
        params = list(inspect.signature(resolve(mode.target_capture)).parameters)
        assert params == ["preset", "batch_size", "precision", "seed", "input_dir", "work_dir", "seq_len"]
