"""Coverage-guided fuzzing of the entry points that read outside data (opt-in, needs atheris).

    python -m tests.fuzz_atheris TARGET [-atheris_runs=N] [other libFuzzer flags]

TARGET is ``jsonl``, ``openai`` or ``atif`` (the fuzzed bytes are a file to ``import``), ``files``
(a file to ``diff`` and ``replay``) or ``sqlite`` (the bytes choose how a journal file is
crafted and which commands read it). Each input goes through the CLI in-process, checked
as `tests/test_drill_hostile.py` checks hypothesis' inputs: a traceback, an internal error,
an exit 2 without exactly one line naming where, or a journal changed by a refused input
makes atheris stop and report the input. ``pytest -m slow tests/test_drill_hostile.py``
runs each target for a bounded number of inputs.
"""

from __future__ import annotations

import importlib
import pkgutil
import sys
import tempfile
from pathlib import Path

import atheris

OURS = ("journal", "replay", "agentloop", "tui")
"""The packages whose code is instrumented for coverage: ours, not the libraries'
(instrumenting every loaded module took 5 minutes before the first input)."""


def import_instrumented() -> None:
    """Import every module of `OURS` with coverage instrumentation.

    Modules an optional dependency is missing for are left out (they cannot run here).
    """
    with atheris.instrument_imports(include=list(OURS)):
        for name in OURS:
            package = importlib.import_module(name)
            for module in pkgutil.walk_packages(package.__path__, f"{name}."):
                try:
                    importlib.import_module(module.name)
                except ImportError:
                    continue


def main(argv: list[str]) -> None:
    """Fuzz the target named by ``argv[1]``; the rest goes to libFuzzer."""
    import_instrumented()
    from .test_drill_hostile import (
        READERS,
        STRUCTURE,
        _check_crafted,
        _check_files,
        _check_import,
        make_corpus,
        make_crafted_base,
    )

    sql_tampers = [*STRUCTURE, "UPDATE events SET body = 'x' WHERE seq = 1"]
    target, flags = argv[1], argv[2:]
    folder = Path(tempfile.mkdtemp(prefix="fuzz-"))
    corpus = make_corpus(folder)
    base = make_crafted_base(folder)
    seeds = folder / "seeds"
    seeds.mkdir()
    (seeds / "seed").write_bytes(corpus[target if target in ("openai", "atif") else "jsonl"])

    def one_input(data: bytes) -> None:
        if target in ("jsonl", "openai", "atif"):
            _check_import(corpus, data, target)
        elif target == "files":
            _check_files(corpus, data)
        else:
            provider = atheris.FuzzedDataProvider(data)
            tampers = [
                provider.PickValueInList(sql_tampers)
                for _ in range(provider.ConsumeIntInRange(1, 3))
            ]
            commands = [READERS[provider.ConsumeIntInRange(0, len(READERS) - 1)]]
            _check_crafted(base, tampers, commands)

    atheris.Setup([argv[0], *flags, str(seeds)], one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main(sys.argv)
