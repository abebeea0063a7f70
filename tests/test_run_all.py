"""bench/run_all.py over fake benches: the table, the JSON, skipped and crashing benches.

No bench is measured here and no timing is asserted: the fake benches return fixed ratios.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from types import ModuleType

import pytest

from .helpers import REPO

BENCHES = {
    "fake_ok": """
from _common import Ratio

def quick_ratios():
    return [
        Ratio("ours a", "reference a", "cpu", 1.5, "≤ 2×"),
        Ratio("ours b", "reference b", "wall", 2.5, "≤ 2×"),
        Ratio("ours c", "reference c", "rss", 4.0, "≥ 3×"),
        Ratio("context", "a peer", "cpu", 0.5, ""),
    ]
""",
    "fake_rounds": """
from pathlib import Path
from _common import Ratio

def quick_ratios():
    counter = Path(__file__).with_suffix(".count")
    calls = len(counter.read_text()) if counter.exists() else 0
    counter.write_text("x" * (calls + 1))
    return [Ratio("round", "its reference", "cpu", [1.0, 9.0, 2.0][calls], "≤ 3×")]
""",
    "fake_crash": """
def quick_ratios():
    raise RuntimeError("boom | the bench broke\\nsecond line")
""",
    "fake_exit": """
import os

def quick_ratios():
    os._exit(3)
""",
    "fake_wrong": """
def quick_ratios():
    return [1.5]
""",
    "fake_none": """
RATIO = 1.0
""",
}


@pytest.fixture(scope="module")
def run_all() -> ModuleType:
    sys.path.insert(0, str(REPO / "bench"))
    try:
        import run_all
    finally:
        sys.path.remove(str(REPO / "bench"))
    return run_all


@pytest.fixture
def benches(tmp_path: Path) -> Path:
    for name, text in BENCHES.items():
        (tmp_path / f"{name}.py").write_text(text)
    return tmp_path


def cells(line: str) -> list[str]:
    return [cell.strip() for cell in line.strip().strip("|").split(" | ")]


def test_the_table_has_a_row_per_ratio_and_names_what_did_not_run(
    run_all: ModuleType, benches: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["--quick", "--only", "fake_ok", "fake_none", "fake_gone"]
    code = run_all.main(argv, directory=benches)
    out = capsys.readouterr().out.splitlines()
    assert code == 0
    assert out[0].startswith("`python bench/run_all.py --quick --only fake_ok fake_none fake_gone`")
    assert out[0].endswith("(1 round per bench):")
    table = [line for line in out if line.startswith("|")]
    assert cells(table[0]) == ["what", "reference", "clock", "ratio", "target", "met"]
    assert set(table[1]) == {"|", "-", ":"}
    assert [cells(line) for line in table[2:]] == [
        ["ours a", "reference a", "cpu", "1.50×", "≤ 2×", "yes"],
        ["ours b", "reference b", "wall", "2.50×", "≤ 2×", "NO"],
        ["ours c", "reference c", "rss", "4.00×", "≥ 3×", "yes"],
        ["context", "a peer", "cpu", "0.50×", "", ""],
    ]
    assert out[-1] == (
        "Not run: fake_none (bench/fake_none.py has no quick_ratios()); "
        "fake_gone (no bench/fake_gone.py)."
    )


def test_json_gives_the_rows_the_median_of_rounds_and_each_failure_with_exit_1(
    run_all: ModuleType, benches: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    failing = ["fake_crash", "fake_exit", "fake_wrong"]
    argv = ["--rounds", "3", "--json", "--only", "fake_rounds", *failing]
    code = run_all.main(argv, directory=benches)
    found = json.loads(capsys.readouterr().out)
    assert code == 1
    assert found["command"] == "python bench/run_all.py --rounds 3 --only fake_rounds " + " ".join(
        failing
    )
    assert found["machine"] and found["rounds"] == 3 and found["skipped"] == {}
    assert found["rows"][0] == {
        "bench": "fake_rounds",
        "what": "round",
        "reference": "its reference",
        "clock": "cpu",
        "ratio": 2.0,
        "target": "≤ 3×",
        "met": "yes",
    }
    assert found["rows"][1:] == [
        {"bench": "fake_crash", "error": "RuntimeError: boom | the bench broke"},
        {"bench": "fake_exit", "error": "the child process exited with code 3: no output"},
        {
            "bench": "fake_wrong",
            "error": "TypeError: quick_ratios() returned [1.5], not a list of Ratio",
        },
    ]


def test_an_error_row_in_the_table_names_the_bench_and_its_error(run_all: ModuleType) -> None:
    line = run_all.Line("fake_crash", error="RuntimeError: boom | the bench broke")
    assert line.cells() == [
        "fake_crash: quick_ratios() failed",
        "RuntimeError: boom \\| the bench broke",
        "",
        "",
        "",
        "ERROR",
    ]
