"""Broken HLO gets one line on stderr naming the file, with line:column, and exit code 2 from every reader of HLO
(`hlo stats`, `diff` on either side): the committed files in tests/data/bad/rel_*.hlo, real modules cut in half or
other real formats under an HLO name, and such a module inside a run directory or an XLA dump directory; a module
that cannot be read in a dump directory is named the same way. A broken or hostile sibling report of a module (buffer
assignment, memory usage report, a FIFO) is named inside the module's result instead, and the module's own figures
stand.

The commands run as real subprocesses under a timeout and an address-space limit (helpers.hloscope)."""

from __future__ import annotations

import gzip
import json
import os
import re
import shutil
from pathlib import Path

import pytest
from helpers import (
    BAD,
    FIXTURES,
    GOOD_DUMP,
    HLO_FIXTURE,
    KINETO_FIXTURE,
    RUN_COMMANDS,
    STABLEHLO_FIXTURE,
    TORCH_XLA_IR_FIXTURE,
    XPLANE_FIXTURE,
    assert_no_traceback,
    assert_refused,
    copy_of_run,
    cut_in_half,
    first_good_hlo,
    good_run,
    hloscope,
    needs_fixtures,
)

# committed file -> words the message must contain; every one is a text-format error, so line:column is required
HLO_FILES = {
    "rel_empty.hlo": "empty file",
    "rel_garbage.hlo": "binary data",
    "rel_png.hlo": "binary data",
    "rel_kineto_as.hlo": "looks like JSON",
    "rel_hlo_utf16.hlo": "UTF-16",
    "rel_hlo_nul.hlo": "binary data",
    "rel_deep_tuple.hlo": "nested too deeply",
    # XLA's cost analysis (`hlo stats` without --no-xla-cost) crashes on this one: hloscope refuses it before running it
    "rel_deep_tuple_xla_crash.hlo": "nested too deeply",
    # graphs with a cycle, which XLA's parser refuses: the diff's walks once looped on them, growing without bound
    "rel_self_use.hlo": "its own operand",
    "rel_repeated_name.hlo": "defined twice",
    "rel_calls_itself.hlo": "calls itself",
}


def _generated_hlo_inputs(tmp_path: Path) -> dict[str, Path]:
    """Broken HLO inputs made from the real fixtures: cut in half, or another real format under an HLO name."""
    made = {
        "truncated": cut_in_half(FIXTURES / HLO_FIXTURE, tmp_path / "truncated.hlo"),
        "xplane_as_hlo": tmp_path / "profile.hlo",
        "gzip_as_hlo": tmp_path / "trace.hlo",
        "kineto_json_as_hlo": tmp_path / "kineto.hlo",
        "stablehlo_as_hlo": tmp_path / "module.stablehlo.hlo",
        "torch_xla_ir_as_hlo": tmp_path / "save1.hlo",
    }
    shutil.copy(FIXTURES / XPLANE_FIXTURE, made["xplane_as_hlo"])
    shutil.copy(FIXTURES / KINETO_FIXTURE, made["gzip_as_hlo"])
    made["kineto_json_as_hlo"].write_bytes(gzip.decompress((FIXTURES / KINETO_FIXTURE).read_bytes()))
    shutil.copy(FIXTURES / STABLEHLO_FIXTURE, made["stablehlo_as_hlo"])
    shutil.copy(FIXTURES / TORCH_XLA_IR_FIXTURE, made["torch_xla_ir_as_hlo"])
    return made


HLO_COMMANDS = {
    "hlo stats": lambda bad, good: ["hlo", "stats", bad],
    "hlo stats --json": lambda bad, good: ["hlo", "stats", "--json", bad],
    "diff BAD GOOD": lambda bad, good: ["diff", "--no-xla-cost", bad, good],
    "diff GOOD BAD": lambda bad, good: ["diff", "--no-xla-cost", "--json", good, bad],
}


@pytest.mark.parametrize("command", list(HLO_COMMANDS))
@pytest.mark.parametrize("name", sorted(HLO_FILES))
@needs_fixtures
def test_broken_hlo_file_is_refused_by_every_hlo_reader(name, command):
    path = BAD / name
    result = hloscope(*HLO_COMMANDS[command](path, first_good_hlo()))
    assert_refused(result, path, position=True, words=(HLO_FILES[name],))


@pytest.mark.parametrize("command", ["hlo stats", "diff BAD GOOD"])
@pytest.mark.parametrize("case, words", [
    ("truncated", ()),
    ("xplane_as_hlo", ("binary data",)),
    ("gzip_as_hlo", ("binary data",)),
    ("kineto_json_as_hlo", ("looks like JSON",)),
    ("stablehlo_as_hlo", ()),
    ("torch_xla_ir_as_hlo", ()),
])
@needs_fixtures
def test_real_files_cut_or_misnamed_are_refused_as_hlo(tmp_path, case, words, command):
    path = _generated_hlo_inputs(tmp_path)[case]
    result = hloscope(*HLO_COMMANDS[command](path, first_good_hlo()))
    assert_refused(result, path, position=True, words=words)


