"""Small tool loops on the official Python clients, run through the proxy in the tests.

Each asks `tests.fake_openai`'s policy about an order and answers its tool calls
(``lookup_order`` returns the order's sku; the others ``{"ok": true}``) until it answers.
"""

from __future__ import annotations

import json
from typing import Any

SYSTEM = "You are the shop's order assistant. Be brief."

SPECS = {
    "lookup_order": {"type": "object", "properties": {"order_id": {"type": "string"}}},
    "check_stock": {"type": "object", "properties": {"sku": {"type": "string"}}},
    "send_email": {"type": "object", "properties": {"to": {"type": "string"}}},
}
CHAT_TOOLS = [
    {"type": "function", "function": {"name": name, "parameters": schema}}
    for name, schema in SPECS.items()
]
RESPONSES_TOOLS = [
    {"type": "function", "name": name, "parameters": schema} for name, schema in SPECS.items()
]
ANTHROPIC_TOOLS = [{"name": name, "input_schema": schema} for name, schema in SPECS.items()]


def run_tool(name: str, args: dict[str, Any]) -> str:
    if name == "lookup_order":
        return json.dumps({"sku": f"SKU-{args['order_id']}"})
    return json.dumps({"ok": True})


def chat_agent(client: Any, question: str, *, stream: bool = False, **headers: str) -> str:
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": question},
    ]
    extra = {"extra_headers": headers} if headers else {}
    while True:
        if stream:
            from openai.lib.streaming.chat import ChatCompletionStreamState

            state = ChatCompletionStreamState()
            for chunk in client.chat.completions.create(
                model="fake-1", messages=messages, tools=CHAT_TOOLS, stream=True, **extra
            ):
                state.handle_chunk(chunk)
            message = state.get_final_completion().choices[0].message
        else:
            message = (
                client.chat.completions.create(
                    model="fake-1", messages=messages, tools=CHAT_TOOLS, **extra
                )
                .choices[0]
                .message
            )
        messages.append(message.model_dump(exclude_none=True, exclude={"parsed"}))
        if not message.tool_calls:
            return str(message.content)
        for call in message.tool_calls:
            result = run_tool(call.function.name, json.loads(call.function.arguments))
            messages.append({"role": "tool", "tool_call_id": call.id, "content": result})


def responses_agent(client: Any, question: str) -> str:
    items: list[Any] = [{"role": "user", "content": question}]
    while True:
        response = client.responses.create(
            model="fake-1", instructions=SYSTEM, input=items, tools=RESPONSES_TOOLS
        )
        calls = [item for item in response.output if item.type == "function_call"]
        if not calls:
            return str(response.output_text)
        for call in calls:
            items.append(call.model_dump(exclude_none=True))
            items.append(
                {
                    "type": "function_call_output",
                    "call_id": call.call_id,
                    "output": run_tool(call.name, json.loads(call.arguments)),
                }
            )


def anthropic_agent(client: Any, question: str, *, stream: bool = False) -> str:
    messages: list[dict[str, Any]] = [{"role": "user", "content": question}]
    while True:
        asked = {
            "model": "claude-fake",
            "max_tokens": 200,
            "system": SYSTEM,
            "messages": messages,
            "tools": ANTHROPIC_TOOLS,
        }
        if stream:
            with client.messages.stream(**asked) as events:
                message = events.get_final_message()
        else:
            message = client.messages.create(**asked)
        messages.append(
            {
                "role": "assistant",
                "content": [b.model_dump(exclude_none=True) for b in message.content],
            }
        )
        uses = [block for block in message.content if block.type == "tool_use"]
        if not uses:
            return "".join(block.text for block in message.content if block.type == "text")
        messages.append(
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": use.id,
                        "content": run_tool(use.name, use.input),
                    }
                    for use in uses
                ],
            }
        )
