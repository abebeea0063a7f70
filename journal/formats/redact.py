"""Redaction: secrets and personal data replaced by placeholders that keep their format.

What is replaced, in every string of an event (envelope fields excepted):

* values under keys that name a secret (``api_key``, ``token``, ``password``,
  ``secret``, ``authorization``, ``cookie``, ``private_key``, ...), whatever they look like;
* API keys and tokens by shape (``sk-…``, ``ghp_…``, ``xoxb-…``, ``AKIA…``, JWTs) and
  ``Bearer <token>``;
* e-mail addresses (the placeholder is a valid address at ``example.com``);
* card numbers that pass the Luhn check (the placeholder keeps the length and the
  separators, and passes the Luhn check too);
* any pattern the user adds (``Redactor(patterns={"order": "ORD-[0-9]+"})``).

The same secret always gets the same placeholder within a session: placeholders are
derived from an HMAC of (session id, secret) under the redactor's key, so a redacted
session still validates and replays identically. Give a fixed ``key`` to get the same
placeholders across processes; the default key is random per `Redactor`.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import re
import secrets
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..canonical import GENESIS_HASH, chain_hash, dumps_canonical

__all__ = ["DEFAULT_SECRET_KEYS", "Redactor", "luhn_valid", "rechain"]

DEFAULT_SECRET_KEYS = (
    r"api[-_]?key",
    r"access[-_]?key",
    r"secret",
    r"token",
    r"passw(or)?d",
    r"passphrase",
    r"authorization",
    r"auth",
    r"cookie",
    r"private[-_]?key",
    r"credentials?",
    r"pin",
    r"cvv|cvc",
)
"""Regular expressions matched against a whole key name (case-insensitive)."""

_ENVELOPE = frozenset({"session_id", "seq", "ts", "type", "v", "hash"})
_NOT_SECRET = frozenset({"call_id", "tool", "stage", "kind", "level", "rule", "schema_hash"})
_TOKEN_COUNT = re.compile(r"(?i)token_?count$")
"""A key that counts tokens (Gemini's ``prompt_token_count``, ``promptTokenCount``), which
names no secret though it matches ``token``."""
_EMAIL = re.compile(
    r"(?<![\w.+-])[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}"
)
_CARD = re.compile(r"(?<![\w-])\d(?:[ -]?\d){12,18}(?![\w-])")
_TOKENS = re.compile(
    r"\b(?:sk-(?:proj-)?[A-Za-z0-9_-]{16,}|gh[pousr]_[A-Za-z0-9]{20,}|xox[abprs]-[A-Za-z0-9-]{10,}"
    r"|AKIA[0-9A-Z]{16}|eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,})"
)
_BEARER = re.compile(r"(?i)\b(bearer)\s+([\w.~+/=-]{8,})")
_ALPHABET = "abcdefghijklmnopqrstuvwxyz0123456789"
_CARD_MARK = "99"
"""Card placeholders start with 99 (an issuer range no card network uses for payment cards)."""


def _is_placeholder_email(address: str) -> bool:
    return address.startswith("user-") and address.endswith("@example.com")


def luhn_valid(digits: str) -> bool:
    """Tell whether a string of digits passes the Luhn check."""
    total = 0
    for index, char in enumerate(reversed(digits)):
        value = int(char)
        if index % 2 == 1:
            value = value * 2 - 9 if value > 4 else value * 2
        total += value
    return total % 10 == 0


def _luhn_digit(body: str) -> str:
    for candidate in "0123456789":
        if luhn_valid(body + candidate):
            return candidate
    raise AssertionError("unreachable: one digit always completes a Luhn number")


def rechain(
    records: Iterable[dict[str, Any]], hasher: Callable[[str, bytes], str] = chain_hash
) -> list[dict[str, Any]]:
    """Return flat records with their ``hash`` fields recomputed as one chain from genesis."""
    chained: list[dict[str, Any]] = []
    previous = GENESIS_HASH
    for record in records:
        body = {k: v for k, v in record.items() if k != "hash"}
        previous = hasher(previous, dumps_canonical(body))
        chained.append({**body, "hash": previous})
    return chained


@dataclass
class Redactor:
    """Replaces secrets with stable, format-keeping placeholders; see the module docstring.

    Args:
        key: the HMAC key placeholders are derived from (random by default).
        secret_keys: regular expressions for key names whose values are always secret.
        patterns: extra named regular expressions to replace in any string.
    """

    key: bytes = field(default_factory=lambda: secrets.token_bytes(32))
    secret_keys: tuple[str, ...] = DEFAULT_SECRET_KEYS
    patterns: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._secret_key = re.compile(
            r"(?i)^(?:.*[-_])?(?:" + "|".join(self.secret_keys) + r")(?:[-_].*)?$"
        )
        self._extra = [(name, re.compile(pattern)) for name, pattern in self.patterns.items()]

    # -- placeholders ----------------------------------------------------------------

    def _digest(self, session_id: str, kind: str, secret: str) -> str:
        message = f"{session_id}\x00{kind}\x00{secret}".encode()
        return hmac.new(self.key, message, hashlib.sha256).hexdigest()

    def _word(self, session_id: str, kind: str, secret: str, length: int) -> str:
        chars: list[str] = []
        round_ = 0
        while len(chars) < length:
            digest = int(self._digest(session_id, f"{kind}/{round_}", secret), 16)
            for _ in range(min(40, length - len(chars))):
                digest, index = divmod(digest, len(_ALPHABET))
                chars.append(_ALPHABET[index])
            round_ += 1
        return "".join(chars)

    def _email(self, session_id: str, secret: str) -> str:
        return f"user-{self._word(session_id, 'email', secret.lower(), 8)}@example.com"

    def _card(self, session_id: str, secret: str) -> str:
        digits = re.sub(r"\D", "", secret)
        seed = int(self._digest(session_id, "card", digits), 16)
        body = _CARD_MARK + str(seed)[: len(digits) - 3].rjust(len(digits) - 3, "0")
        fresh = iter(body + _luhn_digit(body))
        return "".join(next(fresh) if char.isdigit() else char for char in secret)

    def _card_or_keep(self, session_id: str, text: str) -> str:
        digits = re.sub(r"\D", "", text)
        if digits.startswith(_CARD_MARK) or not luhn_valid(digits):
            return text
        return self._card(session_id, text)

    def _token(self, session_id: str, secret: str) -> str:
        prefix = re.match(r"(sk-(?:proj-)?|gh[pousr]_|xox[abprs]-|AKIA|eyJ)", secret)
        head = prefix.group(1) if prefix else ""
        body = "redacted" + self._word(
            session_id, "token", secret, max(len(secret) - len(head), 16)
        )
        return head + body[: max(len(secret) - len(head), 16)]

    def _secret(self, session_id: str, kind: str, secret: str) -> str:
        return f"redacted-{kind}-{self._word(session_id, kind, secret, 8)}"

    # -- walking ---------------------------------------------------------------------

    def redact_text(self, session_id: str, text: str) -> str:
        """Replace secrets found by shape (tokens, e-mails, cards, user patterns) in text.

        Placeholders in text are left alone, so redacting text twice changes nothing.
        """
        text = _BEARER.sub(
            lambda m: (
                m.group()
                if m.group(2).startswith("redacted")
                else f"{m.group(1)} {self._token(session_id, m.group(2))}"
            ),
            text,
        )
        text = _TOKENS.sub(
            lambda m: m.group() if "redacted" in m.group() else self._token(session_id, m.group()),
            text,
        )
        text = _EMAIL.sub(
            lambda m: (
                m.group()
                if _is_placeholder_email(m.group())
                else self._email(session_id, m.group())
            ),
            text,
        )
        text = _CARD.sub(lambda m: self._card_or_keep(session_id, m.group()), text)
        for name, pattern in self._extra:
            text = pattern.sub(functools.partial(self._pattern_match, session_id, name), text)
        return text

    def _pattern_match(self, session_id: str, name: str, match: re.Match[str]) -> str:
        found = match.group()
        return found if found.startswith("redacted-") else self._secret(session_id, name, found)

    def _value(self, session_id: str, value: Any, secret: bool) -> Any:
        if isinstance(value, str):
            if secret and value and not value.startswith("redacted-"):
                return self._secret(session_id, "secret", value)
            return self.redact_text(session_id, value)
        if secret and isinstance(value, int) and not isinstance(value, bool):
            digits = str(abs(value))
            fresh = str(int(self._digest(session_id, "number", digits), 16))[: len(digits)]
            return int(fresh) if value >= 0 else -int(fresh)
        if isinstance(value, dict):
            return self._mapping(session_id, value, secret)
        if isinstance(value, list):
            return [self._value(session_id, item, secret) for item in value]
        return value

    def _names_secret(self, key: str) -> bool:
        return bool(self._secret_key.match(key)) and not _TOKEN_COUNT.search(key)

    def _mapping(self, session_id: str, mapping: Mapping[str, Any], secret: bool) -> dict[str, Any]:
        return {
            key: self._value(session_id, value, secret or self._names_secret(key))
            for key, value in mapping.items()
        }

    def redact_payload(self, session_id: str, payload: Mapping[str, Any]) -> dict[str, Any]:
        """Redact an event's fields (without envelope)."""
        return {
            key: value if key in _NOT_SECRET else self._value(session_id, value, False)
            for key, value in payload.items()
        }

    def redact_record(self, record: Mapping[str, Any]) -> dict[str, Any]:
        """Redact a flat record (envelope fields and ids kept as they are; ``hash`` stale)."""
        session_id = str(record.get("session_id", ""))
        payload = {k: v for k, v in record.items() if k not in _ENVELOPE}
        return {
            **{k: v for k, v in record.items() if k in _ENVELOPE},
            **self.redact_payload(session_id, payload),
        }