@pytest.mark.parametrize("command", ["hlo stats", "diff"])
@needs_fixtures
def test_truncated_hlo_inside_a_run_is_named_with_its_position(tmp_path, command):
    good = good_run(tmp_path / "good")
    run = good_run(tmp_path / "broken")
    hlo = next((run / "hlo").glob("*after_optimizations.txt"))
    cut_in_half(hlo, hlo.with_suffix(".half")).replace(hlo)
    result = hloscope(*RUN_COMMANDS[command](run, good))
    assert_refused(result, hlo, position=True)


@pytest.mark.slow
@pytest.mark.parametrize("command", ["hlo stats", "diff"])
@pytest.mark.parametrize("stage", ["before_optimizations", "cpu_after_optimizations"])
def test_real_hlo_dump_cut_in_half(real_run, tmp_path, command, stage):
    run = copy_of_run(real_run, tmp_path)
    (hlo,) = run.glob(f"hlo/module_*.jit_train_step.{stage}.txt")
    cut_in_half(hlo, tmp_path / "half.txt").replace(hlo)
    args = {"hlo stats": ["hlo", "stats", run], "diff": ["diff", "--no-xla-cost", "--stage", "after", real_run, run]}
    # diff compares the after-optimizations modules, and still refuses a run holding a broken module of any stage
    assert_refused(hloscope(*args[command]), hlo, position=True)


@pytest.mark.parametrize("command", ["hlo stats", "diff"])
@needs_fixtures
def test_xla_dump_directory_with_a_module_cut_in_half(tmp_path, command):
    dump = tmp_path / "dump"
    shutil.copytree(FIXTURES / GOOD_DUMP, dump)
    (hlo,) = dump.glob("*gpu_after_optimizations.txt")
    cut_in_half(hlo, tmp_path / "half").replace(hlo)
    args = ["hlo", "stats", dump] if command == "hlo stats" else ["diff", "--no-xla-cost", FIXTURES / GOOD_DUMP, dump]
    assert_refused(hloscope(*args), hlo, position=True)


# A regular file that no one may open for reading, root included (write-only sysfs attribute: the kernel refuses the
# open with EACCES); chmod 0 would not do, as root (CI) reads files without read permission.
UNREADABLE = Path("/sys/bus/cpu/drivers_probe")


@needs_fixtures
def test_unreadable_module_in_a_dump_directory_is_one_line(tmp_path):
    with pytest.raises(PermissionError):
        UNREADABLE.open("rb")
    dump = tmp_path / "dump"
    shutil.copytree(FIXTURES / "gpu_aot" / "mlp_sm90_triton", dump)
    module = sorted(dump.glob("module_*after_optimizations.txt"))[0]
    module.unlink()
    module.symlink_to(UNREADABLE)  # named in the dump as the module it replaces
    assert_refused(hloscope("hlo", "stats", "--no-xla-cost", dump, timeout=120), module, words=("cannot read",))


@needs_fixtures
def test_broken_sibling_file_is_reported_inside_the_result(tmp_path):
    """The documented exception (docs/hlo.md): a garbage buffer assignment beside a module does not stop the analysis;
    the module's memory section says what is wrong with which file, and so does one warning line."""
    dump = tmp_path / "dump"
    shutil.copytree(FIXTURES / GOOD_DUMP, dump)
    (assignment,) = dump.glob("*-buffer-assignment.txt")
    shutil.copy(BAD / "rel_garbage.hlo", assignment)
    result = hloscope("hlo", "stats", "--json", "--no-xla-cost", dump)
    warnings = result.stderr.splitlines()
    assert result.code == 0 and len(warnings) == 1 and warnings[0].startswith("hloscope: warning: "), result.stderr
    assert str(assignment) in warnings[0] and "left out" in warnings[0]
    (after,) = [m for m in json.loads(result.stdout)["modules"] if m["stage"] == "after_optimizations"]
    error = after["memory"]["buffer_assignment"]["error"]
    assert str(assignment) in error


@pytest.mark.parametrize("sibling, content", [
    ("-buffer-assignment.txt", ""), ("-buffer-assignment.txt", "BufferAssignment:\nallocation 0: size " + "9" * 5000),
    ("-memory-usage-report.txt", "Memory Space: 0\nTotal bytes: " + "9" * 5000), ("-buffer-assignment.txt", None)])
