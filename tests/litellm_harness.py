"""An upstream agent harness, as a research team ships it: it calls ``litellm.completion``.

Not part of agent-journal, and it knows nothing of it: the scratch app
(`tests.litellm_app`) runs it unedited inside captured sessions, and its calls are
journaled because the session patches the ``litellm`` module's functions.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

import litellm


def run(
    task: str,
    *,
    model: str,
    system: str,
    tools: list[dict[str, Any]],
    functions: Mapping[str, Callable[..., Any]],
    max_steps: int = 8,
    **completion_kwargs: Any,
) -> str:
    """Ask, run the tools the model calls, send their results back; the last text answers."""
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": system},
        {"role": "user", "content": task},
    ]
    for _ in range(max_steps):
        response = litellm.completion(
            model=model, messages=messages, tools=tools, **completion_kwargs
        )
        message = response.choices[0].message
        messages.append(message.model_dump(exclude_none=True))
        if not message.tool_calls:
            return str(message.content or "")
        for call in message.tool_calls:
            result = functions[call.function.name](**json.loads(call.function.arguments))
            messages.append(
                {"role": "tool", "tool_call_id": call.id, "content": json.dumps(result)}
            )
    return "step limit"
