"""Replay through the proxy: an agent in any language runs again against its recording.

`ProxyReplay` is the replay half of `capture.proxy`: the proxy's `SessionSource` when it
replays (``agent-journal proxy --replay``). Nothing is sent upstream. Each recorded
session is replayed as every captured session is (`replay._run.replay_session`: a scratch
journal, a `RecordingFollower`, the verdict of `judge`, kept like ``replay --save``), its
code being whatever the agent runs now, outside this process: the "run" lasts until the
proxy stops.

* A conversation that begins is given its recorded session: by name (the
  ``X-Agent-Journal-Session`` it was recorded with), else the first not replayed yet whose
  first request is the same, else the one whose first request is closest (most messages
  in common, then most parameters) so that a changed request is judged against the
  recording it came from.
* Each request is matched to the recorded one at its seq as an entry's replay matches it
  (`EntryPlayer`: the same request, and everything journaled before it the same): the
  recorded response is served, a recorded failure raised again, and anything else is
  refused (`capture.proxy.Refusal`): the agent gets an error naming the session, the seq
  and the fields that differ, and the replay halts there (``replay_stopped``).
* When the proxy stops, each session is judged: the verdicts (`ProxyVerdict`) say
  identical, or diverged at seq N, as ``agent-journal replay`` does. Named sessions no
  request reached are verdicts too (diverged at their start: the agent never asked);
  with no names, every proxy session of the journal may be replayed and those no request
  reached are listed as not replayed.

`replaying_proxy` runs one in a thread for a test: start the agent against
``proxy.env``, then assert on ``proxy.verdicts``.
"""

from __future__ import annotations

import difflib
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from capture import Recorder, request_record
from capture.proxy import CAPTURED_WITH, ProxyServer, ProxySession, Refusal, Wire, proxy_metadata
from journal import (
    HaltSession,
    Journal,
    JournalError,
    RecordedEvent,
    SessionStarted,
    canonical_bytes,
)

from ._follow import RecordingFollower
from ._run import Drive, replay_session
from ._verdict import ReplayResult
from .diff import field_changes
from .entry_replay import EntryPlayer
from .normalize import DEFAULT_RULES, NormalizationRules
from .options import ReplayOptions
from .recorded import RecordedClock

__all__ = [
    "ProxyReplay",
    "ProxyVerdict",
    "ReplayingProxy",
    "proxy_sessions",
    "replaying_proxy",
    "verdict_line",
]


@dataclass(frozen=True)
class ProxyVerdict:
    """How one recorded session's replay went: its `ReplayResult`, or why it has none."""

    session_id: str
    result: ReplayResult | None
    note: str | None = None
    """Why there is no result: no request reached the session, or it could not run."""

    @property
    def identical(self) -> bool:
        """Whether the replay was identical (a session not replayed is not)."""
        return self.result is not None and self.result.identical

    def as_json(self) -> dict[str, Any]:
        """The verdict as JSON: the result's, or ``{"session_id", "verdict": null, "note"}``."""
        if self.result is not None:
            return self.result.as_json()
        return {"session_id": self.session_id, "verdict": None, "note": self.note}


def proxy_sessions(journal: Journal) -> list[str]:
    """The sessions the proxy recorded in ``journal`` (not replays, not forks), oldest first."""
    found = []
    for summary in journal.sessions():
        if summary.replay_of is not None or summary.forked_from is not None:
            continue
        first = next(iter(journal.events(summary.session_id, stop=1)), None)
        if first is not None and isinstance(first.event, SessionStarted):
            if first.event.metadata.get("captured_with") == CAPTURED_WITH:
                found.append((summary.started or "", summary.session_id))
    return [session_id for _, session_id in sorted(found)]


class _NotAsked(Exception):
    """No request of the agent reached a recorded session."""


class _ProxyPlayer(EntryPlayer):
    """`EntryPlayer`, refusing with the session, the seq and the differing fields."""

    def __init__(
        self, session_id: str, recorded: Sequence[RecordedEvent], follower: RecordingFollower
    ):
        super().__init__(recorded, follower, ReplayOptions())
        self.session_id = session_id

    def first_request(self) -> dict[str, Any] | None:
        """The recorded session's first request in full."""
        return self._requests[min(self._requests)] if self._requests else None

    def model(self, seq: int, request: dict[str, Any], whole: dict[str, Any]) -> Any:
        """The recorded answer, or a `Refusal` (see the module)."""
        try:
            return super().model(seq, request, whole)
        except HaltSession as stop:
            recorded = self._requests.get(seq)
            changes = [] if recorded is None else field_changes(recorded, whole)
            why = stop.reason.removeprefix(f"replay stopped at seq {seq}: ")
            why = why.removesuffix("; no live model to go on with (--live-model)")
            if changes:
                shown = "; ".join("{} {} -> {}".format(c.path, *c.shown(60)) for c in changes[:3])
                why = f"the request differs from the recorded one: {shown}"
            raise Refusal(
                stop.rule,
                f"agent-journal replay of session {self.session_id}, seq {seq}: {why}",
                {
                    "session": self.session_id,
                    "seq": seq,
                    "differences": [change.as_json() for change in changes[:20]],
                },
            ) from None


