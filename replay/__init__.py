"""Timelines of state, deterministic re-run, fork, diff and regression fixtures."""

__all__: list[str] = []
