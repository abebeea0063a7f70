"""Run the shop's sessions: 20 questions, 4 of which hit the planted bug (a word for a number)."""

from __future__ import annotations

import asyncio
import sys

import shop

QUESTIONS = [
    f"Is order {n} in stock? I want {'three' if n % 5 == 0 else 'a'} unit, e-mail me."
    for n in range(100, 120)
]


def main(mode: str) -> None:
    for question in QUESTIONS:
        try:
            if mode == "async":
                asyncio.run(shop.answer_async(question))
            elif mode == "stream":
                shop.answer_streamed(question)
            else:
                shop.answer(question)
        except Exception as error:  # the planted bug: the session is journaled as failed
            print(f"failed: {question}: {type(error).__name__}: {error}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "sync")
