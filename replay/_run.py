"""What every replay path shares around running the code: where it writes, what follows the
recording, how it is judged, and when it is kept.

A path (the agentloop runtime, a hand-written loop) supplies only how to drive the code on
recorded ports (`Drive`). `replay_session` gives it a scratch journal and a
`RecordingFollower`, judges what it wrote (`replay._verdict.judge`), and copies the replay
into the journal when it was asked to save it, unless the replay ran with another
configuration and no live model: its recorded replies then answered a context they were
not recorded for, and such a run is reported, never kept.

A re-run can be kept as a fork instead (`ForkPoint`): that is how a session of code this
project cannot resume midway (an entry, a hand-written loop, a framework's agent) is
forked. The code runs again from the start; up to the fork point it must write what the
recording holds (otherwise nothing is kept: it is not a fork of that session), and from
there on it is served recorded outputs while it still matches, then the live model
answers, as in any replay with one. It is kept with ``forked_from`` and ``fork_seq`` as its
lineage rather than ``replay_of``.
"""

from __future__ import annotations

import asyncio
import contextvars
import inspect
from collections.abc import Awaitable, Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import Any

from agentloop import AgentLoadError, AgentLoopError
from capture import halt_of
from journal import (
    HaltSession,
    Journal,
    RecordedEvent,
    SessionConflictError,
    SessionStarted,
    SessionState,
    StoreError,
    describe_error,
    loads_strict,
)

from ._follow import RecordingFollower
from ._session import free_session_id, load_recording
from ._verdict import ReplayResult, Served, judge
from .normalize import DEFAULT_RULES, NormalizationRules
from .recorded import RecordedLLM, RecordedTools

__all__ = ["Drive", "Driver", "ForkPoint", "completed", "keep_replay", "replay_session", "run_code"]


@dataclass(frozen=True)
class ForkPoint:
    """Keep a re-run as a fork of its recording after event ``seq``, not as its replay."""

    seq: int


@dataclass(frozen=True)
class Drive:
    """How a run of the code on recorded ports went, as judging needs it."""

    llm: RecordedLLM
    tools: RecordedTools
    error: str | None
    """The one-line text of an exception that escaped the code, if any."""
    agent: str | None
    """The reference of what ran."""
    uncalled: frozenset[int] = frozenset()
    """The seqs of recorded outcomes of tools that only the replay's own wrappers run (the
    decorated tools of captured code), which no call of the code asked for."""


Driver = Callable[[Journal, str, RecordingFollower, Sequence[RecordedEvent], SessionStarted], Drive]
"""``drive(scratch, replay_id, follower, recorded, started)``: run the code, writing the
session ``replay_id`` into ``scratch``, with recorded ports that consult ``follower``."""


def run_code(code: Callable[[], object]) -> str | None:
    """Run the code under replay and return the one-line text of an exception it raised,
    if any: the verdict reports it, never crashes.

    A journal that refused a write (`StoreError`) and a replay that could not be set up
    (`AgentLoadError`) are raised instead: neither has a verdict.
    """
    try:
        code()
    except (StoreError, AgentLoadError):
        raise
    except (Exception, HaltSession) as error:
        return describe_error(error)
    except BaseExceptionGroup as group:  # a halt raised inside a task group (anyio, MCP)
        halt = halt_of(group)
        if halt is None:
            raise
        return describe_error(halt)
    return None


def completed(outcome: object) -> object:
    """``outcome``, or, for a coroutine (async code), what it returns once run to its end.

    Called from async code (a replay started inside a coroutine), the caller's event loop
    is busy waiting for this call: the coroutine then runs on a loop of its own in a worker
    thread, in a copy of the caller's context.
    """
    if not inspect.isawaitable(outcome):
        return outcome
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(_awaited(outcome))
    with ThreadPoolExecutor(1) as worker:
        run = contextvars.copy_context().run
        return worker.submit(run, asyncio.run, _awaited(outcome)).result()


async def _awaited(pending: Awaitable[object]) -> object:
    return await pending


def replay_session(
    journal: Journal,
    session_id: str,
    drive: Driver,
    *,
    save: bool | ForkPoint = False,
    live_model: bool = False,
    rules: NormalizationRules = DEFAULT_RULES,
) -> ReplayResult:
    """Replay ``session_id`` through ``drive`` and judge it; keep it in ``journal`` on ``save``.

    ``live_model`` says the driver's model goes on live off the record: a replay with a
    changed configuration is then kept too (it re-records), otherwise not. ``save`` as a
    `ForkPoint` keeps the run as a fork (see the module).

    Raises:
        SessionNotFoundError: no such session.
        AgentLoopError: a fork whose run left the recording before the fork point, or ran
            with another configuration and no live model (nothing is kept).
    """
    recorded, started = load_recording(journal, session_id)
    fork = save if isinstance(save, ForkPoint) else None
    new_id = free_session_id(journal, session_id, "replay" if fork is None else "fork")
    with Journal.open(":memory:") as scratch:
        follower = RecordingFollower(scratch, new_id, recorded, rules)
        ran = drive(scratch, new_id, follower, recorded, started)
        result = judge(
            recorded,
            list(scratch.events(new_id)),
            replay_id=new_id,
            saved=False,
            agent=ran.agent,
            rules=rules,
            error=ran.error,
            exhaustion=ran.llm.exhaustion,
            unrecorded=ran.tools.unrecorded,
            live_differences=ran.tools.live_differences,
            uncalled=ran.uncalled,
            stopped_at=ran.llm.stopped_at,
            live_from=ran.llm.went_live_at,
            served=served_by(ran),
        )
        if not save:
            return result
        unsaved = (
            "the configuration changed, so the recorded replies answered a context they were "
            "not recorded for; replay with a live model (--live-model) to re-record"
        )
        if fork is not None:
            _check_fork(result, fork, unsaved if result.config_changes and not live_model else None)
        elif result.config_changes and not live_model:
            return replace(result, unsaved=f"not saved: {unsaved}")
        kept = keep_replay(
            scratch,
            journal,
            new_id,
            lineage=None if fork is None else _fork_lineage(session_id, fork),
            prefix=() if fork is None else recorded[: fork.seq + 1],
        )
    return replace(result, saved=True, replay_session_id=kept)


