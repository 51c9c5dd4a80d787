"""Explain step-time gaps: significance of each gap, the measured ledger of each run's profiled steps, and hypotheses
that annotate the parts that differ (see docs/diff-explain.md)."""
