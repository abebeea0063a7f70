"""How a shared page's load time grows: a 10,000-event page in Chromium against a 100-event one.

    python bench/share_bench.py [--repeat R] [--big N] [--small N]

Both sessions have the same realistic shape (`_common.session_events`); each page is written
by `agent-journal share` code (`tui.share`), then opened ``--repeat`` times in a fresh page
of Debian's Chromium (Playwright, /usr/bin/chromium) from file://. Load time: from navigation
start to the page's ready mark (rows parsed, the first rows and the first event's detail
drawn), the page's own `performance.now()`; and when the whole document was read
(DOMContentLoaded: the later chunks, parsed after the first paint). Target: big / small
<= 3x for the load. Medians.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

from _common import Report, Table, machine, report, session_events

from journal import Journal
from tui.share import gather, write_page

CHROMIUM = "/usr/bin/chromium"


def build(folder: Path, events: int) -> tuple[Path, int]:
    with Journal.open(":memory:") as journal:
        journal.append(f"bench-{events}", list(session_events(0, events)))
        runs = gather(journal, f"bench-{events}")
        try:
            path = folder / f"share-{events}.html"
            return path, write_page(runs, path)
        finally:
            runs.close()


def load_times(paths: list[Path], repeat: int) -> tuple[list[list[float]], list[list[float]]]:
    """Per page: the ready marks, and when the whole document was read (DOMContentLoaded)."""
    from playwright.sync_api import sync_playwright

    times: list[list[float]] = [[] for _ in paths]
    whole: list[list[float]] = [[] for _ in paths]
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        for _ in range(repeat):
            for index, path in enumerate(paths):  # the cases take turns
                page = browser.new_page(viewport={"width": 1300, "height": 800})
                page.goto(path.as_uri())
                page.wait_for_selector("html[data-ready='1']")
                times[index].append(float(page.evaluate("window.agentJournalReady")))
                page.wait_for_load_state("load")
                whole[index].append(
                    float(
                        page.evaluate(
                            "performance.getEntriesByType('navigation')[0].domContentLoadedEventEnd"
                        )
                    )
                )
                page.close()
        browser.close()
    return times, whole


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--small", type=int, default=100)
    parser.add_argument("--big", type=int, default=10_000)
    args = parser.parse_args()
    if not Path(CHROMIUM).exists():
        print(
            f"share_bench: no browser at {CHROMIUM} (apt-get install -y chromium)", file=sys.stderr
        )
        return 2
    with tempfile.TemporaryDirectory() as folder:
        built = [build(Path(folder), n) for n in (args.small, args.big)]
        times, whole = load_times([path for path, _ in built], args.repeat)
    small, big = (statistics.median(t) for t in times)
    read_small, read_big = (statistics.median(t) for t in whole)
    rows = [
        [f"{n:,} events", f"{size / 1e6:.2f} MB", f"{median:.0f} ms", f"{read:.0f} ms"]
        for n, (_, size), median, read in zip(
            (args.small, args.big), built, (small, big), (read_small, read_big), strict=True
        )
    ]
    rows.append(
        [
            "big / small",
            f"{built[1][1] / built[0][1]:.1f}x",
            f"{big / small:.2f}x",
            f"{read_big / read_small:.2f}x",
        ]
    )
    return report(
        Report(
            [
                [f"{machine()}; Chromium at {CHROMIUM}; median of {args.repeat} loads"],
                [Table(["page", "size>", "load (to ready)>", "whole document read>"], rows)],
            ]
        )
    )


if __name__ == "__main__":
    raise SystemExit(main())
