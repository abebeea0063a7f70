"""The deterministic agent runtime that writes the journal, and its example agents."""

__all__: list[str] = []
