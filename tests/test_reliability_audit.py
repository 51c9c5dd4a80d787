"""The safety rules that no single command owns:

- hloscope never unpickles or executes what it reads (checked on the source, with Python's own parser);
- TensorBoard binds to 127.0.0.1 unless told otherwise;
- report files (-o) never overwrite a user's file, nor a file hloscope did not create;
- run directories are unique across processes started in the same second, and run ids cannot escape --out.

Atomic run.json writes, same-second threads and escaping run ids in-process are covered by tests/test_rundir.py.
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import REPO, hloscope

PACKAGE = REPO / "hloscope"

# Modules whose only job is to turn bytes into live objects or run code.
UNSAFE_MODULES = {"pickle", "cPickle", "_pickle", "dill", "cloudpickle", "joblib", "shelve", "marshal", "yaml",
                  "jsonpickle", "runpy", "code", "codeop"}
UNSAFE_CALLS = {"eval", "exec", "compile", "__import__", "execfile"}
UNSAFE_ATTRIBUTE_CALLS = {("torch", "load"), ("np", "load"), ("numpy", "load"), ("jnp", "load"), ("os", "system"),
                          ("os", "popen"), ("pickle", "loads"), ("pickle", "load"), ("yaml", "load"),
                          ("yaml", "unsafe_load"), ("torch.jit", "load"), ("torch.package", "PackageImporter"),
                          ("importlib.util", "spec_from_file_location"), ("importlib.machinery", "SourceFileLoader")}
# importlib.import_module is used with a literal name of one of hloscope's own modules (an optional compiled
# extension), or with fixed tables of such names only:
IMPORT_MODULE_ALLOWED = {
    "hloscope/cli/__init__.py": "COMMANDS[name][0]",  # the CLI's fixed command table
    "hloscope/modes.py": "module_name",  # the mode registry's own "module:attribute" paths
    "hloscope/trace/xplane_proto.py": "module_name",  # loops over the constant PYTHON_MODULES tuple
    # kind is "diff" or "explain" (the calling command), form one of click's --format choices
    "hloscope/render/output.py": "f\"hloscope.render.{kind}_{('term' if form == 'terminal' else form)}\"",
}


def _sources() -> list[Path]:
    files = sorted(PACKAGE.rglob("*.py"))
    assert len(files) > 50  # the whole package, not an empty glob
    return files


def _dotted(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    return "?"


def audit(files: list[Path], root: Path) -> list[str]:
    """`file:line: what` for every import or call that could unpickle or execute data."""
    problems = []
    for file in files:
        relative = file.relative_to(root).as_posix()
        tree = ast.parse(file.read_text(encoding="utf-8"), filename=str(file))
        for node in ast.walk(tree):
            where = f"{relative}:{getattr(node, 'lineno', '?')}"
            if isinstance(node, ast.Import):
                problems += [f"{where}: import {a.name}" for a in node.names if a.name.split(".")[0] in UNSAFE_MODULES]
            elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in UNSAFE_MODULES:
                problems.append(f"{where}: from {node.module} import ...")
            elif isinstance(node, ast.Call):
                problems += _call_problems(node, where, relative)
    return problems


def _numpy_without_pickle(node: ast.Call) -> bool:
    """`np.load(path, allow_pickle=False)`: numpy's own array reader, which refuses pickled objects."""
    return _dotted(node.func) in ("np.load", "numpy.load") and any(
        k.arg == "allow_pickle" and isinstance(k.value, ast.Constant) and k.value.value is False for k in node.keywords)


def _call_problems(node: ast.Call, where: str, relative: str) -> list[str]:
    problems = []
    name = _dotted(node.func)
    if isinstance(node.func, ast.Name) and node.func.id in UNSAFE_CALLS:
        problems.append(f"{where}: {name}()")
    if isinstance(node.func, ast.Attribute) and (_dotted(node.func.value), node.func.attr) in UNSAFE_ATTRIBUTE_CALLS \
            and not _numpy_without_pickle(node):
        problems.append(f"{where}: {name}()")
    for keyword in node.keywords:
        if keyword.arg == "shell" and not (isinstance(keyword.value, ast.Constant) and not keyword.value.value):
            problems.append(f"{where}: {name}(shell=...)")
        if keyword.arg == "allow_pickle" and not (isinstance(keyword.value, ast.Constant) and keyword.value.value is False):
            problems.append(f"{where}: {name}(allow_pickle=...)")
    if name.endswith("import_module"):
        argument = ast.unparse(node.args[0]) if node.args else ""
        literal = node.args[0].value if node.args and isinstance(node.args[0], ast.Constant) else None
        own_module = isinstance(literal, str) and literal.startswith("hloscope.")  # an import statement, in effect
        if IMPORT_MODULE_ALLOWED.get(relative) != argument and not own_module:
            problems.append(f"{where}: import_module({argument}) outside the fixed tables")
    return problems


