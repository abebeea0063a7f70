"""How a replay runs: one frozen object, built once, carried unchanged down every path.

The command line (``agent-journal replay``, ``fork``), the pytest plugin's ini settings
and the Python API each build one `ReplayOptions`; `replay.Replayer`, `replay.fork` and
every path a session can be replayed by (an agentloop agent, captured code around an
entry, a hand-written loop, each framework integration) take it whole and read each
option by the name the command line gives it:

=====================  ========================  ==========================
option                 command line              pytest ini
=====================  ========================  ==========================
``agent``              ``--agent``               ``journal_agent``
``live_tools``         ``--live-tool``,          ``journal_live_tools``
                       ``--live-tools``
``allow_side_effects`` ``--allow-side-effects``  ``journal_allow_side_effects``
``live_model``         ``--live-model``          ``journal_live_model``
``rules``              ``--ignore``              ``journal_ignore``
``trust``              (the project's pyproject)  (the rootdir's pyproject)
=====================  ========================  ==========================

What happens to the run's result (kept as a replay, kept as a fork, thrown away) is not an
option of the replay but of the call: ``save``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Literal

from agentloop import Agent, TrustList

from .normalize import DEFAULT_RULES, NormalizationRules

__all__ = ["EVERY_TOOL", "ReplayOptions"]

EVERY_TOOL: Literal["*"] = "*"
"""The tool name that means every tool (``--live-tool '*'``, ``journal_live_tools = *``)."""


def _names(given: bool | Iterable[str]) -> bool | frozenset[str]:
    if isinstance(given, bool):
        return given
    names = frozenset(given)
    return True if EVERY_TOOL in names else names


@dataclass(frozen=True, init=False)
class ReplayOptions:
    """How a replay runs; see the module docstring for each option's other spellings.

    Args:
        agent: the agent (or ``module:factory``, or a captured session's entry or loop
            ``module:attribute``) to run instead of the recorded reference; it runs as
            given (the user chose it, not the journal).
        live_tools: tools to run for real instead of serving their recorded outcomes:
            ``True`` (or a name ``*``) for every tool not declared with side effects, or
            their names. Default: none, every outcome comes from the recording.
        allow_side_effects: tools declared with side effects that may run for real where
            tools run live (named live, or past a divergence with a live model).
        live_model: what answers where no recorded reply fits the code's context (it
            diverged, or ran past the recording): ``"agent"`` (or True) for the agent's
            own model, ``"module:factory"`` for a factory that returns one, or a model
            object the path takes (an agentloop ``LLMProvider``, a framework's model).
            From there the tools run live too, as in the original run. Default: none, the
            replay stops there with a halt of rule ``replay_stopped``.
        rules: what counts as volatile when runs are compared (`replay.normalize`).
        trust: which recorded references may run (default: `agentloop.TrustList.discover`
            from the current folder when a replay starts).
    """

    agent: str | Agent | None
    live_tools: bool | frozenset[str]
    allow_side_effects: frozenset[str]
    live_model: object
    rules: NormalizationRules
    trust: TrustList | None

    def __init__(
        self,
        *,
        agent: str | Agent | None = None,
        live_tools: bool | Iterable[str] = False,
        allow_side_effects: Iterable[str] = (),
        live_model: object = None,
        rules: NormalizationRules = DEFAULT_RULES,
        trust: TrustList | None = None,
    ) -> None:
        object.__setattr__(self, "agent", agent)
        object.__setattr__(self, "live_tools", _names(live_tools))
        object.__setattr__(self, "allow_side_effects", frozenset(allow_side_effects))
        object.__setattr__(self, "live_model", None if live_model is False else live_model)
        object.__setattr__(self, "rules", rules)
        object.__setattr__(self, "trust", trust)

    @property
    def named_live(self) -> frozenset[str]:
        """The tools named live one by one (none when every tool runs live, or none does)."""
        return frozenset() if isinstance(self.live_tools, bool) else self.live_tools

    def trust_list(self) -> TrustList:
        """The trust list to check recorded references against (`trust`, or discovered)."""
        return self.trust or TrustList.discover()

    def narrowed_to(self, tools: Iterable[str]) -> ReplayOptions:
        """These options with the tools they name cut to ``tools`` (a recording's).

        For settings shared by the fixtures of several agents (the pytest plugin's): each
        fixture takes the names its recording has, and ignores the others.
        """
        known = frozenset(tools)
        live = self.live_tools if isinstance(self.live_tools, bool) else self.live_tools & known
        return replace(self, live_tools=live, allow_side_effects=self.allow_side_effects & known)
