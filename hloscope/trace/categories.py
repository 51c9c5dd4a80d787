"""Which category of device time a kernel or XLA op belongs to, from its name: the fallback for executions that no HLO
module classifies (hloscope/trace/program_categories.py decides from the program where a run has its HLO).

The rules are data, not code: `hloscope/data/kernel_categories.toml`, an ordered table of kernel-name patterns for
NVIDIA and AMD libraries (CUTLASS, cuBLAS xmma/nvjet, Tensile/hipBLASLt `Cijk_*`, Composable Kernel, cuDNN, flash and
FMHA attention, Triton/Inductor, NCCL/RCCL, PyTorch's elementwise/reduce templates, memcpy/memset, copies and
transposes) and for XLA instruction names. The first rule with a matching pattern wins; no match is "other".
Matching is case-insensitive by lowercasing the name once and writing the patterns in lowercase: three times faster
than re.IGNORECASE on the long templated names of C++ kernels (a trace has hundreds of distinct names, ~300 characters
on average, each tried against a dozen rules). Only the first MATCHED_CHARS characters of a name are matched, so that
the time a name takes is bounded whatever it holds (the table's patterns are linear in the name's length; the bound
also covers a pattern that is not).
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from hloscope.trace.model import CATEGORIES, FUSION, LAYOUT, MATMUL, MEMCPY, MEMORY, MEMSET, OTHER, REDUCTION

TABLE = "kernel_categories.toml"
_UPPERCASE_LITERAL = re.compile(r"(?<!\\)[A-Z]")  # an uppercase letter that is not an escape such as \d, \B or \W


_REGEX_SYNTAX = frozenset(".^$*+?{}[]\\|()")

MATCHED_CHARS = 8192
"""How much of a kernel name the table's patterns see: its first 8,192 characters. The longest real name in the
fixtures has 5,123 (a PyTorch distribution kernel's template arguments); what names a library comes first."""


@dataclass(frozen=True)
class KernelRule:
    library: str
    category: str
    # The rule's patterns, matched against the lowercased name: those without regex syntax as plain substrings (`in`
    # is ~10x faster than a regex scanning a 300-character name); each of the others as a regex, searched only where
    # a text that every match of it contains occurs (its `required_text`, "" when none is certain).
    literals: tuple[str, ...]
    expressions: tuple[tuple[str, re.Pattern[str]], ...]

    def matches(self, lowered: str) -> bool:
        """Whether any of the rule's patterns occurs in `lowered` (the same answer as searching their alternation)."""
        for literal in self.literals:
            if literal in lowered:
                return True
        for required, expression in self.expressions:  # noqa: SIM110 (loops: any() of a generator is ~2x slower here)
            if required in lowered and expression.search(lowered):
                return True
        return False


def required_text(pattern: str) -> str:
    """The longest run of plain characters that every match of `pattern` contains, "" when none is certain: read
    conservatively, so that a name without it cannot match (an alternation, inline flags: ""; a character made
    optional by ?, * or {m,n} is not part of a run; groups, classes, escapes and . ^ $ end a run)."""
    if "(?" in pattern and re.search(r"\(\?[aiLmsux]", pattern):
        return ""
    runs, current, depth, i = [], "", 0, 0
    while i < len(pattern):
        char = pattern[i]
        if char == "\\":
            runs.append(current)
            current, i = "", i + 2
            continue
        if char == "[":  # a class, to its closing bracket (a "]" first in it is a member)
            end = i + 2 if pattern[i + 1 : i + 2] == "^" else i + 1
            end += pattern[end : end + 1] == "]"
            while end < len(pattern) and pattern[end] != "]":
                end += 2 if pattern[end] == "\\" else 1
            runs.append(current)
            current, i = "", end + 1
            continue
        if char in "()":
            depth += 1 if char == "(" else -1
        elif depth == 0 and char == "|":
            return ""
        elif depth == 0 and char in "?*{":
            current = current[:-1]  # the atom before a quantifier may be absent (a group's or class's: nothing kept)
            if char == "{":  # {m,n}: to its end
                closing = pattern.find("}", i)
                i = len(pattern) if closing < 0 else closing
        elif depth == 0 and char not in ".^$+":
            current += char
            i += 1
            continue
        runs.append(current)
        current, i = "", i + 1
    runs.append(current)
    return max(runs, key=len)


@lru_cache(maxsize=1)
def kernel_rules() -> tuple[KernelRule, ...]:
    """The table of `hloscope/data/kernel_categories.toml`, in order (a bad table raises ValueError naming the rule)."""
    text = _table_text()
    rules = []
    for index, entry in enumerate(tomllib.loads(text).get("rule", [])):
        where = f"{TABLE}: rule {index + 1} ({entry.get('library', '?')})"
        category, patterns = entry.get("category"), entry.get("patterns")
        if category not in CATEGORIES:
            raise ValueError(f"{where}: unknown category {category!r} (one of {', '.join(CATEGORIES)})")
        if not patterns or not all(isinstance(p, str) for p in patterns):
            raise ValueError(f"{where}: 'patterns' must be a non-empty list of strings")
        uppercase = next((p for p in patterns if _UPPERCASE_LITERAL.search(p)), None)
        if uppercase is not None:
            raise ValueError(f"{where}: pattern {uppercase!r} has uppercase letters: patterns match the lowercased name")
        literals = tuple(p for p in patterns if p and not _REGEX_SYNTAX.intersection(p))
        try:
            expressions = tuple((required_text(p), re.compile(p)) for p in patterns if p not in literals)
        except re.error as error:
            raise ValueError(f"{where}: bad pattern: {error}") from None
        rules.append(KernelRule(str(entry.get("library", "")), category, literals, expressions))
    return tuple(rules)


def _table_text() -> str:
    """The table, read beside the package's modules (as setuptools installs package data): importlib.resources would
    cost every `trace stats` 6 ms of imports (tempfile, shutil, zipfile)."""
    return (Path(__file__).resolve().parent.parent / "data" / TABLE).read_text(encoding="utf-8")


@lru_cache(maxsize=65536)
def kernel_rule(name: str) -> KernelRule | None:
    """The first rule of the table that matches the first MATCHED_CHARS characters of `name` (case-insensitively), or
    None."""
    lowered = name[:MATCHED_CHARS].lower()
    for rule in kernel_rules():
        if rule.matches(lowered):
            return rule
    return None


def category_of(name: str) -> str:
    """The category of one kernel / op name (case-insensitive), "other" when no rule matches."""
    rule = kernel_rule(name)
    return rule.category if rule is not None else OTHER


def category_for(name: str, kind: str) -> str:
    """Memory kinds are memcpy/memset whatever their name; otherwise the name decides."""
    if kind in (MEMCPY, MEMSET):
        return MEMORY
    return category_of(name)


# XLA's own category of an HLO instruction, which TPU profiles carry as the `hlo_category` stat of each "XLA Ops" event
# (XProf's op profile groups by it): what the instruction computes, where a TPU op name ("fusion.246") says nothing.
# XLA names fusions by kind ("loop fusion", "convolution fusion", "output fusion": a fusion into a dot's or a
# convolution's output), copies, transposes and reshapes "data formatting", other instructions by their opcode. Values
# not listed here (copy-start, async-done, custom-call, all-reduce, ...) are left to the opcode and name rules.
PROFILER_HLO_CATEGORIES = {
    "convolution": MATMUL, "convolution fusion": MATMUL, "dot": MATMUL, "dot fusion": MATMUL, "output fusion": MATMUL,
    "loop fusion": FUSION, "elementwise fusion": FUSION, "non-elementwise fusion": FUSION,
    "non-fusion elementwise": FUSION, "rank-1-broadcast binary fusion": FUSION, "broadcast": FUSION, "iota": FUSION,
    "input fusion": REDUCTION, "reduce fusion": REDUCTION, "reduce": REDUCTION, "reduce-window": REDUCTION,
    "sort": REDUCTION, "scatter": REDUCTION, "select-and-scatter": REDUCTION,
    "data formatting": LAYOUT,
}


def category_of_profiler_hlo(value: object) -> str | None:
    """Our category of XLA's `hlo_category` value (convolutions with dilations included), None when it does not say."""
    if not isinstance(value, str):
        return None
    if value.startswith("convolution"):  # "convolution base-dilated", "convolution window-dilated"
        return MATMUL
    return PROFILER_HLO_CATEGORIES.get(value)