@dataclass
class _Pending:
    """One recorded session waiting for its conversation, then its verdict."""

    session_id: str
    ready: threading.Event = field(default_factory=threading.Event)
    scratch: Journal | None = None
    replay_id: str = ""
    recorded: Sequence[RecordedEvent] = ()
    started: SessionStarted | None = None
    player: _ProxyPlayer | None = None
    opened: bool = False
    result: ReplayResult | None = None
    note: str | None = None

    @property
    def proxy(self) -> Mapping[str, Any]:
        """What the recording's metadata says of how the proxy found it."""
        found = self.started.metadata.get("proxy") if self.started is not None else None
        return found if isinstance(found, dict) else {}


class ProxyReplay:
    """The sessions of a replaying proxy; see the module.

    Args:
        journal: the journal holding the recordings (and where replays are kept).
        session_ids: the sessions to replay (none: every proxy session of the journal).
        save: keep each replay as ``SESSION.replay-N``, like ``replay --save``.
        rules: what counts as volatile.
    """

    def __init__(
        self,
        journal: Journal,
        session_ids: Sequence[str] = (),
        *,
        save: bool = True,
        rules: NormalizationRules = DEFAULT_RULES,
    ) -> None:
        self.journal = journal
        self.named = bool(session_ids)
        self.save = save
        self.rules = rules
        self._pending = [_Pending(s) for s in (session_ids or proxy_sessions(journal))]
        self._done = threading.Event()
        self._lock = threading.Lock()
        self._threads = [
            threading.Thread(target=self._run, args=(p,), daemon=True) for p in self._pending
        ]
        for thread in self._threads:
            thread.start()
        for pending in self._pending:
            pending.ready.wait()
        failed = next((p for p in self._pending if p.note is not None), None)
        if failed is not None:
            self.finish()
            raise JournalError(failed.note)

    # -- each session's replay, in a thread of its own ------------------------------

    def _run(self, pending: _Pending) -> None:
        def drive(
            scratch: Journal,
            replay_id: str,
            follower: RecordingFollower,
            recorded: Sequence[RecordedEvent],
            started: SessionStarted,
        ) -> Drive:
            pending.scratch, pending.replay_id = scratch, replay_id
            pending.recorded, pending.started = recorded, started
            pending.player = _ProxyPlayer(pending.session_id, recorded, follower)
            pending.ready.set()
            self._done.wait()
            if not pending.opened:
                raise _NotAsked
            return Drive(llm=pending.player.llm, tools=pending.player.tools, error=None, agent=None)

        try:
            pending.result = replay_session(
                self.journal, pending.session_id, drive, save=self.save, rules=self.rules
            )
        except _NotAsked:
            pending.note = "not replayed: no request of the agent reached it"
        except Exception as error:  # (a missing session, a journal that refused the save)
            pending.note = f"session {pending.session_id}: {error}"
        finally:
            pending.ready.set()

    # -- the proxy's SessionSource -----------------------------------------------------

    def open(
        self,
        wire: Wire,
        request: Mapping[str, Any],
        *,
        name: str | None,
        found_by: str,
        metadata: Mapping[str, str],
    ) -> ProxySession | str:
        """The recorded session a new conversation replays (see the module), or why none."""
        with self._lock:
            free = [
                p
                for p in self._pending
                if not p.opened and p.player is not None and p.proxy.get("wire") == wire.name
            ]
            if name is not None:
                free = [p for p in free if p.proxy.get("name") == name]
            chosen = _closest(free, request)
            if chosen is None:
                what = f"named {name}" if name else f"of {wire.name}"
                return (
                    f"agent-journal replay: no recorded session {what} is left to replay "
                    f"({len(self._pending)} in this replay)"
                )
            chosen.opened = True
        assert chosen.scratch is not None and chosen.started is not None
        recorder = Recorder(
            chosen.scratch,
            chosen.replay_id,
            clock=RecordedClock(chosen.recorded),
            replay_of=chosen.session_id,
        )
        kept = {**metadata}
        if "sampling" in chosen.started.metadata:  # how it was recorded, not what it did
            kept["sampling"] = chosen.started.metadata["sampling"]
        return ProxySession(
            recorder,
            wire,
            proxy_metadata(wire, name, found_by, kept),
            name=name,
            player=chosen.player,
        )

    def models(self) -> list[str]:
        """The models the recordings name."""
        return sorted({p.started.model for p in self._pending if p.started and p.started.model})

    # -- the end -------------------------------------------------------------------------

    def finish(self) -> list[ProxyVerdict]:
        """Judge every session (call once the proxy stopped); the verdicts, in order.

        A session no request reached is left out unless it was named.
        """
        self._done.set()
        for thread in self._threads:
            thread.join()
        return [
            ProxyVerdict(p.session_id, p.result, p.note)
            for p in self._pending
            if p.result is not None or self.named or p.opened
        ]


