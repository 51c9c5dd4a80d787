"""The safety rule that no single command owns: hloscope never unpickles or executes what it reads (checked on the
source, with Python's own parser). ruff's bandit rules (scripts/check.sh) already refuse eval and exec (S307, S102),
pickle, marshal and yaml loads (S301, S302, S506), a shell (S602, S604, S605) and os.system/os.popen (S605); this
audit checks what they do not: importing an unpickling or code-running module at all, compile() and __import__,
torch.load, numpy's pickle loading, loading a module from a file, and import_module with a name read from anywhere
but hloscope's fixed tables. TensorBoard's bind address is tests/test_tensorboard_host.py's, report files
tests/test_render_output_files.py's, run directories tests/test_rundir_processes.py's."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

from helpers import REPO, command

PACKAGE = REPO / "hloscope"

# Modules whose only job is to turn bytes into live objects or run code.
UNSAFE_MODULES = {"pickle", "cPickle", "_pickle", "dill", "cloudpickle", "joblib", "shelve", "marshal", "yaml",
                  "jsonpickle", "runpy", "code", "codeop"}
UNSAFE_CALLS = {"compile", "__import__", "execfile"}
UNSAFE_ATTRIBUTE_CALLS = {("torch", "load"), ("np", "load"), ("numpy", "load"), ("jnp", "load"),
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
    probe.write_text("import pickle\nimport torch\nimport numpy as np\nimport importlib\n"
                     "def f(p):\n    torch.load(p)\n    compile(p, 'f', 'exec')\n    np.load(p, allow_pickle=True)\n"
                     "    importlib.import_module(p)\n    np.load(p, allow_pickle=False)\n    return __import__(p)\n"
                     "importlib.import_module('hloscope.hlo._native')\nimportlib.import_module('os')\n")
    assert sorted(audit([probe], tmp_path), key=lambda line: int(line.split(":")[1])) == [
        "probe.py:1: import pickle", "probe.py:6: torch.load()", "probe.py:7: compile()",
        "probe.py:8: np.load()", "probe.py:8: np.load(allow_pickle=...)",
        "probe.py:9: import_module(p) outside the fixed tables", "probe.py:11: __import__()",
        "probe.py:13: import_module('os') outside the fixed tables",
    ]  # the literal 'hloscope.hlo._native' of line 12 is an import statement in effect: not flagged


def test_ruff_refuses_what_this_audit_leaves_to_it(tmp_path):
    """The project's own ruff configuration reports each unsafe call this audit does not look for."""
    probe = tmp_path / "probe.py"
    probe.write_text("import marshal\nimport os\nimport pickle\nimport subprocess\nimport yaml\n\n\n"
                     "def f(p):\n    subprocess.run(p, shell=True)\n    eval(p)\n    exec(p)\n    os.system(p)\n"
                     "    os.popen(p)\n    pickle.loads(p)\n    yaml.load(p)\n    marshal.loads(p)\n")
    ruff = Path(sys.executable).parent / "ruff"
    done = command(ruff, "check", "--no-cache", "--config", REPO / "pyproject.toml", "--output-format", "concise", probe)
    assert done.code == 1, done.stderr
    reported = {(int(line.split(":")[1]), line.split(": ", 1)[1].split()[0]) for line in done.stdout.splitlines()
                if line.startswith(str(probe))}
    assert {(9, "S602"), (10, "S307"), (11, "S102"), (12, "S605"), (13, "S605"), (14, "S301"), (15, "S506"),
            (16, "S302")} <= reported, done.stdout