@needs_fixtures
def test_broken_or_hostile_sibling_reports_are_named_inside_the_result(tmp_path, sibling, content):
    module = tmp_path / first_good_hlo().name
    shutil.copy(first_good_hlo(), module)
    report = Path(str(module)[: -len(".txt")] + sibling)
    if content is None:
        os.mkfifo(report)  # a FIFO sibling: never opened for a blocking read
    else:
        report.write_text(content)
    for extra in ([], ["--json"]):
        result = hloscope("hlo", "stats", "--no-xla-cost", *extra, module, timeout=120)
        assert_no_traceback(result)
        assert result.code == 0, result.stderr
        expected = report.name if extra else "unreadable"  # the table cell is cut to the terminal's width
        assert expected in result.stdout.replace("\n", ""), result.stdout[-2000:]


# A computation's def-use graph and a module's call graph have no cycle in text XLA's parser takes: it reads in order
# and finds an operand (a called computation, a control predecessor) only among what it has read, and refuses a name
# defined twice in a computation. Each case: the lines of the module, (line, column) of the error, words of it.
_MODULE = "HloModule m\n\n{computations}ENTRY main {{\n  p = f32[4]{{0}} parameter(0)\n{body}}}\n"
CYCLES = {
    "own operand": ("", "  ROOT a = f32[4]{0} add(a, p)\n", (5, 26), "its own operand"),
    "own operand, shape inferred from it": ("", "  ROOT a = negate(a)\n", (5, 19), "its own operand"),
    "own operand of a derived shape": ("", "  t = token[] after-all(t)\n  ROOT a = f32[4]{0} negate(p)\n", (5, 25),
                                       "its own operand"),
    "name defined twice": ("", "  p = f32[4]{0} add(p, p)\n", (5, 3), "defined twice"),
    "ROOT name defined twice": ("", "  a = f32[4]{0} negate(p)\n  ROOT a = f32[4]{0} add(a, p)\n", (6, 8),
                                "defined twice"),
    "parameter defined twice": ("", "  p = f32[4]{0} parameter(1)\n  ROOT a = f32[4]{0} add(p, p)\n", (5, 3),
                                "defined twice"),
    "name defined twice, shape inferred": ("", "  p = negate(p)\n  ROOT a = f32[4]{0} abs(p)\n", (5, 3),
                                           "defined twice"),
    "nested operand using its user": ("", "  ROOT a = f32[4]{0} add(f32[4]{0} negate(a), p)\n", None,
                                      "used before its definition"),
    "control predecessor itself": ("", "  a = f32[4]{0} negate(p), control-predecessors={a}\n  ROOT b = f32[4]{0} abs(a)\n",
                                   (5, 28), "not defined before it"),
    "control predecessor defined later": (
        "", "  a = f32[4]{0} negate(p), control-predecessors={b}\n  ROOT b = f32[4]{0} abs(a)\n", (5, 28),
        "not defined before it"),
    "computation calling itself, never run": (
        "f {\n  x = f32[4]{0} parameter(0)\n  ROOT c = f32[4]{0} call(x), to_apply=f\n}\n\n",
        "  ROOT a = f32[4]{0} negate(p)\n", (5, 31), "calls itself"),
    "fusion of itself": (
        "g {\n  x = f32[4]{0} parameter(0)\n  ROOT c = f32[4]{0} fusion(x), kind=kLoop, calls=g\n}\n\n",
        "  ROOT a = f32[4]{0} fusion(p), kind=kLoop, calls=g\n", (5, 45), "calls itself"),
    "computations calling each other": (
        "g {\n  y = f32[4]{0} parameter(0)\n  ROOT d = f32[4]{0} call(y), to_apply=f\n}\n\n"
        "f {\n  x = f32[4]{0} parameter(0)\n  ROOT c = f32[4]{0} call(x), to_apply=g\n}\n\n",
        "  ROOT a = f32[4]{0} call(p), to_apply=f\n", (5, 31), "defined after"),
    "while body calling its loop": (
        "cond {\n  c = f32[4]{0} parameter(0)\n  ROOT t = pred[] constant(true)\n}\n\n"
        "body {\n  b = f32[4]{0} parameter(0)\n  ROOT w = f32[4]{0} while(b), condition=cond, body=body\n}\n\n",
        "  ROOT a = f32[4]{0} while(p), condition=cond, body=body\n", (10, 48), "calls itself"),
}
CYCLE_COMMANDS = {
    "hlo stats": lambda bad, good: ["hlo", "stats", "--no-xla-cost", bad],
    "diff BAD GOOD": lambda bad, good: ["diff", "--no-xla-cost", bad, good],
    "diff GOOD BAD": lambda bad, good: ["diff", "--no-xla-cost", "--json", good, bad],
}