def _closest(free: Sequence[_Pending], request: Mapping[str, Any]) -> _Pending | None:
    """The recorded session whose first request is ``request``, else the closest one."""
    record, messages = request_record(request, [])
    asked = {**record["params"], record["messages_key"]: messages}
    exact = canonical_bytes(asked)
    best: tuple[int, int, float, int] | None = None
    chosen = None
    for position, pending in enumerate(free):
        assert pending.player is not None
        first = pending.player.first_request() or {}
        if canonical_bytes(first) == exact:
            return pending
        theirs = first.get(record["messages_key"]) or []
        common = 0
        while common < min(len(theirs), len(messages)) and canonical_bytes(
            theirs[common]
        ) == canonical_bytes(messages[common]):
            common += 1
        same = sum(
            1
            for k, v in record["params"].items()
            if canonical_bytes(first.get(k)) == canonical_bytes(v)
        )
        score = (common, same, _likeness(theirs[common:], messages[common:]), -position)
        if best is None or score > best:
            best, chosen = score, pending
    return chosen


def _likeness(theirs: Sequence[Any], ours: Sequence[Any]) -> float:
    """How alike the first messages two requests do not share are (0 to 1, by text)."""
    if not theirs or not ours:
        return 0.0
    return difflib.SequenceMatcher(
        None, canonical_bytes(theirs[0]).decode(), canonical_bytes(ours[0]).decode()
    ).quick_ratio()


@contextmanager
def replaying_proxy(
    journal: Journal,
    session_ids: Sequence[str] = (),
    *,
    save: bool = True,
    rules: NormalizationRules = DEFAULT_RULES,
    listen: tuple[str, int] = ("127.0.0.1", 0),
) -> Iterator[ReplayingProxy]:
    """A replaying proxy for the block (a test's agent runs against ``proxy.env``).

    On leaving the block the proxy stops and every session is judged: ``proxy.verdicts``
    holds the verdicts, ``proxy.identical`` whether all were identical, ``proxy.report``
    one line each::

        with Journal.open("agent-journal.db") as journal:
            with replaying_proxy(journal) as proxy:
                subprocess.run(["node", "agent.mjs"], env={**os.environ, **proxy.env}, check=True)
            assert proxy.identical, proxy.report
    """
    replay = ProxyReplay(journal, session_ids, save=save, rules=rules)
    server = ProxyServer(replay, listen=listen)
    running = ReplayingProxy(server)
    server.start()
    try:
        yield running
    finally:
        server.stop()
        running.verdicts = replay.finish()


@dataclass
class ReplayingProxy:
    """A proxy `replaying_proxy` runs: where to point the agent, then the verdicts."""

    server: ProxyServer
    verdicts: list[ProxyVerdict] = field(default_factory=list)

    @property
    def url(self) -> str:
        """The proxy's base URL."""
        return self.server.url

    @property
    def env(self) -> dict[str, str]:
        """``OPENAI_BASE_URL`` and ``ANTHROPIC_BASE_URL`` pointing at the proxy."""
        return self.server.env

    @property
    def identical(self) -> bool:
        """Whether there were verdicts and every one was identical."""
        return bool(self.verdicts) and all(v.identical for v in self.verdicts)

    @property
    def report(self) -> str:
        """One line per session: its verdict (and first divergence), or why it has none."""
        return "\n".join(verdict_line(v) for v in self.verdicts)


def verdict_line(verdict: ProxyVerdict) -> str:
    """A verdict in one line: ``S: identical``, ``S: diverged at seq N: reason``, a note."""
    result = verdict.result
    if result is None:
        return f"{verdict.session_id}: {verdict.note}"
    if result.identical:
        return f"{verdict.session_id}: identical"
    first = result.first_divergence
    assert first is not None
    return f"{verdict.session_id}: diverged at seq {first.seq}: {first.reason}"
