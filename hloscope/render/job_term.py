"""Rich terminal tables of the job view (`hloscope.trace.job.job_view`): ranks, steps, collectives, kernel mix."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.console import Console
from rich.table import Table
from rich.text import Text

from hloscope.render import fmt

if TYPE_CHECKING:  # render/ imports no analysis: it reads the view's attributes
    from hloscope.trace.results import JobView


def render_job(console: Console, view: JobView, rows: int = 16, label: str = "") -> None:
    """`label`: which mode's ranks these are (" of mode jax") when the traces are a comparison's."""
    view = fmt.printable(view)  # host and kernel names from the traces are shown escaped
    ranks = Table(title=f"Job{label}: {len(view.ranks)} ranks", title_justify="left")
    for column in ("rank", "host", "steps", "step ms (median)", "busy ms", "idle ms", "kernels", "collective wait ms",
                   "last to arrive"):
        ranks.add_column(column, justify="left" if column == "host" else "right", overflow="fold")
    for rank in view.ranks:
        ranks.add_row(str(rank.rank), Text(rank.host), str(rank.steps), fmt.ms_column(rank.median_step_us),
                      fmt.ms_column(rank.busy_us), fmt.ms_column(rank.idle_us), f"{rank.kernels:,}",
                      fmt.ms_column(rank.collective_wait_us), str(rank.last_to_arrive))
    console.print(ranks)
    if view.steps:
        steps = Table(title=f"Slowest rank per step{label}", title_justify="left")
        for column in ("step", "ranks", "slowest rank", "its step ms", "median ms", "behind median ms",
                       "behind next ms", "next rank"):
            steps.add_column(column, justify="right")
        for step in view.steps[:rows]:
            steps.add_row(str(step.step), str(step.ranks), str(step.slowest_rank), fmt.ms_column(step.slowest_us),
                          fmt.ms_column(step.median_us), fmt.ms_column(step.behind_median_us),
                          fmt.ms_column(step.behind_next_us), str(step.next_rank))
        console.print(steps)
    collectives = view.collectives
    if collectives.matched:
        console.print(
            f"collectives matched on all {collectives.ranks} ranks: {collectives.matched:,} "
            f"({collectives.unmatched:,} not on every rank); waiting (start spread) "
            f"{fmt.ms_column(collectives.start_spread_us)} ms, transfer (shortest duration) "
            f"{fmt.ms_column(collectives.transfer_us)} ms", highlight=False)
        top = Table(title="Collectives with the widest start spread", title_justify="left")
        top.add_column("collective (kernel, no arguments)", overflow="ellipsis", no_wrap=True, max_width=48)
        for column in ("call", "spread ms", "transfer ms", "longest ms", "first rank", "last rank"):
            top.add_column(column, justify="right")
        for call in collectives.top:
            name = call.name.split("(", 1)[0] or call.name
            top.add_row(Text(name), str(call.occurrence), fmt.ms_column(call.start_spread_us),
                        fmt.ms_column(call.shortest_us), fmt.ms_column(call.longest_us), str(call.first_rank),
                        str(call.last_rank))
        console.print(top)
    mix = view.kernel_mix
    if mix.ranks:
        differs = mix.differs
        if differs:
            console.print(f"kernel mix differs from the median rank's (distance > {mix.threshold:g}) on rank(s) "
                          f"{', '.join(map(str, differs))}", highlight=False)
            table = Table(title="Ranks whose kernel mix differs", title_justify="left")
            for column in ("rank", "distance", "more than the median", "less than the median"):
                table.add_column(column, justify="right" if column in ("rank", "distance") else "left",
                                 overflow="fold")
            by_rank = {row.rank: row for row in mix.ranks}
            for number in differs[:rows]:
                row = by_rank[number]
                table.add_row(str(number), f"{row.distance:.3f}",
                              Text("\n".join(f"{m.name[:50]} (+{m.share_delta:.1%})" for m in row.more)),
                              Text("\n".join(f"{m.name[:50]} ({m.share_delta:.1%})" for m in row.less)))
            console.print(table)
        else:
            console.print(f"kernel mix: every rank within {mix.threshold:g} of the median rank's", highlight=False)
    console.print()
