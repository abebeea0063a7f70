"""``agent-journal mcp``: the journal as an MCP server over stdio, for coding agents.

A coding agent (Claude Code, Cursor, Codex) asked to look at a failing session calls these
tools; each answers with compact JSON text of bounded size (`tui.compact.bounded`: long
strings and long lists are cut, and the answer says so in ``truncated``):

=================  ===========================================  =========================
tool               what it answers                              as on the command line
=================  ===========================================  =========================
``list_sessions``  sessions, newest first, filtered             ``sessions --json``
``timeline``       a session's events in a seq range            ``show --json``
``state_at``       the folded state after a seq, what changed   ``state --json``
``search``         events by their words, best first            ``search --json``
``diff``           two sessions aligned, the first divergence   ``diff --json``
``replay``         the session re-run with the current code     ``replay --json``
``make_fixture``   a regression fixture in the fixtures folder  ``fixture``
=================  ===========================================  =========================

What the server can reach is what it was started with: the journal (``--db``, opened for
each call, read only but for the derived tables any reader caches) and the fixtures folder
(``--fixtures``; without it ``make_fixture`` is refused). Runs are named by session id
only, never by a file path; a fixture by a plain file name inside the folder.

``replay`` runs as ``agent-journal replay`` runs by default, whatever the arguments say:
every model reply comes from the recording (never a live model: past a divergence the
replay stops), and each tool is treated as declared (recorded outcomes served; pure tools
run and compared; tools with side effects never run). It saves nothing.

Errors are MCP tool errors of one line: a bad or unknown argument, an unknown session, a
seq out of range, a fixture name that leaves the folder. The tools run on worker threads
(the SDK runs a plain function so), each with its own connection to the journal.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import Field, ValidationError

from journal import EVENT_TYPES, JournalError, SearchFilters, SessionStatus

from .clikit import open_existing, parse_moment
from .compact import bounded
from .reads import (
    fixture_note,
    require_seq,
    search_hits,
    sessions_json,
    state_at,
    state_json,
)
from .text import safe_text

__all__ = ["SERVER_NAME", "JournalTools", "build_server"]

SERVER_NAME = "agent-journal"
TEXT_HITS = 10_000
"""``list_sessions(text=...)`` lists the sessions among this many best search hits."""

Session = Annotated[str, Field(description="A session id (agent-journal sessions lists them).")]
Limit = Annotated[int, Field(ge=1, le=500)]
Ignore = Annotated[
    list[str],
    Field(
        description="Fields left out of the comparison besides the volatile ones, as TYPE.PATH "
        "(action_committed.result.fetched_at; *.cost for every event type)."
    ),
]
Meta = Annotated[
    dict[str, str],
    Field(description="Only sessions whose metadata has each KEY with VALUE."),
]
Moment = Annotated[
    str | None,
    Field(description="RFC 3339 (2026-11-29T23:00:00Z, 2026-11-29) or a duration ago (90m, 2d)."),
]


@contextmanager
def _one_line_errors() -> Iterator[None]:
    """Turn what a tool raises into a `ToolError` of one line (as the CLI's exit-2 line)."""
    try:
        yield
    except ToolError:
        raise
    except JournalError as e:
        raise ToolError(safe_text(str(e))) from None
    except Exception as e:
        raise ToolError(safe_text(f"internal error: {type(e).__name__}: {e}")) from None


def _moment(name: str, value: str | None) -> str | None:
    if value is None:
        return None
    try:
        return parse_moment(value)
    except JournalError as e:
        raise ToolError(f"{name}: {e}") from None


class JournalTools:
    """The server's tools over one journal and one fixtures folder (see the module docstring).

    Each public method is one tool; its name, signature and docstring are what the agent
    sees. Each returns compact JSON text (`tui.compact.bounded`) or raises `ToolError`.
    """

    def __init__(self, db: str, fixtures: Path | None) -> None:
        self.db = db
        self.fixtures = None if fixtures is None else fixtures.resolve()

    def list_sessions(
        self,
        status: SessionStatus | None = None,
        text: Annotated[
            str | None,
            Field(description="Only sessions with an event holding every word (as search)."),
        ] = None,
        agent: Annotated[str | None, Field(description="The agent reference.")] = None,
        rule: Annotated[str | None, Field(description="The halt rule (e.g. repeat).")] = None,
        meta: Meta | None = None,
        since: Moment = None,
        until: Moment = None,
        limit: Limit = 20,
    ) -> str:
        """List sessions, newest first, with how each went (status, steps, failures, cost...).

        The fields of `agent-journal sessions --json`. Filters all must hold; text keeps
        the sessions among the 10,000 best search hits for its words.
        """
        with _one_line_errors(), open_existing(self.db) as journal:
            filters: dict[str, Any] = {
                "status": status,
                "agent": agent,
                "rule": rule,
                "meta": meta or {},
                "since": _moment("since", since),
                "until": _moment("until", until),
            }
            if text is None:
                found = journal.sessions(limit=limit, **filters)
            else:  # the sessions whose events hold the words, in the listing's order
                wanted = SearchFilters(status=status, rule=rule)
                hits = journal.search(text, wanted, limit=TEXT_HITS)
                holding = {hit.session_id for hit in hits}
                found = [s for s in journal.sessions(**filters) if s.session_id in holding]
                found = found[:limit]
            return bounded({"sessions": sessions_json(journal, found)})

    def timeline(
        self,
        session: Session,
        from_seq: Annotated[int, Field(ge=0, description="The first seq.")] = 0,
        to_seq: Annotated[int | None, Field(ge=0, description="The last seq (inclusive).")] = None,
        limit: Annotated[int, Field(ge=1, le=1000)] = 100,
        detail: Annotated[
            bool, Field(description="Whole events (payloads) instead of one-line summaries.")
        ] = False,
    ) -> str:
        """A session's events from from_seq on: seq, time, type and a one-line summary each.

        With detail, each event whole (the JSONL record). next_seq is where to go on.
        """
        if to_seq is not None and to_seq < from_seq:
            raise ToolError(f"to_seq {to_seq} is before from_seq {from_seq}")
        with _one_line_errors(), open_existing(self.db) as journal:
            summary = journal.require(session)
            require_seq(session, "from_seq", from_seq, summary.last_seq)
            last = summary.last_seq if to_seq is None else min(to_seq, summary.last_seq)
            stop = min(last + 1, from_seq + limit)
            rows = journal.stored_events(session, start=from_seq, stop=stop)
            events = [
                row.record() if detail else [row.seq, row.ts, row.type, row.summary] for row in rows
            ]
            return bounded(
                {
                    "session": summary.model_dump(mode="json"),
                    "columns": None if detail else ["seq", "ts", "type", "summary"],
                    "events": events,
                    "next_seq": stop if stop <= last else None,
                }
            )

    def state_at(
        self,
        session: Session,
        seq: Annotated[int | None, Field(ge=0, description="Default: the last seq.")] = None,
    ) -> str:
        """The session's folded state after seq, and what that event changed."""
        with _one_line_errors(), open_existing(self.db) as journal:
            return bounded(state_json(session, state_at(journal, session, seq, "seq")))

    def search(
        self,
        query: Annotated[
            str, Field(description='Words and "quoted phrases", all must match (no stemming).')
        ],
        session: Annotated[str | None, Field(description="Only this session.")] = None,
        tool: Annotated[str | None, Field(description="Only events of this tool.")] = None,
        type: Annotated[str | None, Field(description="Only events of this type.")] = None,
        status: SessionStatus | None = None,
        rule: Annotated[str | None, Field(description="Only sessions halted by this rule.")] = None,
        meta: Meta | None = None,
        since: Moment = None,
        until: Moment = None,
        limit: Limit = 20,
    ) -> str:
        """Find events across sessions by their words, best match first, with a snippet each."""
        if type is not None and type not in EVENT_TYPES:
            raise ToolError(f"type {type!r}: not an event type ({', '.join(sorted(EVENT_TYPES))})")
        with _one_line_errors(), open_existing(self.db) as journal:
            filters = SearchFilters(
                tool=tool,
                type=type,
                status=status,
                rule=rule,
                meta=meta or {},
                since=_moment("since", since),
                until=_moment("until", until),
                session_id=session,
            )
            hits = search_hits(journal, query, filters, limit)
            return bounded({"hits": [hit.model_dump(mode="json") for hit in hits]})

    def diff(
        self,
        a: Annotated[str, Field(description="A session id: the reference run.")],
        b: Annotated[str, Field(description="A session id: the run compared with it.")],
        ignore: Ignore | None = None,
        limit: Annotated[int, Field(ge=1, le=500, description="At most this many rows.")] = 50,
    ) -> str:
        """Compare two sessions aligned by content: verdict, first divergence, differing rows.

        Volatile fields (times, durations, ids of the session) are not compared.
        """
        from replay import DEFAULT_RULES, diff_records, session_records

        from .render import diff_json

        with _one_line_errors():
            rules = DEFAULT_RULES.ignoring(ignore or ())
            with open_existing(self.db) as journal:
                journal.require(a)
                journal.require(b)
                records_a = session_records(journal, a)
                records_b = session_records(journal, b)
            doc = diff_json(diff_records(records_a, records_b, rules), records_a, records_b, a, b)
            rows = doc["rows"]
            if len(rows) > limit:
                doc["rows"] = rows[:limit]
                doc["rows_cut"] = f"the first {limit} of {len(rows)} rows shown (limit)"
            return bounded(doc)

    def replay(self, session: Session, ignore: Ignore | None = None) -> str:
        """Re-run a session with the current code and compare it, event by event.

        As `agent-journal replay` by default: model replies from the recording (never a live
        model), tools as declared (recorded results served, pure tools run and compared,
        tools with side effects never run). Nothing is saved. The verdict is identical, or
        diverged with the first divergence (seq, expected, actual, the fields changed).
        """
        from replay import DEFAULT_RULES, Replayer, ReplayOptions

        with _one_line_errors():
            options = ReplayOptions(rules=DEFAULT_RULES.ignoring(ignore or ()))
            with open_existing(self.db) as journal:
                result = Replayer(options, save=False).replay(journal, session)
            return bounded(result.as_json())

    def make_fixture(
        self,
        session: Session,
        name: Annotated[
            str | None,
            Field(description="A file name inside the fixtures folder (default: SESSION.jsonl)."),
        ] = None,
        redact: Annotated[
            bool, Field(description="Replace secrets and personal data with placeholders.")
        ] = True,
        overwrite: Annotated[bool, Field(description="Replace a fixture of that name.")] = False,
    ) -> str:
        """Freeze a session into a pytest regression fixture in the server's fixtures folder."""
        from replay import write_fixture

        with _one_line_errors():
            target = self._fixture_path(f"{session}.jsonl" if name is None else name)
            with open_existing(self.db) as journal:
                summary = journal.require(session)
                if target.exists() and not overwrite:
                    raise ToolError(
                        f"{target.name} exists in the fixtures folder: pass overwrite to replace it"
                    )
                write_fixture(journal, session, target, redact=redact)
            return bounded({"path": str(target), "note": fixture_note(summary, target, redact)})

    def _fixture_path(self, name: str) -> Path:
        """``name`` in the fixtures folder; refused when it could name anything else."""
        if self.fixtures is None:
            raise ToolError("this server was started without --fixtures DIR: no fixture folder")
        if not name or "/" in name or "\\" in name or ".." in name or "\0" in name:
            raise ToolError(
                f"fixture name {name!r}: give a plain file name (no path separator, no '..')"
            )
        target = self.fixtures / (name if name.endswith(".jsonl") else f"{name}.jsonl")
        if target.parent.resolve() != self.fixtures:  # pragma: no cover - ruled out above
            raise ToolError(f"fixture name {name!r} leaves the fixtures folder")
        return target

    def tools(self) -> list[Callable[..., str]]:
        """The tools, in the order the server lists them."""
        return [
            self.list_sessions,
            self.timeline,
            self.state_at,
            self.search,
            self.diff,
            self.replay,
            self.make_fixture,
        ]


def _validation_line(error: ValidationError) -> str:
    """A pydantic validation error of a tool's arguments in one line."""
    parts = []
    for item in error.errors():
        where = ".".join(str(part) for part in item["loc"]) or "arguments"
        given = repr(item.get("input"))
        given = given if len(given) <= 60 else given[:57] + "..."
        parts.append(f"argument {where}: {item['msg']} (got {given})")
    return safe_text("; ".join(parts))


class _Server(MCPServer[Any]):
    """Refuses unknown arguments, and says what failed validation in one line.

    The SDK ignores arguments a tool does not take (a ``live_tools`` given to ``replay``
    would go unnoticed) and reports a validation error in pydantic's many lines.
    """

    def __init__(self, tools: JournalTools, **settings: Any) -> None:
        super().__init__(SERVER_NAME, **settings)
        self.accepted: dict[str, list[str]] = {}
        for tool in tools.tools():
            self.accepted[tool.__name__] = list(inspect.signature(tool).parameters)
            self.add_tool(
                tool, name=tool.__name__, description=inspect.getdoc(tool), structured_output=False
            )

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
        """Call a tool as `MCPServer.call_tool` does, its argument errors in one line."""
        takes = self.accepted.get(name)
        unknown = sorted(set(arguments) - set(takes)) if takes is not None else []
        if takes is not None and unknown:
            raise ToolError(
                f"Error executing tool {name}: unknown argument {', '.join(map(repr, unknown))} "
                f"(it takes {', '.join(takes) or 'none'})"
            )
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as e:
            if isinstance(e.__cause__, ValidationError):
                raise ToolError(
                    f"Error executing tool {name}: {_validation_line(e.__cause__)}"
                ) from None
            raise


def build_server(db: str, fixtures: Path | None) -> MCPServer[Any]:
    """The MCP server with `JournalTools` over ``db`` and ``fixtures`` registered."""
    return _Server(
        JournalTools(db, fixtures),
        instructions="Read an agent-journal: list sessions, read a timeline and the state at a "
        "seq, search events, diff two sessions, replay one with the current code (recorded "
        "model and tools, nothing live), freeze one into a fixture.",
        log_level="WARNING",
    )
