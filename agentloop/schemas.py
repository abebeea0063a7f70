"""Tool argument schemas: hashing, validation, and flattening deep schemas for the model.

Models fill flat argument lists far more reliably than deeply nested ones. A schema with
more than ``flatten_leaves`` leaf parameters or nesting deeper than ``flatten_depth`` is
shown to the model flattened (``address.city`` becomes the property ``address__city``) and
the model's answer is unflattened before validation; the runtime records that repair.
Nested pydantic models (``$defs`` references) are inlined before measuring and flattening.
"""

from __future__ import annotations

import hashlib
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

from journal import canonical_bytes

__all__ = [
    "SEPARATOR",
    "flatten_schema",
    "inline_refs",
    "is_flattened",
    "leaf_count",
    "needs_flattening",
    "nesting_depth",
    "schema_errors",
    "schema_hash",
    "unflatten_args",
    "validator_for",
]

SEPARATOR = "__"
"""Joins the names of nested properties in a flattened schema."""


def schema_hash(parameters: dict[str, Any]) -> str:
    """Return the sha256 hex of a schema's canonical bytes."""
    return hashlib.sha256(canonical_bytes(parameters)).hexdigest()


def inline_refs(schema: dict[str, Any]) -> dict[str, Any]:
    """Return ``schema`` with its local ``#/$defs/...`` references replaced by their targets.

    Pydantic puts nested models in ``$defs``; inlined, their depth and leaves can be seen
    and they can be flattened. A recursive reference is left as it is (with ``$defs``).
    """
    defs = schema.get("$defs")
    if not isinstance(defs, dict) or not defs:
        return schema
    inlined: dict[str, Any] = _inline(schema, defs, frozenset())
    if _REF_PREFIX in str(inlined):
        inlined["$defs"] = defs  # a recursive model: keep what its references need
    return inlined


_REF_PREFIX = "#/$defs/"


def _inline(node: Any, defs: dict[str, Any], seen: frozenset[str]) -> Any:
    if isinstance(node, list):
        return [_inline(item, defs, seen) for item in node]
    if not isinstance(node, dict):
        return node
    ref = node.get("$ref")
    if isinstance(ref, str) and ref.startswith(_REF_PREFIX):
        name = ref.removeprefix(_REF_PREFIX)
        target = defs.get(name)
        if isinstance(target, dict) and name not in seen:
            merged = {**target, **{k: v for k, v in node.items() if k != "$ref"}}
            return _inline(merged, defs, seen | {name})
        return node
    return {k: _inline(v, defs, seen) for k, v in node.items() if k != "$defs"}


def _is_object(schema: dict[str, Any]) -> bool:
    return schema.get("type") == "object" and isinstance(schema.get("properties"), dict)


def leaf_count(schema: dict[str, Any]) -> int:
    """Count the leaf parameters (non-object properties) of an object schema."""
    schema = inline_refs(schema)
    if not _is_object(schema):
        return 1
    return sum(leaf_count(child) for child in schema["properties"].values()) or 1


def nesting_depth(schema: dict[str, Any]) -> int:
    """Return how deep objects nest: 1 for a flat object of scalars."""
    schema = inline_refs(schema)
    if not _is_object(schema):
        return 0
    return 1 + max((nesting_depth(child) for child in schema["properties"].values()), default=0)


def needs_flattening(schema: dict[str, Any], *, max_leaves: int, max_depth: int) -> bool:
    """Tell whether a schema should be shown to the model flattened."""
    return leaf_count(schema) > max_leaves or nesting_depth(schema) > max_depth


def flatten_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """Return an equivalent flat object schema whose property names join nested names."""
    schema = inline_refs(schema)
    properties: dict[str, Any] = {}
    required: list[str] = []

    def walk(node: dict[str, Any], prefix: str, is_required: bool) -> None:
        node_required = set(node.get("required", []))
        for name, child in node["properties"].items():
            path = f"{prefix}{name}"
            child_required = is_required and name in node_required
            if _is_object(child):
                walk(child, path + SEPARATOR, child_required)
            else:
                properties[path] = child
                if child_required:
                    required.append(path)

    walk(schema, "", True)
    flat: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        flat["required"] = required
    if "description" in schema:
        flat["description"] = schema["description"]
    if "$defs" in schema:
        flat["$defs"] = schema["$defs"]
    return flat


def is_flattened(args: dict[str, Any]) -> bool:
    """Tell whether argument names carry the flattening separator."""
    return any(SEPARATOR in key for key in args)


def unflatten_args(args: dict[str, Any]) -> dict[str, Any] | None:
    """Rebuild nested arguments from flattened names (``a__b: 1`` becomes ``a: {b: 1}``).

    Returns None when names conflict (``a: 1`` beside ``a__b: 2``): nothing is dropped
    silently; the arguments stay as the model sent them and the schema rejects them.
    """
    nested: dict[str, Any] = {}
    for key, value in args.items():
        parts = key.split(SEPARATOR)
        node = nested
        for part in parts[:-1]:
            child = node.setdefault(part, {})
            if not isinstance(child, dict):
                return None
            node = child
        if parts[-1] in node:
            return None
        node[parts[-1]] = value
    return nested


def validator_for(parameters: dict[str, Any]) -> Draft202012Validator:
    """Return a validator for a tool's parameter schema.

    Raises:
        ValueError: the schema itself is not a valid JSON Schema.
    """
    try:
        Draft202012Validator.check_schema(parameters)
    except SchemaError as e:
        raise ValueError(f"invalid JSON Schema: {e.message}") from e
    return Draft202012Validator(parameters)


def schema_errors(validator: Draft202012Validator, args: object) -> list[str]:
    """Return readable schema errors for ``args``, each naming the argument path."""
    errors = sorted(validator.iter_errors(args), key=lambda error: list(error.absolute_path))
    messages = []
    for error in errors:
        path = ".".join(str(part) for part in error.absolute_path)
        messages.append(f"{path}: {error.message}" if path else error.message)
    return messages
