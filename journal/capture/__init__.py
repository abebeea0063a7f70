"""Capture of code the user owns: `Recorder` for a hand-written loop, and `JournaledOpenAI`,
a wrapper of the official openai client that journals each model call."""

from .openai_client import JournaledOpenAI
from .recorder import (
    HaltSession,
    ModelOutput,
    Recorder,
    ReplayedFailure,
    describe_error,
    failure_of,
)

__all__ = [
    "HaltSession",
    "JournaledOpenAI",
    "ModelOutput",
    "Recorder",
    "ReplayedFailure",
    "describe_error",
    "failure_of",
]
