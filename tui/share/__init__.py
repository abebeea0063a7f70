"""``agent-journal share``: a session as one self-contained HTML page, to send to anyone.

`gather` copies the runs a page shows (the session, the run it is diffed with, or its
replay with the current code) into a scratch journal, redacted as fixtures are;
`write_page` writes them as one HTML file that needs no network and runs nothing but its
own script (see `tui.share.page`)::

    from journal import Journal
    from tui.share import gather, write_page

    with Journal.open("agent-journal.db") as journal:
        runs = gather(journal, "demo-refund-buggy-s0")
        try:
            write_page(runs, "refund.html")
        finally:
            runs.close()
"""

from .data import CHUNK, page_data
from .page import write_page
from .runs import SharedRuns, gather

__all__ = ["CHUNK", "SharedRuns", "gather", "page_data", "write_page"]