def served_by(ran: Drive) -> Served:
    """What a run served from the recording, and what it ran for real (`Served`)."""
    tools = ran.tools
    return Served(
        model_replies=ran.llm.served,
        failed_calls=ran.llm.failures_raised,
        tool_results=sum(tools.served.values()),
        not_run=tuple(sorted(set(tools.served) - set(tools.ran))),
        ran=tuple(sorted(tools.ran)),
    )


def _check_fork(result: ReplayResult, fork: ForkPoint, refused: str | None) -> None:
    """Refuse to keep a run that is not a fork of its recording at ``fork.seq``."""
    where = f"session {result.session_id}: cannot fork at seq {fork.seq}"
    divergence = result.behaviour_divergence  # (a changed configuration is ``refused``)
    if divergence is not None and divergence.seq <= fork.seq:
        raise AgentLoopError(
            f"{where}: the code now diverges from the recording at seq {divergence.seq} "
            f"({divergence.reason}); replay it to see the divergence, or fork before it"
        )
    if refused is not None:
        raise AgentLoopError(f"{where}: {refused}")


def _fork_lineage(session_id: str, fork: ForkPoint) -> dict[str, Any]:
    """The ``session_started`` fields of a fork kept from a re-run."""
    return {"replay_of": None, "forked_from": session_id, "fork_seq": fork.seq}


TAKEN_ATTEMPTS = 100
"""How many ids `keep_replay` tries when other processes keep taking the one it chose."""


class _Taken(Exception):
    """The id a replay was to be kept as was taken by another writer meanwhile."""


def keep_replay(
    scratch: Journal,
    journal: Journal,
    replay_id: str,
    *,
    lineage: dict[str, Any] | None = None,
    prefix: Sequence[RecordedEvent] = (),
) -> str:
    """Copy a replay from its scratch journal into ``journal``, its chain computed there;
    return the id it was kept as.

    The id is ``replay_id`` unless another process kept a session under it since it was
    chosen (two replays of one session saved at once): then the next free one of the same
    stem (``.replay-2``). A session is only ever created, never added to: the import
    checks, under the session's lock, that the id is still free.

    ``lineage`` replaces fields of its ``session_started`` (a fork's). ``prefix`` is the
    recording up to a fork point: there the run was served the recording, and its events
    keep the recorded ``duration_ms`` (how long the recorded call took; serving it took
    no time worth recording).
    """
    stem, _, suffix = replay_id.rpartition(".")
    kind = suffix.rpartition("-")[0]
    target = replay_id
    for _ in range(TAKEN_ATTEMPTS):
        created: list[SessionState] = []
        try:
            journal.import_records(
                target,
                _kept_records(scratch, journal, replay_id, target, lineage, prefix),
                check_new=created.append,
            )
        except (_Taken, SessionConflictError):
            target = free_session_id(journal, stem, kind)
            continue
        if created:
            return target
        target = free_session_id(journal, stem, kind)  # it held the same events already
    raise StoreError(
        f"replay {replay_id}: not saved: other processes took {TAKEN_ATTEMPTS} ids of "
        f"{stem}.{kind}-N meanwhile"
    )


def _kept_records(
    scratch: Journal,
    journal: Journal,
    replay_id: str,
    target: str,
    lineage: dict[str, Any] | None,
    prefix: Sequence[RecordedEvent],
) -> Iterator[tuple[str, dict[str, Any]]]:
    """The records of ``replay_id`` in ``scratch``, to be imported as ``target``.

    Read as the import consumes them, under ``target``'s lock: the first look makes sure
    no one created ``target`` meanwhile (`_Taken`).
    """
    if journal.summary(target) is not None:
        raise _Taken(target)
    for row in scratch.stored_events(replay_id):
        record = {**loads_strict(row.body), "session_id": target}
        if row.seq == 0 and lineage:
            record = {**record, **lineage}
        elif 0 < row.seq < len(prefix) and record.get("duration_ms", 0) is None:
            recorded = prefix[row.seq].event
            if recorded.type == record.get("type"):
                record["duration_ms"] = getattr(recorded, "duration_ms", None)
        yield f"replay {target}: seq {row.seq}", record
