"""The scenarios the demo runs: each pairs an example agent with one session's user inputs."""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["SCENARIOS", "Scenario"]


@dataclass(frozen=True)
class Scenario:
    """One demo session: which agent, what the user says, and what it shows."""

    name: str
    reference: str
    inputs: Callable[[random.Random], list[str]]
    shows: str


def _refund_inputs(rng: random.Random) -> list[str]:
    order = rng.choice(["1042", "2210", "3071"])
    return [
        f"Please refund $150 for order {order}, the parcel arrived broken. "
        "Reach me at jane.doe@gmail.com."
    ]


SCENARIOS: tuple[Scenario, ...] = (
    Scenario(
        "refund-buggy",
        "agentloop.examples.refund:build_buggy",
        _refund_inputs,
        "a guard bug lets a refund exceed the order's balance",
    ),
    Scenario(
        "refund-fixed",
        "agentloop.examples.refund:build_fixed",
        _refund_inputs,
        "the fixed guard rejects the refund and the model proposes the maximum",
    ),
    Scenario(
        "incidents",
        "agentloop.examples.incidents:build",
        lambda rng: [rng.choice(["checkout latency spike", "database disk alerts"])],
        "a 503 from the model is retried; three tool failures open the breaker; the fallback "
        "answers",
    ),
    Scenario(
        "incidents-no-fallback",
        "agentloop.examples.incidents:build_no_fallback",
        lambda rng: ["payment errors after deploy"],
        "the breaker opens and, with no fallback, the session halts",
    ),
    Scenario(
        "ticket-poller",
        "agentloop.examples.loops:build_repeat",
        lambda rng: ["Is ticket 42 resolved yet?"],
        "identical calls until the exact-repeat guardrail halts",
    ),
    Scenario(
        "crawler",
        "agentloop.examples.loops:build_crawler",
        lambda rng: ["List every item in the catalogue."],
        "one call after another until the step limit halts",
    ),
    Scenario(
        "inventory-storm",
        "agentloop.examples.loops:build_stormy",
        lambda rng: ["Do we have A-1 and B-22 in stock?"],
        "duplicate calls in one response: suppressed once, then a halt",
    ),
    Scenario(
        "research",
        "agentloop.examples.research:build",
        lambda rng: [rng.choice(["how WAL mode works", "fsync and durability"])],
        "parallel reads finish out of order, results journaled in proposal order",
    ),
    Scenario(
        "shipping-sloppy",
        "agentloop.examples.sloppy:build",
        lambda rng: ["Ship a 2 kg parcel to Ada Lovelace in London."],
        "scavenged, truncated, flattened and duplicate calls repaired; bad ones rejected",
    ),
    Scenario(
        "discount-crash",
        "agentloop.examples.crashy:build",
        lambda rng: ["Apply my discount code please."],
        "the agent's own guard raises: a failed session",
    ),
    Scenario(
        "travel-chat",
        "agentloop.examples.chat:build",
        lambda rng: [
            f"What's the weather in {rng.choice(['Lisbon', 'Oslo'])}?",
            "And in Atlantis?",
            "Give me the guide for Lima.",
            "How warm is Nairobi?",
        ],
        "a four-turn conversation with a business error and a compacted large result",
    ),
)
"""Every demo scenario, in the order the demo runs them."""