def test_nothing_read_is_unpickled_or_executed():
    assert audit(_sources(), REPO) == []


def test_the_audit_would_catch_what_it_looks_for(tmp_path):
    """The checker itself is not vacuous: a module doing each forbidden thing is flagged."""
    probe = tmp_path / "probe.py"
    probe.write_text("import pickle\nimport subprocess\nimport numpy as np\nimport importlib\n"
                     "def f(p):\n    subprocess.run(p, shell=True)\n    eval(p)\n    np.load(p, allow_pickle=True)\n"
                     "    importlib.import_module(p)\n    np.load(p, allow_pickle=False)\n    return pickle.loads(p)\n"
                     "importlib.import_module('hloscope.hlo._native')\nimportlib.import_module('os')\n")
    assert sorted(audit([probe], tmp_path), key=lambda line: int(line.split(":")[1])) == [
        "probe.py:1: import pickle", "probe.py:6: subprocess.run(shell=...)", "probe.py:7: eval()",
        "probe.py:8: np.load()", "probe.py:8: np.load(allow_pickle=...)",
        "probe.py:9: import_module(p) outside the fixed tables", "probe.py:11: pickle.loads()",
        "probe.py:13: import_module('os') outside the fixed tables",
    ]  # the literal 'hloscope.hlo._native' of line 12 is an import statement in effect: not flagged


def test_tensorboard_binds_loopback_unless_told():
    from hloscope.cli.tensorboard import command
    from hloscope.tensorboard.server import TensorBoardProcess, is_loopback

    (host,) = [p for p in command.params if p.name == "host"]
    assert host.default == "127.0.0.1"
    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("localhost")
    assert not is_loopback("0.0.0.0") and not is_loopback("::") and not is_loopback("192.168.1.2")
    # the address reaches TensorBoard's own --host flag (TensorBoard alone would bind to localhost, or all with --bind_all)
    server = TensorBoardProcess(Path("/nonexistent"), host.default, 1, Path("/nonexistent.log"))
    assert server.url == "http://127.0.0.1:1/"


def test_tensorboard_command_line_carries_the_host(monkeypatch, tmp_path):
    import hloscope.tensorboard.server as server_module

    seen = {}

    class FakePopen:
        def __init__(self, command, **kwargs):
            seen["command"] = command

    monkeypatch.setattr(server_module.subprocess, "Popen", FakePopen)
    server_module.TensorBoardProcess(tmp_path, "127.0.0.1", 6123, tmp_path / "tb.log").start()
    command = seen["command"]
    assert command[command.index("--host") + 1] == "127.0.0.1" and "--bind_all" not in command


# --------------------------------------------------------------------------------------------- output files


def _explain_input(root: Path) -> Path:
    """The smallest comparison explain reads: one run record."""
    run = root / "cmp" / "jax"
    run.mkdir(parents=True)
    (run / "run.json").write_text(json.dumps({
        "schema_version": 1, "run_id": "jax", "mode": "jax", "status": "ok", "config": {}, "artifacts": [],
        "timing": {"step_times_s": [0.002, 0.002, 0.002], "median_s": 0.002, "mean_s": 0.002}}))
    return run.parent


@pytest.mark.parametrize("suffix", [".md", ".html", ".json"])
def test_report_never_overwrites_a_users_file(tmp_path, suffix):
    comparison = _explain_input(tmp_path)
    mine = tmp_path / f"report{suffix}"
    mine.write_text("the user's own notes\n")
    done = hloscope("explain", comparison, "-o", mine)
    assert done.code == 2 and done.stderr.count("\n") == 1 and "already exists" in done.stderr
    assert "Traceback" not in done.stderr
    assert mine.read_text() == "the user's own notes\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cmp", mine.name]  # no temporary file left either


