"""Make the README's pictures from the real thing: the terminal UI and a shared page.

    python docs/screenshots.py [--out docs/images]

The demo journal is built in a temporary folder (the code of ``agent-journal demo``). Then:

- ``tui.png``: the terminal UI, headless (Textual's ``run_test``) at 110x32 on the demo's
  buggy refund, at the refund over the balance (the timeline, the event and the state it
  changed); Textual's SVG
  screenshot, drawn to PNG by Debian's Chromium.
- ``share.png``: the page ``agent-journal share demo-refund-buggy-s0 --replay --agent
  agentloop.examples.refund:build_fixed`` writes (the replay with the fixed guard diverges),
  in Chromium at 1300x800.

Chromium is /usr/bin/chromium driven by Playwright (no browser download); the pages are
loaded from file:// with every other request refused, so nothing is fetched. Without the
browser: one error line and exit status 2.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentloop.examples import run_demo
from journal import Journal
from replay import ReplayOptions
from tui.share import gather, write_page

# the tests' way of opening the app headless and waiting for it (a repository tool: the
# checkout's root on the path, as when run from anywhere in it)
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tests.tui_helpers import open_app, settle  # noqa: E402

if TYPE_CHECKING:
    from playwright.sync_api import ViewportSize

CHROMIUM = "/usr/bin/chromium"
INSTALL = "apt-get install -y chromium"
SESSION = "demo-refund-buggy-s0"
FIXED = "agentloop.examples.refund:build_fixed"
REFUND_SEQ = 5  # the refund over the balance: where the fixed guard's replay diverges
TUI_SIZE = (110, 32)
PAGE_SIZE: ViewportSize = {"width": 1300, "height": 800}
NAMES = ("tui.png", "share.png")


def tui_svg(db: Path) -> str:
    """The terminal UI on the buggy refund at the refund it should not make, as Textual's SVG."""
    app = open_app(db, session=SESSION, read_only=True)

    async def run() -> str:
        async with app.run_test(size=TUI_SIZE) as pilot:
            await settle(pilot)
            for _ in range(REFUND_SEQ):  # down to the refund the guard let through
                await pilot.press("j")
            await settle(pilot)
            return app.export_screenshot(title="agent-journal tui")

    return asyncio.run(run())


def share_page(db: Path, path: Path) -> Path:
    """The shared page of the buggy refund replayed with the fixed guard (a diff page)."""
    with Journal.open(db) as journal:
        runs = gather(journal, SESSION, replay=ReplayOptions(agent=FIXED))
        try:
            write_page(runs, path)
        finally:
            runs.close()
    return path


def _offline(route: Any) -> None:
    """Serve file:// and data: URLs; refuse the rest (the SVG names a web font)."""
    if route.request.url.startswith(("file:", "data:")):
        route.continue_()
    else:
        route.abort()


def photograph(svg: Path, page_html: Path, out: Path) -> list[Path]:
    """Draw the SVG and the page to PNG in Chromium, in ``out``; return the files written."""
    from playwright.sync_api import sync_playwright

    written = [out / name for name in NAMES]
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport=PAGE_SIZE, device_scale_factor=1)
            page.route("**/*", _offline)
            page.goto(svg.as_uri())
            box = page.evaluate(
                "(() => { const r = document.documentElement.getBoundingClientRect();"
                " return [Math.ceil(r.width), Math.ceil(r.height)]; })()"
            )
            page.set_viewport_size({"width": int(box[0]), "height": int(box[1])})
            page.screenshot(path=str(written[0]))
            page.set_viewport_size(PAGE_SIZE)
            page.goto(page_html.as_uri())
            page.wait_for_selector("html[data-ready='1']")
            page.screenshot(path=str(written[1]))
        finally:
            browser.close()
    return written


def make(out: Path) -> list[Path]:
    """Build the demo journal in a temporary folder and write both pictures into ``out``.

    Both are drawn in the temporary folder first, then moved: a failure leaves ``out`` as
    it was.
    """
    with tempfile.TemporaryDirectory(prefix="screenshots-") as scratch:
        folder = Path(scratch)
        db = folder / "demo.db"
        with Journal.open(db) as journal:
            run_demo(journal, seed=0)
        svg = folder / "tui.svg"
        svg.write_text(tui_svg(db), encoding="utf-8")
        page_html = share_page(db, folder / "share.html")
        drawn = photograph(svg, page_html, folder)
        out.mkdir(parents=True, exist_ok=True)
        return [Path(shutil.move(path, out / path.name)) for path in drawn]


def main(argv: list[str] | None = None) -> int:
    """Parse the options, check for the browser, make the pictures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    default = Path(__file__).resolve().parent / "images"
    parser.add_argument("--out", type=Path, default=default, help="folder of the PNGs")
    args = parser.parse_args(argv)
    if args.out.exists() and not args.out.is_dir():
        print(f"screenshots: --out {args.out}: not a folder", file=sys.stderr)
        return 2
    if not Path(CHROMIUM).exists():
        print(f"screenshots: no browser at {CHROMIUM} (install it: {INSTALL})", file=sys.stderr)
        return 2
    try:
        written = make(args.out)
    except OSError as error:
        print(f"screenshots: {error}", file=sys.stderr)
        return 2
    for path in written:
        print(f"{path} {path.stat().st_size} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
