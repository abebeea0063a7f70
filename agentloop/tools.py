"""Tools: what the model may call, with arguments checked before anything runs.

A `Tool` has a name, a description, arguments given as a pydantic model or as a JSON
Schema (also in the OpenAI tools format), an optional pure ``guard(args, state)``, whether
it is safe to run in parallel, a timeout, a fallback tool, and an error classifier.

Errors a tool raises are sorted into kinds: a `ToolError` (or ``ValueError`` /
``LookupError``) is a *business* error whose message goes back to the model ("user not
found"); ``TimeoutError`` is a *timeout*; anything else is an *infrastructure* fault,
which counts towards the tool's breaker and reaches the model only as a short cleaned
message, never a traceback.
"""

from __future__ import annotations

import copy
import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from pydantic import BaseModel, ValidationError

from journal import FailureKind, SessionState, ToolSpec, failure_kind

from .errors import AgentDefinitionError
from .schemas import flatten_schema, needs_flattening, schema_errors, schema_hash, validator_for

__all__ = [
    "ArgsInvalid",
    "Guard",
    "Tool",
    "ToolError",
    "classify_error",
]

Guard = Callable[[Any, SessionState], str | None]
"""A pure check of validated args against the session state: None to allow, else a message
telling the model what to change. It never mutates anything and never calls a tool."""


class ToolError(Exception):
    """A business error raised by a tool; its message is shown to the model as is."""

    kind: FailureKind = "business"


class ArgsInvalid(Exception):
    """Arguments failed the tool's schema; the message lists what to fix."""


classify_error = failure_kind
"""The default classifier of a tool's exceptions: `journal.failure_kind`, the rule every
capture records with too (a `ToolError` is business)."""


def _parameters_of(args: type[BaseModel] | dict[str, Any] | None) -> dict[str, Any]:
    if args is None:
        return {"type": "object", "properties": {}}
    if isinstance(args, dict):
        function = args.get("function") if args.get("type") == "function" else None
        return dict(function.get("parameters", {})) if isinstance(function, dict) else dict(args)
    return args.model_json_schema()


@dataclass(frozen=True, eq=False)
class Tool:
    """A tool the model may call.

    Args:
        name: the name the model uses.
        fn: the implementation, sync or async (a coroutine function, or a callable that
            returns an awaitable), called with one argument: an instance of ``args`` when it
            is a pydantic model, else the validated argument dict.
        description: what the tool does, for the model.
        args: a pydantic model, a JSON Schema of the arguments, or an OpenAI tool spec
            (``{"type": "function", "function": {...}}``).
        guard: a pure check run after the schema; see `Guard`.
        parallel_safe: may run concurrently with other parallel-safe calls of one proposal
            (reads, searches, fetches); leave False for writes, payments, commands.
        timeout_s: seconds before a call times out (default: the guardrails' timeout).
        fallback: the name of a tool to call instead while this one's breaker is open.
        classify: maps an exception to its failure kind; see `classify_error`.
        scavenge: whether a call written out as text may be run (default: when
            ``parallel_safe``); see `scavengeable`.
        pure: a function of its arguments alone: a replay runs it and compares its
            outcome with the recorded one (a fix in it shows with no flag).
        side_effects: it changes the world (sends, writes, pays): a replay never runs it
            for real unless allowed by name (``--allow-side-effects``). A tool that is
            neither (I/O: lookups, fetches) is served from the recording.

    Raises:
        AgentDefinitionError: a tool both ``pure`` and with ``side_effects``.
    """

    name: str
    fn: Callable[[Any], Any]
    description: str = ""
    args: type[BaseModel] | dict[str, Any] | None = None
    guard: Guard | None = None
    parallel_safe: bool = False
    timeout_s: float | None = None
    fallback: str | None = None
    classify: Callable[[BaseException], FailureKind] = field(default=classify_error)
    scavenge: bool | None = None
    pure: bool = False
    side_effects: bool = False

    def __post_init__(self) -> None:
        if self.pure and self.side_effects:
            raise AgentDefinitionError(
                f"tool {self.name}: a tool is pure or has side effects, not both"
            )

    @property
    def scavengeable(self) -> bool:
        """Whether a call to this tool written out as text may be taken as a real call.

        By default only parallel-safe tools (reads): a write the model merely wrote down,
        in its reasoning or its reply, must not run. Set ``scavenge`` to decide per tool.
        """
        return self.parallel_safe if self.scavenge is None else self.scavenge

    @classmethod
    def from_openai(cls, spec: dict[str, Any], fn: Callable[[Any], Any], **options: Any) -> Tool:
        """Build a tool from an OpenAI tools-format spec and an implementation."""
        function = spec.get("function", spec)
        return cls(
            name=function["name"],
            fn=fn,
            description=function.get("description", ""),
            args=dict(function.get("parameters", {"type": "object", "properties": {}})),
            **options,
        )

    @cached_property
    def parameters(self) -> dict[str, Any]:
        """The JSON Schema of the arguments."""
        return _parameters_of(self.args)

    @cached_property
    def is_async(self) -> bool:
        """Whether ``fn`` is a coroutine function (awaited; a sync one runs in a thread)."""
        return inspect.iscoroutinefunction(self.fn)

    @cached_property
    def _validator(self) -> Any:
        return validator_for(self.parameters)

    def spec(self) -> ToolSpec:
        """The tool as recorded in ``session_started``."""
        return ToolSpec(
            name=self.name,
            description=self.description,
            parameters=self.parameters,
            schema_hash=schema_hash(self.parameters),
            parallel_safe=self.parallel_safe,
            timeout_s=self.timeout_s,
            fallback=self.fallback,
        )

    def flattened_for(self, *, max_leaves: int, max_depth: int) -> bool:
        """Tell whether the model is shown this tool's schema flattened."""
        return needs_flattening(self.parameters, max_leaves=max_leaves, max_depth=max_depth)

    def model_spec(self, *, max_leaves: int, max_depth: int) -> dict[str, Any]:
        """The OpenAI tools-format spec shown to the model (flattened when deep)."""
        parameters = self.parameters
        if self.flattened_for(max_leaves=max_leaves, max_depth=max_depth):
            parameters = flatten_schema(parameters)
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": parameters,
            },
        }

    def validate(self, args: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
        """Validate arguments; return (what ``fn`` receives, the args as recorded JSON).

        Raises:
            ArgsInvalid: the arguments do not fit the schema; the message lists each problem.
        """
        if isinstance(self.args, type) and issubclass(self.args, BaseModel):
            try:
                model = self.args.model_validate(args)
            except ValidationError as e:
                problems = [
                    f"{'.'.join(str(p) for p in error['loc']) or 'arguments'}: {error['msg']}"
                    for error in e.errors()
                ]
                raise ArgsInvalid("; ".join(problems)) from e
            return model, model.model_dump(mode="json")
        problems = schema_errors(self._validator, args)
        if problems:
            raise ArgsInvalid("; ".join(problems))
        # The tool gets its own copy: what it does to it never changes the recorded args.
        return copy.deepcopy(args), args