@pytest.mark.parametrize("command", list(CYCLE_COMMANDS))
@pytest.mark.parametrize("case", list(CYCLES))
@needs_fixtures
def test_a_cycle_in_the_graph_is_refused_at_its_position(tmp_path, case, command):
    computations, body, position, words = CYCLES[case]
    path = tmp_path / "cycle.hlo"
    path.write_text(_MODULE.format(computations=computations, body=body))
    line = assert_refused(hloscope(*CYCLE_COMMANDS[command](path, first_good_hlo()), timeout=120), path,
                          position=True, words=(words,))
    if position is not None:
        assert f"{path}:{position[0]}:{position[1]}: " in line, line


@pytest.mark.parametrize("command", ["hlo stats", "diff"])
@needs_fixtures
def test_an_instruction_using_itself_in_a_dumped_module_of_a_run_is_refused(tmp_path, command):
    """`%neg.14 = f32[2]{0} negate(%neg.14)` in a run's after-optimizations dump: one line at the operand, where
    `diff` once walked the graph for ever."""
    good = good_run(tmp_path / "good")
    run = good_run(tmp_path / "broken")
    hlo = next((run / "hlo").glob("*after_optimizations.txt"))
    lines = hlo.read_text().splitlines(keepends=True)
    instruction = re.compile(r"\s*(?:ROOT )?%?([\w.\-]+) = [^ ]+ (?!parameter|constant)[a-z][\w-]*\((%?)([\w.\-]+)[,)]")
    number, match = next((n, m) for n, text in enumerate(lines) if (m := instruction.match(text)))
    lines[number] = lines[number][: match.start(3)] + match.group(1) + lines[number][match.end(3) :]
    hlo.write_text("".join(lines))
    result = hloscope(*RUN_COMMANDS[command](run, good), timeout=120)
    line = assert_refused(result, hlo, position=True, words=("its own operand",))
    assert f"{hlo}:{number + 1}:{match.start(2) + 1}: " in line, line


# A module whose metadata pushes its last instructions past the first 64 KB, where a NUL byte once went unseen.
_LONG_NAME = "x" * 70_000
_NUL_MODULE = ("HloModule m\n\nENTRY main {{\n  p = f32[4]{{0}} parameter(0), metadata={{op_name=\"jit(f)/{long}\"}}\n"
               "  ROOT a = f32[4]{{0}} add(p, p), metadata={{op_name=\"jit(f)/add\" source_file=\"é.py\" source_line=3}}\n}}\n")
NUL_PLACES = {
    "operand list": ("add(p, p)", "add(p,\0 p)"),
    "metadata value": ('"jit(f)/add"', '"jit(f)/a\0dd"'),
    "metadata key": ("source_line", "source\0_line"),
    "after a multi-byte character": ("é.py", "é\0.py"),
    "last line": ("}\n", "}\0\n"),
}


@pytest.mark.parametrize("newline", ["\n", "\r\n"])
@pytest.mark.parametrize("command", ["hlo stats", "diff BAD GOOD", "diff GOOD BAD"])
@pytest.mark.parametrize("place", list(NUL_PLACES))
@needs_fixtures
def test_a_nul_byte_anywhere_in_the_text_is_refused_at_its_position(tmp_path, place, command, newline):
    text = _NUL_MODULE.format(long=_LONG_NAME)
    old, new = NUL_PLACES[place]
    at = text.rindex(old)
    text = text[:at] + new + text[at + len(old) :]
    nul = text.index("\0")
    assert len(text[:nul].encode()) > 65536
    line, col = text.count("\n", 0, nul) + 1, nul - text.rfind("\n", 0, nul)  # characters, as the parser counts
    path = tmp_path / "late_nul.hlo"
    path.write_bytes(text.replace("\n", newline).encode())
    result = hloscope(*HLO_COMMANDS[command](path, first_good_hlo()), timeout=120)
    message = assert_refused(result, path, position=True, words=("NUL",))
    assert f"{path}:{line}:{col}: " in message, message


@pytest.mark.parametrize("command", ["hlo stats", "diff BAD GOOD", "diff GOOD BAD"])
@needs_fixtures
def test_hloscope_refuses_a_module_before_xla_runs_on_it(command):
    """A tuple shape nested 5,000 deep crashes XLA's cost analysis (signal 6): hloscope's own reading refuses the
    module first, in one line, with no warning of what XLA made of it (`diff` reads both sides before XLA runs)."""
    bad = BAD / "rel_deep_tuple_xla_crash.hlo"
    args = {"hlo stats": ["hlo", "stats", bad], "diff BAD GOOD": ["diff", bad, first_good_hlo()],
            "diff GOOD BAD": ["diff", "--json", first_good_hlo(), bad]}[command]
    assert_refused(hloscope(*args, timeout=300), bad, position=True, words=("nested too deeply",))
