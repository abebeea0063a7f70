"""The tau2-bench airline tools, declared by OpenAI JSON Schemas, with this project's guards.

Replay an imported airline transcript through this agent to see what the gate, the
guardrails and the breakers would have done with the real model's proposals::

    agent-journal import --format openai --error-prefix "Error:" airline.json
    agent-journal replay airline-0 --agent agentloop.examples.airline:build

The schemas are derived from the recorded calls (names and argument shapes) and tightened
with the formats the airline's data uses, so a malformed argument is rejected before it
reaches a tool, with a message that says what to send instead: a reservation code is six
capitals or digits (a user id in its place is refused), a payment id is
``credit_card_NNNNNNN`` / ``gift_card_NNNNNNN`` / ``certificate_NNNNNNN``, dates are
``YYYY-MM-DD``. Guards check the airline's policy where the arguments alone tell: a
round trip has a return flight, at most one certificate, one credit card and three gift
cards pay for a booking, non-free bags are among the bags, a search goes somewhere else.

The tools behind the schemas are small in-memory fakes (one user, one reservation, a few
flights), enough for ``--live-tools``: each live result is compared with the recorded one.
"""

from __future__ import annotations

import ast
import json
import operator
from collections.abc import Callable
from typing import Any

from journal import SessionState

from ..agent import Agent
from ..tools import Tool, ToolError

__all__ = ["PROMPT", "TOOL_SPECS", "build"]

PROMPT = (
    "You are an airline customer service agent. Authenticate the user by their user id, "
    "look reservations up before changing them, and follow the airline's policy."
)

_RESERVATION_ID = {
    "type": "string",
    "pattern": "^[A-Z0-9]{6}$",
    "description": "six capitals or digits, such as 'EHGLP3' (not a user id)",
}
_USER_ID = {
    "type": "string",
    "pattern": "^[a-z]+_[a-z]+_[0-9]+$",
    "description": "the user's id, such as 'emma_kim_9957'",
}
_PAYMENT_ID = {
    "type": "string",
    "pattern": "^(credit_card|gift_card|certificate)_[0-9]{7}$",
    "description": "a payment method id from the user's profile, such as 'credit_card_5832574'",
}
_DATE = {"type": "string", "pattern": "^[0-9]{4}-[0-9]{2}-[0-9]{2}$", "description": "YYYY-MM-DD"}
_AIRPORT = {"type": "string", "pattern": "^[A-Z]{3}$", "description": "IATA code, such as 'JFK'"}
_CABIN = {"type": "string", "enum": ["basic_economy", "economy", "business"]}
_COUNT = {"type": "integer", "minimum": 0}
_FLIGHTS = {
    "type": "array",
    "minItems": 1,
    "items": {
        "type": "object",
        "properties": {
            "flight_number": {"type": "string", "pattern": "^HAT[0-9]{3}$"},
            "date": _DATE,
        },
        "required": ["flight_number", "date"],
    },
}
_PASSENGERS = {
    "type": "array",
    "minItems": 1,
    "maxItems": 5,
    "items": {
        "type": "object",
        "properties": {
            "first_name": {"type": "string", "minLength": 1},
            "last_name": {"type": "string", "minLength": 1},
            "dob": _DATE,
        },
        "required": ["first_name", "last_name", "dob"],
    },
}
_PAYMENTS = {
    "type": "array",
    "minItems": 1,
    "items": {
        "type": "object",
        "properties": {"payment_id": _PAYMENT_ID, "amount": {"type": "number", "minimum": 0}},
        "required": ["payment_id", "amount"],
    },
}


def _spec(name: str, description: str, **properties: Any) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {
                "type": "object",
                "properties": properties,
                "required": sorted(properties),
            },
        },
    }