def test_report_temporary_file_never_clobbers_a_users_file(tmp_path):
    """The old writer used the fixed name .<output>.tmp beside the output, overwriting (then deleting) any such file."""
    comparison = _explain_input(tmp_path)
    decoy = tmp_path / ".report.md.tmp"
    decoy.write_text("keep me\n")
    done = hloscope("explain", comparison, "-o", tmp_path / "report.md")
    assert done.code == 0, done.stderr
    assert decoy.read_text() == "keep me\n"
    assert "| jax |" in (tmp_path / "report.md").read_text()
    mode = (tmp_path / "report.md").stat().st_mode & 0o777
    umask = os.umask(0)
    os.umask(umask)
    assert mode == 0o666 & ~umask  # what any other tool's open() would have given, not mkstemp's 0600


def test_report_force_replaces_and_a_directory_is_refused(tmp_path):
    comparison = _explain_input(tmp_path)
    target = tmp_path / "report.json"
    target.write_text("old\n")
    done = hloscope("explain", comparison, "-o", target, "--force")
    assert done.code == 0, done.stderr
    assert json.loads(target.read_text())["fastest"] == "jax"
    folder = tmp_path / "folder.md"
    folder.mkdir()
    done = hloscope("explain", comparison, "-o", folder, "--force")
    assert done.code == 2 and done.stderr.count("\n") == 1 and "is a directory" in done.stderr
    assert "Traceback" not in done.stderr and list(folder.iterdir()) == []


def test_report_appearing_during_the_work_is_not_overwritten(tmp_path, monkeypatch):
    """Checked before the work and again, atomically, when the report is placed (a hard link refuses existing files)."""
    from hloscope.errors import UsageError
    from hloscope.render import output

    target = tmp_path / "report.md"
    monkeypatch.setattr(output, "check_writable", lambda path, force: None)  # the early check passed, then:
    target.write_text("written meanwhile by someone else\n")
    with pytest.raises(UsageError, match="already exists"):
        output.emit("# report\n", target, force=False)
    assert target.read_text() == "written meanwhile by someone else\n"
    assert [p.name for p in tmp_path.iterdir()] == ["report.md"]


# ----------------------------------------------------------------------------------------------- run directories

_MAKE_DIR = """
import sys, time
from hloscope.runs.rundir import create_run_dir
start = float(sys.argv[2])
while time.time() < start:
    time.sleep(0.001)
print(create_run_dir(sys.argv[1], prefix="jax").name)
"""


def test_processes_started_in_the_same_second_get_different_run_directories(tmp_path):
    start = time.time() + 3  # every process is waiting by then; they all create their directory at once
    children = [subprocess.Popen([sys.executable, "-c", _MAKE_DIR, str(tmp_path), str(start)], cwd=REPO, text=True,
                                 stdout=subprocess.PIPE) for _ in range(4)]
    names = [child.communicate(timeout=120)[0].strip() for child in children]
    assert all(child.returncode == 0 for child in children)
    assert len(set(names)) == 4 and sorted(p.name for p in tmp_path.iterdir()) == sorted(names)


@pytest.mark.parametrize("run_id", ["../x", "/tmp/x", "..", "a/../../x"])
def test_run_id_cannot_escape_out_as_a_real_command(tmp_path, run_id):
    out = tmp_path / "out"
    done = hloscope("run", "--mode", "jax", "--model", "vit-tiny", "--out", out, "--run-id", run_id)
    assert done.code == 2 and done.stderr.count("\n") == 1 and "invalid run id" in done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) in ([], ["out"])
    assert not out.exists() or list(out.iterdir()) == []


@pytest.mark.parametrize("command", ["run", "compare"])
def test_an_output_directory_that_cannot_be_made_is_one_line(tmp_path, command):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory\n")
    out = blocker / "traces"
    args = ["--mode", "jax"] if command == "run" else ["--modes", "jax"]
    done = hloscope(command, *args, "--model", "vit-tiny", "--steps", "1", "--warmup", "1", "--out", out)
    assert done.code == 2 and "Traceback" not in done.stderr
    assert done.stderr.splitlines() == [f"hloscope: error: cannot create output directory {out}: Not a directory"]
    assert blocker.read_text() == "not a directory\n"


def test_a_report_that_cannot_be_written_is_one_line(tmp_path):
    comparison = _explain_input(tmp_path)
    done = hloscope("explain", comparison, "-o", "/proc/hloscope-report.md")  # /proc takes no new files, even as root
    assert done.code == 2 and "Traceback" not in done.stderr
    assert done.stderr.splitlines() == ["hloscope: error: cannot write /proc/hloscope-report.md: No such file or directory"]
