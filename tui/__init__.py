"""The front doors: the `agent-journal` CLI, the Textual app and the pytest plugin.

Nothing imports this package; it is entered through the console script, `JournalApp`
and the ``pytest11`` entry point (`tui.pytest_plugin`), and imports the others lazily.
"""

__all__: list[str] = []
