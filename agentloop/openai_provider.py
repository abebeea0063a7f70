"""An `LLMProvider` on the official openai client: OpenAI, vLLM, Ollama, any compatible endpoint.

::

    from openai import OpenAI
    from agentloop import Agent, OpenAIProvider

    agent = Agent(..., llm=OpenAIProvider(OpenAI(base_url="http://localhost:11434/v1")),
                  model="qwen2.5:7b")

Each Propose phase is one ``chat.completions.create`` with the system prompt, the context
log and the tool specs; the whole output (calls with their arguments as emitted, text,
reasoning, model, usage, cost) and the call's latency come back as a `ModelResponse`,
which the loop journals as ``action_proposed``. A sync client runs in a worker thread, an
async one (``openai.AsyncOpenAI``) is awaited. Install the client with
``pip install 'agent-journal[openai]'``; this module does not import it.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Callable
from typing import Any

from journal.formats import MODEL_SETTINGS, proposal_from_completion, response_body

from .ports import ModelRequest, ModelResponse

__all__ = ["OpenAIProvider"]


class OpenAIProvider:
    """The model port on an openai client (``openai.OpenAI`` or ``openai.AsyncOpenAI``).

    Args:
        client: the client (anything with ``chat.completions.create``).
        model: the model to ask when the agent names none.
        timer: monotonic seconds, to measure latency.
        options: more ``create`` parameters for every call (``extra_body``, ``timeout``).

    The agent's ``model_settings`` that are request parameters (`MODEL_SETTINGS`:
    temperature, top_p, max_tokens, seed, ...) are sent; others (``context_window``) are not.
    """

    def __init__(
        self,
        client: Any,
        *,
        model: str | None = None,
        timer: Callable[[], float] = time.perf_counter,
        **options: Any,
    ) -> None:
        self.client = client
        self.model = model
        self.timer = timer
        self.options = options

    def request(self, request: ModelRequest) -> dict[str, Any]:
        """The ``chat.completions.create`` parameters for one model request."""
        system = [{"role": "system", "content": request.system_prompt}]
        parameters: dict[str, Any] = {
            "model": request.model or self.model,
            "messages": [*(system if request.system_prompt else []), *request.messages],
            **{k: v for k, v in request.settings.items() if k in MODEL_SETTINGS},
            **self.options,
        }
        if request.tools:
            parameters["tools"] = request.tools
        return parameters

    async def complete(self, request: ModelRequest) -> ModelResponse:
        """Ask the model; see `agentloop.LLMProvider`."""
        parameters = self.request(request)
        create = self.client.chat.completions.create
        started = self.timer()
        if inspect.iscoroutinefunction(inspect.unwrap(create)):  # AsyncOpenAI wraps it
            response = await create(**parameters)
        else:
            response = await asyncio.to_thread(create, **parameters)
        latency = (self.timer() - started) * 1000
        proposal = proposal_from_completion(
            response_body(response), latency_ms=latency, id_prefix=f"call-{request.seq}"
        )
        return ModelResponse.of(proposal)
