"""A replay needs no API key, also for code that builds its client with ``OpenAI()`` and so
refuses to be imported without ``OPENAI_API_KEY``."""

from __future__ import annotations

import importlib
import os
import sys

import openai
import pytest

from journal import Journal
from replay import Replayer

from .fake_openai import serving

MODULE = "tests.keyless_app"


def fresh() -> object:
    sys.modules.pop(MODULE, None)
    return importlib.import_module(MODULE)


def test_code_that_builds_its_client_from_the_environment_replays_with_no_key(
    journal: Journal, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "local")
    with serving() as url:
        monkeypatch.setenv("OPENAI_BASE_URL", url)
        app = fresh()
        app.capture.journal = journal  # type: ignore[attr-defined]
        assert app.ask("order 5") == "function_call"  # type: ignore[attr-defined]
    (summary,) = journal.sessions()

    monkeypatch.delenv("OPENAI_API_KEY")
    with pytest.raises(openai.OpenAIError, match="OPENAI_API_KEY"):
        fresh()  # the code itself cannot start without a key
    sys.modules.pop(MODULE, None)

    result = Replayer().replay(journal, summary.session_id)
    assert result.identical, result.first_divergence
    assert "OPENAI_API_KEY" not in os.environ  # the placeholder was the replay's alone