TOOL_SPECS: tuple[dict[str, Any], ...] = (
    _spec(
        "book_reservation",
        "Book a reservation.",
        user_id=_USER_ID,
        origin=_AIRPORT,
        destination=_AIRPORT,
        flight_type={"type": "string", "enum": ["one_way", "round_trip"]},
        cabin=_CABIN,
        flights=_FLIGHTS,
        passengers=_PASSENGERS,
        payment_methods=_PAYMENTS,
        total_baggages=_COUNT,
        nonfree_baggages=_COUNT,
        insurance={"type": "string", "enum": ["yes", "no"]},
    ),
    _spec(
        "calculate",
        "Calculate the result of a mathematical expression.",
        expression={"type": "string", "pattern": "^[0-9+*/(). -]+$"},
    ),
    _spec("cancel_reservation", "Cancel the whole reservation.", reservation_id=_RESERVATION_ID),
    _spec(
        "get_flight_status",
        "Get the status of a flight.",
        flight_number={"type": "string", "pattern": "^HAT[0-9]{3}$"},
        date=_DATE,
    ),
    _spec(
        "get_reservation_details",
        "Get the details of a reservation.",
        reservation_id=_RESERVATION_ID,
    ),
    _spec("get_user_details", "Get the details of a user.", user_id=_USER_ID),
    _spec("list_all_airports", "Return a list of all available airports."),
    _spec(
        "search_direct_flight",
        "Search direct flights between two cities on a date.",
        origin=_AIRPORT,
        destination=_AIRPORT,
        date=_DATE,
    ),
    _spec(
        "search_onestop_flight",
        "Search one-stop flights between two cities on a date.",
        origin=_AIRPORT,
        destination=_AIRPORT,
        date=_DATE,
    ),
    _spec(
        "send_certificate",
        "Send a certificate to a user.",
        user_id=_USER_ID,
        amount={"type": "number", "exclusiveMinimum": 0},
    ),
    _spec(
        "transfer_to_human_agents",
        "Transfer the user to a human agent, with a summary of the issue.",
        summary={"type": "string", "minLength": 1},
    ),
    _spec(
        "update_reservation_baggages",
        "Update the baggage information of a reservation.",
        reservation_id=_RESERVATION_ID,
        total_baggages=_COUNT,
        nonfree_baggages=_COUNT,
        payment_id=_PAYMENT_ID,
    ),
    _spec(
        "update_reservation_flights",
        "Update the flight information of a reservation.",
        reservation_id=_RESERVATION_ID,
        cabin=_CABIN,
        flights=_FLIGHTS,
        payment_id=_PAYMENT_ID,
    ),
    _spec(
        "update_reservation_passengers",
        "Update the passenger information of a reservation.",
        reservation_id=_RESERVATION_ID,
        passengers=_PASSENGERS,
    ),
)
"""The tools in the OpenAI tools format, as the model is shown them."""

_READS = frozenset(
    {
        "calculate",
        "get_flight_status",
        "get_reservation_details",
        "get_user_details",
        "list_all_airports",
        "search_direct_flight",
        "search_onestop_flight",
    }
)

# -- guards: pure checks of the policy over the arguments --------------------------------


def _bags_guard(args: dict[str, Any], state: SessionState) -> str | None:
    del state
    if args["nonfree_baggages"] > args["total_baggages"]:
        return (
            f"nonfree_baggages ({args['nonfree_baggages']}) cannot exceed total_baggages "
            f"({args['total_baggages']}); count the free bags in the total"
        )
    return None


def _route_guard(args: dict[str, Any], state: SessionState) -> str | None:
    del state
    if args["origin"] == args["destination"]:
        return f"origin and destination are both {args['origin']}; ask the user where to"
    return None


def _booking_guard(args: dict[str, Any], state: SessionState) -> str | None:
    refusal = _route_guard(args, state) or _bags_guard(args, state)
    if refusal:
        return refusal
    if args["flight_type"] == "round_trip" and len(args["flights"]) < 2:
        return "a round trip needs the outbound and the return flights; add the return flight"
    kinds = [method["payment_id"].rsplit("_", 1)[0] for method in args["payment_methods"]]
    limits = {"certificate": 1, "credit_card": 1, "gift_card": 3}
    for kind, limit in limits.items():
        if kinds.count(kind) > limit:
            return (
                f"{kinds.count(kind)} {kind} payments: the policy allows at most one "
                "certificate, one credit card and three gift cards per booking"
            )
    return None


_GUARDS: dict[str, Callable[[dict[str, Any], SessionState], str | None]] = {
    "book_reservation": _booking_guard,
    "update_reservation_baggages": _bags_guard,
    "search_direct_flight": _route_guard,
    "search_onestop_flight": _route_guard,
}

# -- the in-memory airline behind the tools ----------------------------------------------


def _seed() -> dict[str, Any]:
    return {
        "users": {
            "emma_kim_9957": {
                "user_id": "emma_kim_9957",
                "name": {"first_name": "Emma", "last_name": "Kim"},
                "payment_methods": {
                    "credit_card_5832574": {"source": "credit_card", "id": "credit_card_5832574"}
                },
                "membership": "silver",
                "reservations": ["EHGLP3"],
            }
        },
        "reservations": {
            "EHGLP3": {
                "reservation_id": "EHGLP3",
                "user_id": "emma_kim_9957",
                "origin": "PHX",
                "destination": "JFK",
                "flight_type": "one_way",
                "cabin": "basic_economy",
                "flights": [
                    {
                        "flight_number": "HAT156",
                        "origin": "PHX",
                        "destination": "SEA",
                        "date": "2024-05-17",
                        "price": 50,
                    },
                    {
                        "flight_number": "HAT021",
                        "origin": "SEA",
                        "destination": "JFK",
                        "date": "2024-05-17",
                        "price": 54,
                    },
                ],
                "passengers": [
                    {"first_name": "Evelyn", "last_name": "Taylor", "dob": "1965-01-16"},
                    {"first_name": "Anya", "last_name": "Silva", "dob": "1971-11-22"},
                ],
                "payment_history": [{"payment_id": "credit_card_5832574", "amount": 208}],
                "created_at": "2024-05-04T23:12:06",
                "total_baggages": 0,
                "nonfree_baggages": 0,
                "insurance": "no",
                "status": None,
            }
        },
        "flights": {
            ("PHX", "SEA"): "HAT156",
            ("SEA", "JFK"): "HAT021",
            ("JFK", "SFO"): "HAT023",
        },
    }


