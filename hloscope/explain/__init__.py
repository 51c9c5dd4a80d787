"""Rank what explains the step-time gap between modes: pure rules over per-mode summaries (see docs/diff-explain.md)."""
