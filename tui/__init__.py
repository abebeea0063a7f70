"""The terminal front door: the `agent-journal` CLI and the Textual app."""

__all__: list[str] = []
