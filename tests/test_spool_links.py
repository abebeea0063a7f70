"""A spool path never makes drain follow a link: a symlinked spool, or a symlinked file
left by a drain, is refused with one line and exit 2, and what it points at is untouched."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from .helpers import run_cli


@pytest.mark.parametrize("target_kind", ["file", "folder"])
@pytest.mark.parametrize("where", ["spool", "left by a drain"])
def test_drain_refuses_a_symlink_and_touches_nothing(
    tmp_path: Path, target_kind: str, where: str
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    target = outside / "passwd"
    if target_kind == "file":
        target.write_text("root:x:0:0\n")
    else:
        target.mkdir()
    spool_dir = tmp_path / "spool"
    spool_dir.mkdir()
    link = spool_dir / ("x.spool" if where == "spool" else "x.spool.draining-0123456789ab")
    os.symlink(target, link)
    before = sorted(p.name for p in outside.iterdir())
    result = run_cli("drain", spool_dir / "x.spool", "--db", tmp_path / "y.db")
    assert result.exit_code == 2, result.stderr
    (line,) = result.stderr.splitlines()
    assert str(link) in line
    # a link to a folder in the spool's place is refused by the argument's check already
    refused_as = "is a directory" if (where, target_kind) == ("spool", "folder") else "symbolic"
    assert refused_as in line
    assert sorted(p.name for p in outside.iterdir()) == before
    assert target.exists() and link.is_symlink()
    if target_kind == "file":
        assert target.read_text() == "root:x:0:0\n"
    assert not (tmp_path / "y.db").exists()
