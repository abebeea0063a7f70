"""The README's pictures: docs/screenshots.py makes real PNGs, and every linked image exists.

The script drives Debian's Chromium (Playwright, /usr/bin/chromium). Without it the test
fails with the line that installs it (never a skip). The PNGs are read with the stdlib
(struct and zlib): signature, IHDR, and the pixels themselves, unfiltered.
"""

from __future__ import annotations

import importlib.util
import re
import struct
import subprocess
import sys
import zlib
from collections import Counter
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "docs" / "screenshots.py"
CHROMIUM = "/usr/bin/chromium"
INSTALL = "apt-get install -y chromium"
SIGNATURE = b"\x89PNG\r\n\x1a\n"
CHANNELS = {0: 1, 2: 3, 4: 2, 6: 4}  # colour type -> bytes per pixel at 8 bits
IMAGE = re.compile(r"!\[([^\]]*)\]\(([^)\s]+)[^)]*\)|<img\b[^>]*\bsrc=\"([^\"]+)\"")


def _paeth(a: int, b: int, c: int) -> int:
    p = a + b - c
    pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
    return a if pa <= pb and pa <= pc else b if pb <= pc else c


def _unfilter(kind: int, line: bytearray, prev: bytearray, bpp: int) -> bytearray:
    if kind == 1:
        for i in range(bpp, len(line)):
            line[i] = (line[i] + line[i - bpp]) & 255
    elif kind == 2:
        line = bytearray((x + up) & 255 for x, up in zip(line, prev, strict=True))
    elif kind == 3:
        for i in range(len(line)):
            left = line[i - bpp] if i >= bpp else 0
            line[i] = (line[i] + (left + prev[i]) // 2) & 255
    elif kind == 4:
        for i in range(len(line)):
            left, corner = (line[i - bpp], prev[i - bpp]) if i >= bpp else (0, 0)
            line[i] = (line[i] + _paeth(left, prev[i], corner)) & 255
    else:
        assert kind == 0, f"filter type {kind}"
    return line


def read_png(data: bytes) -> tuple[int, int, Counter[bytes]]:
    """Width, height and how many pixels of each colour (8-bit, not interlaced PNGs)."""
    assert data[:8] == SIGNATURE, "not a PNG signature"
    chunks: list[tuple[bytes, bytes]] = []
    pos = 8
    while pos < len(data):
        size, kind = struct.unpack(">I4s", data[pos : pos + 8])
        body = data[pos + 8 : pos + 8 + size]
        (crc,) = struct.unpack(">I", data[pos + 8 + size : pos + 12 + size])
        assert zlib.crc32(kind + body) == crc, f"{kind!r}: bad CRC"
        chunks.append((kind, body))
        pos += 12 + size
    assert chunks[0][0] == b"IHDR" and chunks[-1][0] == b"IEND"
    width, height, depth, colour, _, _, interlace = struct.unpack(">IIBBBBB", chunks[0][1])
    assert depth == 8 and colour in CHANNELS and interlace == 0
    bpp = CHANNELS[colour]
    raw = zlib.decompress(b"".join(body for kind, body in chunks if kind == b"IDAT"))
    stride = width * bpp
    assert len(raw) == height * (stride + 1)
    colours: Counter[bytes] = Counter()
    prev = bytearray(stride)
    for y in range(height):
        start = y * (stride + 1)
        line = _unfilter(raw[start], bytearray(raw[start + 1 : start + 1 + stride]), prev, bpp)
        colours.update(bytes(line[x : x + bpp]) for x in range(0, stride, bpp))
        prev = line
    return width, height, colours


def test_the_script_makes_two_real_pictures(tmp_path: Path) -> None:
    if not Path(CHROMIUM).exists():
        pytest.fail(f"no browser at {CHROMIUM}: install it with `{INSTALL}`")
    out = tmp_path / "images"
    made = subprocess.run(
        [sys.executable, str(SCRIPT), "--out", str(out)], capture_output=True, text=True, cwd=ROOT
    )
    assert made.returncode == 0, made.stderr
    assert sorted(p.name for p in out.iterdir()) == ["share.png", "tui.png"]
    sizes = {}
    for path in out.iterdir():
        data = path.read_bytes()
        assert len(data) < 300_000, f"{path.name}: {len(data)} bytes"
        width, height, colours = read_png(data)
        sizes[path.name] = (width, height)
        pixels = width * height
        assert len(colours) > 50, f"{path.name}: {len(colours)} colours"
        assert colours.most_common(1)[0][1] < 0.9 * pixels, f"{path.name}: one colour"
    assert sizes["share.png"] == (1300, 800)
    width, height = sizes["tui.png"]  # 110x32 cells of Textual's SVG, at a scale of 1
    assert 900 <= width <= 1800 and 500 <= height <= 1100 and width > height


def load_script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("screenshots", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_without_the_browser_one_line_and_exit_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    script = load_script()
    monkeypatch.setattr(script, "CHROMIUM", str(tmp_path / "no-chromium"))
    assert script.main(["--out", str(tmp_path / "images")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no browser at" in err and INSTALL in err
    assert not (tmp_path / "images").exists()


def test_an_out_that_is_a_file_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "f").write_text("x")
    assert load_script().main(["--out", str(tmp_path / "f")]) == 2
    err = capsys.readouterr().err
    assert err == f"screenshots: --out {tmp_path / 'f'}: not a folder\n"


DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


@pytest.mark.parametrize("path", DOCS, ids=[p.name for p in DOCS])
def test_every_linked_image_is_in_the_repository(path: Path) -> None:
    doc = path.name
    text = path.read_text(encoding="utf-8")
    for match in IMAGE.finditer(text):
        alt, target = match.group(1), match.group(2) or match.group(3)
        assert not re.match(r"[a-z]+:", target), f"{doc}: {target} is not in the repository"
        assert (path.parent / target).is_file(), f"{doc}: {target} does not exist"
        if match.group(2) is not None:
            assert alt.strip(), f"{doc}: {target} has no alt text"
        assert (path.parent / target).read_bytes()[:8] == SIGNATURE or not target.endswith(".png")


def test_the_readme_shows_both_pictures() -> None:
    linked = {m.group(2) for m in IMAGE.finditer((ROOT / "README.md").read_text(encoding="utf-8"))}
    assert {"docs/images/tui.png", "docs/images/share.png"} <= linked
