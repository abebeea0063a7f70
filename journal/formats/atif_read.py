"""Reading ATIF files: the documents of a file, each validated with the `atif` package's models.

A file holds one trajectory (a JSON object, pretty-printed or not) or JSON Lines of them.
`validate_trajectory` checks one with the `atif` models (sequential step ids, ISO 8601
times, agent-only fields on agent steps, results that answer a call of their step, embedded
subagents with unique ids). The package reads v1.8 and v1.7 alike and does not look at
``schema_version``; this module reads those two only, and refuses in a v1.7 document the
one shape v1.8 added, audio content parts. Every refusal is one line: ``file:line`` for
JSON, the file and the step and field for the rest.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import orjson
from pydantic import ValidationError

from ..errors import InvalidInputError

__all__ = ["MAX_SUBAGENT_DEPTH", "OURS", "VERSIONS", "documents", "validate_trajectory"]

VERSIONS = ("ATIF-v1.7", "ATIF-v1.8")
"""The ``schema_version`` values read."""
OURS = "agent_journal"
"""The key of this project's corrections in an ``extra`` (see `journal.formats.atif_export`)."""
MAX_SUBAGENT_DEPTH = 8
"""Subagents nested deeper than this are refused (hostile input, not a real run)."""


def _has_audio(value: Any) -> bool:
    if isinstance(value, dict):
        if value.get("type") == "audio":
            return True
        return any(_has_audio(item) for item in value.values())
    if isinstance(value, list):
        return any(_has_audio(item) for item in value)
    return False


def _location(loc: Sequence[int | str]) -> str:
    text = ""
    for part in loc:
        text += f"[{part}]" if isinstance(part, int) else f".{part}" if text else str(part)
    return text or "the trajectory"


def validate_trajectory(document: Any, where: str) -> Any:
    """Validate one trajectory with the `atif` models; return the `atif.Trajectory`.

    Raises:
        InvalidInputError: one line naming ``where`` and the step and field at fault.
    """
    try:
        from atif import Trajectory
    except ImportError:
        raise InvalidInputError(
            f"{where}: ATIF needs the atif package: pip install 'agent-journal[atif]'"
        ) from None
    if not isinstance(document, dict):
        raise InvalidInputError(
            f"{where}: a trajectory is a JSON object, not {type(document).__name__}"
        )
    version = document.get("schema_version")
    if version not in VERSIONS:
        raise InvalidInputError(
            f"{where}: schema_version {version!r:.40} is not read ({', '.join(VERSIONS)})"
        )
    try:
        trajectory = Trajectory.model_validate(document)
    except ValidationError as e:
        first = e.errors()[0]
        raise InvalidInputError(
            f"{where}: {_location(first['loc'])}: {first['msg']}"
            + (f" (and {e.error_count() - 1} more)" if e.error_count() > 1 else "")
        ) from None
    except RecursionError:
        raise InvalidInputError(f"{where}: the trajectory is nested too deeply") from None
    _check_versions(trajectory, where, 0)
    return trajectory


def _check_versions(trajectory: Any, where: str, depth: int) -> None:
    if depth > MAX_SUBAGENT_DEPTH:
        raise InvalidInputError(f"{where}: subagents nested deeper than {MAX_SUBAGENT_DEPTH}")
    if trajectory.schema_version not in VERSIONS:
        raise InvalidInputError(
            f"{where}: subagent {trajectory.trajectory_id!r}: schema_version "
            f"{trajectory.schema_version!r:.40} is not read ({', '.join(VERSIONS)})"
        )
    if trajectory.schema_version == "ATIF-v1.7" and _has_audio(
        [step.model_dump(mode="json") for step in trajectory.steps]
    ):
        raise InvalidInputError(f"{where}: an audio content part in ATIF-v1.7 (audio is v1.8 on)")
    for sub in trajectory.subagent_trajectories or []:
        _check_versions(sub, where, depth + 1)


def _parses(line: bytes) -> bool:
    try:
        orjson.loads(line)
    except orjson.JSONDecodeError:
        return False
    return True


def documents(path: str | Path) -> Iterator[tuple[str, Any]]:
    """Each trajectory of a file with where it is: the file, or ``file:line`` for JSON Lines."""
    try:
        data = Path(path).read_bytes()
    except OSError as e:
        raise InvalidInputError(f"{path}: cannot read: {e.strerror or e}") from None
    try:
        yield str(path), orjson.loads(data)
        return
    except orjson.JSONDecodeError as whole:
        lines = data.splitlines()
        if len(lines) < 2 or not _parses(lines[0]):  # one document (pretty-printed), broken
            raise InvalidInputError(f"{path}:{whole.lineno}: not JSON: {whole.msg}") from None
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            yield f"{path}:{number}", orjson.loads(line)
        except orjson.JSONDecodeError as e:
            raise InvalidInputError(f"{path}:{number}: not JSON: {e.msg}") from None
