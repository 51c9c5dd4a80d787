"""The tested block of an explain report (explain --test-hypotheses) as text the terminal, Markdown and HTML
renderers lay out alike: the lead sentences (what each change closed, best-supported first), a row per hypothesis,
the interaction, and what did not run."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from hloscope.explain.experiments import HypothesisTest, Interaction, TestedBlock

TESTED_HEADING = "Tested hypotheses (controlled re-runs)"
NOT_TESTED = "could not test"  # hloscope.explain.experiments.NOT_TESTED
VERDICT_ORDER = {"confirmed": 0, "partly": 1, "refuted": 2, "cannot tell": 3, NOT_TESTED: 4}
VERDICT_STYLES = {"confirmed": "green", "partly": "yellow", "refuted": "red", "cannot tell": "dim", NOT_TESTED: "dim"}
TEST_COLUMNS = ("hypothesis", "change", "verdict", "share closed", "gap before", "gap after", "why")


@dataclass
class PairView:
    heading: str
    directory: str | None
    rows: list[tuple[str, ...]]  # one per hypothesis, TEST_COLUMNS
    verdicts: list[str]  # each row's verdict (for styling)
    interaction: str | None
    not_run: list[str] = field(default_factory=list)


def lead_lines(block: TestedBlock) -> list[str]:
    """One sentence per tested hypothesis, confirmed first: "matching the precision (--precision fp32) closes 71%
    (64% to 78%) of the gap between ...: confirmed"."""
    tests = [(pair, test) for pair in block.pairs for test in pair.tests if test.verdict != NOT_TESTED]
    tests.sort(key=lambda item: VERDICT_ORDER.get(item[1].verdict, 9))
    lines = [f"{_change_phrase(test)} {_share_phrase(test)} of the gap between {pair.slow} and {pair.fast}: "
             f"{test.verdict}" for pair, test in tests]
    untested = sum(1 for pair in block.pairs for test in pair.tests if test.verdict == NOT_TESTED)
    if untested:
        lines.append(f"{untested} hypothesis(es) untested (listed below with why)")
    if not block.pairs:
        lines.append("no significant gap between configurations that could be run again: nothing was tested")
    if block.stopped:
        lines.append(f"stopped early: {block.stopped}; what finished is kept")
    return lines


def pair_views(block: TestedBlock) -> list[PairView]:
    return [PairView(f"{pair.slow} (slower) against {pair.fast}"
                     + (f", {pair.repeats} process(es) per configuration" if pair.repeats else ""),
                     pair.directory, [_row(test) for test in pair.tests], [test.verdict for test in pair.tests],
                     _interaction_text(pair.interaction), list(pair.not_run)) for pair in block.pairs]


def _row(test: HypothesisTest) -> tuple[str, ...]:
    found, change = test.closure, test.change
    if found is None:
        return (", ".join(test.rules), change, "untested" if test.verdict == NOT_TESTED else test.verdict, "", "", "",
                test.why)
    share = f"{found.share:.0%}" + (f" ({found.share_ci[0]:.0%} to {found.share_ci[1]:.0%})" if found.share_ci else "")
    return (", ".join(test.rules), change, test.verdict, share, _interval(found.gap_before_s, found.gap_before_ci_s),
            _interval(found.gap_after_s, found.gap_after_ci_s), test.why)


def _interaction_text(found: Interaction | None) -> str | None:
    if found is None:
        return None
    return f"all closing changes together ({found.applied}): {found.verdict}; {found.why}"


def _change_phrase(test: HypothesisTest) -> str:
    """The title and the option the re-run was given: "(--precision fp32)", or an on/off option as it is written
    ("(--no-donate)")."""
    target = test.change.rpartition(" -> ")[2]
    if target.startswith(("--", "without ", "no ")):
        return f"{test.title} ({target})"
    return f"{test.title} ({test.change.split(' ')[0]} {test.fast_value})"


def _share_phrase(test: HypothesisTest) -> str:
    found = test.closure
    if found is None:
        return "was not measured"
    if found.share_ci is None:
        return "could not be set against"
    return f"closes {found.share:.0%} ({found.share_ci[0]:.0%} to {found.share_ci[1]:.0%})"


def _interval(value: float, interval: list[float]) -> str:
    return f"{value * 1e3:.3g} ms ({interval[0] * 1e3:.3g} to {interval[1] * 1e3:.3g})"