_OPERATORS: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
}


def _evaluate(node: ast.AST) -> float:
    if isinstance(node, ast.Expression):
        return _evaluate(node.body)
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
        return float(node.value)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return -_evaluate(node.operand)
    if isinstance(node, ast.BinOp) and type(node.op) in _OPERATORS:
        return float(_OPERATORS[type(node.op)](_evaluate(node.left), _evaluate(node.right)))
    raise ToolError("Error: invalid expression")


class _Airline:
    """The fake airline: tools that answer as tau2's do (JSON text, errors as 'Error: ...')."""

    def __init__(self) -> None:
        self.db = _seed()

    def _user(self, user_id: str) -> dict[str, Any]:
        if user_id not in self.db["users"]:
            raise ToolError(f"Error: User {user_id} not found")
        return dict(self.db["users"][user_id])

    def _reservation(self, reservation_id: str) -> dict[str, Any]:
        if reservation_id not in self.db["reservations"]:
            raise ToolError(f"Error: Reservation {reservation_id} not found")
        found: dict[str, Any] = self.db["reservations"][reservation_id]
        return found

    def _pay(self, user_id: str, payment_id: str) -> None:
        if payment_id not in self._user(user_id)["payment_methods"]:
            raise ToolError(f"Error: Payment method {payment_id} not found")

    def call(self, name: str, args: dict[str, Any]) -> str:
        handler = getattr(self, name)
        return json.dumps(handler(**args))

    def get_user_details(self, user_id: str) -> dict[str, Any]:
        return self._user(user_id)

    def get_reservation_details(self, reservation_id: str) -> dict[str, Any]:
        return self._reservation(reservation_id)

    def list_all_airports(self) -> list[str]:
        return sorted({airport for route in self.db["flights"] for airport in route})

    def search_direct_flight(self, origin: str, destination: str, date: str) -> list[Any]:
        number = self.db["flights"].get((origin, destination))
        return [] if number is None else [{"flight_number": number, "date": date}]

    def search_onestop_flight(self, origin: str, destination: str, date: str) -> list[Any]:
        return []

    def get_flight_status(self, flight_number: str, date: str) -> str:
        if flight_number not in self.db["flights"].values():
            raise ToolError(f"Error: Flight {flight_number} not found")
        return "available"

    def calculate(self, expression: str) -> float:
        try:
            return round(_evaluate(ast.parse(expression, mode="eval")), 2)
        except (SyntaxError, ZeroDivisionError) as e:
            raise ToolError(f"Error: {e}") from e

    def cancel_reservation(self, reservation_id: str) -> dict[str, Any]:
        reservation = self._reservation(reservation_id)
        reservation["status"] = "cancelled"
        return reservation

    def book_reservation(self, **args: Any) -> dict[str, Any]:
        for method in args["payment_methods"]:
            self._pay(args["user_id"], method["payment_id"])
        number = f"NEW{len(self.db['reservations']):03d}"
        booked = {"reservation_id": number, **args, "status": None}
        self.db["reservations"][number] = booked
        return booked

    def update_reservation_baggages(self, reservation_id: str, **args: Any) -> dict[str, Any]:
        reservation = self._reservation(reservation_id)
        self._pay(reservation["user_id"], args.pop("payment_id"))
        reservation.update(args)
        return reservation

    def update_reservation_flights(self, reservation_id: str, **args: Any) -> dict[str, Any]:
        reservation = self._reservation(reservation_id)
        self._pay(reservation["user_id"], args.pop("payment_id"))
        reservation.update(args)
        return reservation

    def update_reservation_passengers(
        self, reservation_id: str, passengers: list[Any]
    ) -> dict[str, Any]:
        reservation = self._reservation(reservation_id)
        if len(passengers) != len(reservation["passengers"]):
            raise ToolError("Error: Number of passengers does not match")
        reservation["passengers"] = passengers
        return reservation

    def send_certificate(self, user_id: str, amount: float) -> str:
        self._user(user_id)
        return f"Certificate added to user {user_id} with amount {amount}."

    def transfer_to_human_agents(self, summary: str) -> str:
        return "Transfer successful"


def build(seed: int = 0) -> Agent:
    """The airline agent: the tau2 tools with schemas, guards and the default guardrails.

    It has no model of its own: it is meant for replays of recorded transcripts (the
    recorded proposals stand in for the model). ``seed`` is accepted for replay and unused.
    """
    del seed
    airline = _Airline()
    tools = []
    for spec in TOOL_SPECS:
        name = spec["function"]["name"]

        def run(args: dict[str, Any], name: str = name) -> str:
            return airline.call(name, args)

        tools.append(
            Tool.from_openai(spec, run, guard=_GUARDS.get(name), parallel_safe=name in _READS)
        )
    return Agent(
        name="airline (tau2 tools)",
        system_prompt=PROMPT,
        tools=tools,
        reference="agentloop.examples.airline:build",
    )
