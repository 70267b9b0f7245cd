"""A TAU-bench-retail-style customer-service env: a small store database, tools, and a scripted customer.

The agent serves one customer per episode. Each turn it either calls one store tool,
in the policy model's native format (``call_format``; Qwen/Hermes ``<tool_call>{...}</tool_call>`` by
default, parsed by :mod:`gem_core.tools.calls`), and sees
the tool's JSON result, or writes a message to the customer and sees the reply. The customer is a
scripted simulator with a goal drawn from ``data/tasks.json`` (return, exchange or cancel): it states
its request, gives its email when asked for identification, confirms when asked, and ends the
conversation (``###STOP###``) once a store write has been made. TAU-bench uses an LLM as the customer;
a script keeps episodes deterministic and offline, at the cost of a narrower conversation.

Reward, as in TAU-bench, comes from the final database state: 1.0 if it equals the state the task's
reference actions produce from the same start (every write right, nothing else changed), else 0.0,
given when the episode ends (the customer stops, or ``max_turns`` runs out). A tool call that is not
valid JSON or names no tool costs the format penalty; a tool refused by the store's rules (unknown
user, wrong order status, an order of another customer, an agent who has not identified the
customer) answers with an error, as a real API would, and the episode goes on.

The identity rule (TAU-bench's "authenticate the user before acting"): ``find_user_id_by_email``
identifies the customer only with the email the customer gave in this conversation (one read off an
account, or guessed, identifies no one); until then no account data is shown (``get_user_details``,
``get_order_details``) and nothing is changed, and afterwards only the identified customer's own.
The product catalogue (``get_product_details``) is public.
"""

from __future__ import annotations

import copy
import functools
import json
import numbers
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gem_core.env import Env, StepResult
from gem_core.errors import GemError, InvalidArgument, ResetNeeded
from gem_core.tools.calls import CALL_FORMATS, format_instruction, parse_native_calls

__all__ = ["RetailService", "load_store", "load_tasks", "apply_action", "TOOLS"]

DATA = Path(__file__).with_name("data")
STOP = "###STOP###"

TOOLS: dict[str, tuple[tuple[str, ...], str]] = {
    "find_user_id_by_email": (("email",), "identify the customer by the email they gave you; required before reading their account or changing anything"),
    "get_user_details": (("user_id",), "name, email and payment methods of the identified customer"),
    "get_order_details": (("order_id",), "status, items (item_id, product_id, price) and payment of an order of the identified customer"),
    "get_product_details": (("product_id",), "the product's items: item_id -> options, price, availability"),
    "cancel_pending_order": (("order_id", "reason"), "cancel a pending order; reason: 'no longer needed' or 'ordered by mistake'"),
    "return_delivered_order_items": (("order_id", "item_ids"), "return items of a delivered order"),
    "exchange_delivered_order_items": (("order_id", "item_ids", "new_item_ids"), "exchange items of a delivered order for available items of the same products"),
}
"""Tool name -> (argument names, what it does), shown to the agent in the first observation."""
_WRITES = {"cancel_pending_order", "return_delivered_order_items", "exchange_delivered_order_items"}


@functools.lru_cache(maxsize=4)
def _read_json(path: str) -> Any:
    return json.loads(Path(path).read_text(encoding="utf-8"))


def load_store(path: str | Path = DATA / "store.json") -> dict[str, Any]:
    """A fresh copy of the store database (users, products, orders)."""
    return copy.deepcopy(_read_json(str(path)))


def load_tasks(path: str | Path = DATA / "tasks.json") -> list[dict[str, Any]]:
    """The retail tasks in ``path`` (a JSON list), as a fresh copy the caller may change."""
    return copy.deepcopy(_read_json(str(path)))


class ToolError(GemError):
    """A call the store refuses; its message is what the agent sees."""


def apply_action(db: dict[str, Any], name: str, arguments: dict[str, Any], *, identified_user: str | None = None, check_identity: bool = True) -> Any:
    """Run one store tool on ``db`` (mutating it for writes) and return its result.

    Raises:
        ToolError: unknown tool, missing arguments, or a call the store's rules refuse.
    """
    if name not in TOOLS:
        raise ToolError(f"Unknown tool {name!r}; the tools are {', '.join(TOOLS)}.")
    missing = [arg for arg in TOOLS[name][0] if arg not in arguments]
    if missing:
        raise ToolError(f"{name} needs the argument(s) {', '.join(missing)}.")
    if name == "find_user_id_by_email":
        for user_id, user in db["users"].items():
            if user["email"].lower() == str(arguments["email"]).strip().lower():
                return user_id
        raise ToolError("No user with that email.")
    if name == "get_product_details":  # the catalogue is public
        return _get(db["products"], arguments["product_id"], "product")
    if check_identity and identified_user is None:
        doing = "reading an account" if name in ("get_user_details", "get_order_details") else "changing an order"
        raise ToolError(f"Identify the customer first (ask for their email, then find_user_id_by_email) before {doing}.")
    if name == "get_user_details":
        if check_identity and arguments["user_id"] != identified_user:
            raise ToolError("Only the identified customer's own details can be shown.")
        return _get(db["users"], arguments["user_id"], "user")
    order = _get(db["orders"], arguments["order_id"], "order")
    if check_identity and order["user_id"] != identified_user:
        raise ToolError("This order does not belong to the identified customer.")
    if name == "get_order_details":
        return order
    if name == "cancel_pending_order":
        if order["status"] != "pending":
            raise ToolError(f"Only pending orders can be cancelled; this one is {order['status']}.")
        if arguments["reason"] not in ("no longer needed", "ordered by mistake"):
            raise ToolError("The reason must be 'no longer needed' or 'ordered by mistake'.")
        order.update(status="cancelled", cancel_reason=arguments["reason"])
        return order
    if order["status"] != "delivered":
        raise ToolError(f"Only delivered orders can be returned or exchanged; this one is {order['status']}.")
    item_ids = _id_list(arguments["item_ids"])
    in_order = [item["item_id"] for item in order["items"]]
    if not item_ids or any(item_id not in in_order for item_id in item_ids):
        raise ToolError(f"item_ids must be items of the order: {', '.join(in_order)}.")
    if name == "return_delivered_order_items":
        order.update(status="return requested", return_items=sorted(item_ids))
        return order
    new_ids = _id_list(arguments["new_item_ids"])
    if len(new_ids) != len(item_ids):
        raise ToolError("Give one new item for each item exchanged.")
    product_of = {item["item_id"]: item["product_id"] for item in order["items"]}
    for old, new in zip(item_ids, new_ids, strict=True):
        product = db["products"][product_of[old]]
        if new not in product["items"] or new == old:
            raise ToolError(f"{new} is not another item of product {product_of[old]!r}.")
        if not product["items"][new]["available"]:
            raise ToolError(f"Item {new} is not available.")
    order.update(status="exchange requested", exchange_items=sorted(item_ids), exchange_new_items=sorted(new_ids))
    return order


#: Arguments that are lists of ids (one id alone is accepted too); every other argument is one text.
_ID_LISTS = frozenset({"item_ids", "new_item_ids"})


def _argument_type_error(name: str, arguments: Any) -> str | None:
    """Why the call's arguments are malformed (a list or an object where an id or a reason goes), or None.

    Checked before the store runs the call: a list as ``order_id`` cannot name an order (and is no key of
    the orders table), so it is a malformed action, answered with the format penalty like bad JSON."""
    if not isinstance(arguments, dict):
        return f"the arguments are a {type(arguments).__name__}, not an object"
    for key in TOOLS.get(name, ((),))[0]:
        value = arguments.get(key)
        if value is None:
            continue  # missing: the store names it
        if key in _ID_LISTS:
            values = value if isinstance(value, list) else [value]
            if any(not isinstance(v, (str, int)) or isinstance(v, bool) for v in values):
                return f"{key} must be a list of item ids such as [\"1001\"]"
        elif not isinstance(value, str):
            example = _EXAMPLES.get(key, '"..."')
            return f"{key} must be text such as {example}, not a {type(value).__name__}"
    return None


_EXAMPLES = {"order_id": '"#W1001"', "user_id": '"the id find_user_id_by_email returned"', "email": '"name@example.com"',
             "product_id": '"the product id in the order"', "reason": '"no longer needed"'}


def _get(table: dict[str, Any], key: Any, what: str) -> Any:
    if key not in table:
        raise ToolError(f"No {what} {key!r}.")
    return table[key]


def _id_list(value: Any) -> list[str]:
    return [str(v) for v in value] if isinstance(value, list) else [str(value)]


class RetailService(Env):
    """See the module docstring.

    Args:
        max_turns: agent turns (tool calls and messages) per episode.
        call_format: the tool-call syntax the agent writes (:data:`gem_core.tools.calls.CALL_FORMATS`:
            ``"hermes"``, ``"llama3_json"``, ``"deepseek_v3"``, ``"mistral"``), the policy model's native one.

    Raises:
        InvalidArgument: if ``call_format`` is unknown or ``max_turns`` is below 1.
    """

    blocking = False  # quick pure-Python steps: stepped inline, never via a thread
    max_return = 1.0

    def __init__(self, max_turns: int = 20, call_format: str = "hermes"):
        if max_turns < 1:
            raise InvalidArgument(f"max_turns must be at least 1, got {max_turns}.")
        if not isinstance(call_format, str) or call_format not in CALL_FORMATS:  # a list is unhashable
            raise InvalidArgument(f"call_format must be one of {sorted(CALL_FORMATS)}, got {call_format!r}.")
        self.max_turns, self.call_format = max_turns, call_format
        self.tasks = load_tasks()
        self.task: dict[str, Any] = {}
        self.db: dict[str, Any] = {}
        self.expected: dict[str, Any] = {}
        self.identified_user: str | None = None
        self.gave_email = False
        self.wrote = False
        self.turn = 0

    state_excludes = frozenset({"tasks"})

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        """A new conversation: ``options["task"]`` picks the task by index (default: one drawn from ``seed``).

        Raises:
            InvalidArgument: if ``options["task"]`` is not a whole number from 0 to the number of tasks minus 1.
        """
        super().reset(seed=seed)
        index = self._task_index(options["task"]) if options and "task" in options else int(self.np_random.integers(len(self.tasks)))
        self.task = self.tasks[index]
        self.db = load_store()
        self.expected = load_store()
        for action in self.task["actions"]:
            apply_action(self.expected, action["name"], action["arguments"], check_identity=False)
        self.identified_user, self.gave_email, self.wrote, self.turn = None, False, False, 0
        tools = "\n".join(f"- {name}({', '.join(args)}): {doc}" for name, (args, doc) in TOOLS.items())
        return (
            "You are a customer-service agent of an online store. Help the customer using these tools:\n"
            f"{tools}\n"
            f"Call one tool per turn, e.g. {format_instruction(self.call_format, 'get_order_details', 'order_id')}, "
            "or write a message to the customer. Identify the customer first: ask for their email and look it up "
            "(find_user_id_by_email); account details and changes are for that customer only.\n"
            f"Customer: Hi! {self.task['request']}"
        ), {"task": index}

    def _task_index(self, task: Any) -> int:
        """``options["task"]`` checked: an index into the tasks, never wrapped (-1 was the last task) or
        truncated (1.9 and True were task 1), so the episode is the task the caller named.

        Raises:
            InvalidArgument: if ``task`` is not a whole number from 0 to the number of tasks minus 1.
        """
        if isinstance(task, numbers.Integral) and not isinstance(task, bool) and 0 <= int(task) < len(self.tasks):
            return int(task)
        raise InvalidArgument(f"options['task'] must be a whole number from 0 to {len(self.tasks) - 1} (the task's index), got {task!r}.")

    def _customer_reply(self, message: str) -> str:
        text = message.lower()
        user = self.db["users"][self.task["user_id"]]
        if self.wrote:
            return f"Thank you, that's all I needed. {STOP}"
        if not self.gave_email and any(word in text for word in ("email", "identify", "verify", "name", "zip")):
            self.gave_email = True
            return f"Sure, my email is {user['email']}."
        if any(word in text for word in ("confirm", "proceed", "shall i", "should i", "go ahead")):
            return "Yes, please go ahead."
        return f"{self.task['request']} Can you help me with that?"

    def _customer_gave(self, email: Any) -> bool:
        """Whether ``email`` is the one the customer told the agent in this episode: identification rests on
        what the customer says, not on an email read off the account or guessed."""
        given = self.db["users"][self.task["user_id"]]["email"]
        return self.gave_email and isinstance(email, str) and email.strip().lower() == given.lower()

    def _end(self, observation: str, *, truncated: bool) -> StepResult:
        success = self.db == self.expected
        return observation, 1.0 if success else 0.0, not truncated, truncated, {"success": success}

    def step(self, action: str) -> StepResult:
        if not self.task:
            raise ResetNeeded("Call reset() before step().")
        self.turn += 1
        out_of_turns = self.turn >= self.max_turns
        calls = parse_native_calls(self.call_format, action)
        if calls:
            call = calls[-1]
            name, arguments = call.name, call.arguments
            error = call.error or _argument_type_error(name, arguments)
            if error:
                message = f"Invalid tool call ({error}); write it as {format_instruction(self.call_format, 'get_order_details', 'order_id')}."
                if out_of_turns:
                    return self._end(message, truncated=True)
                return self.invalid_action(message)
            try:
                if name == "find_user_id_by_email" and not self._customer_gave(arguments.get("email")):
                    raise ToolError(
                        "Ask the customer for their email: only the email the customer gave you in this "
                        "conversation identifies them."
                    )
                result = apply_action(self.db, name, arguments, identified_user=self.identified_user)
                if name == "find_user_id_by_email":
                    self.identified_user = result
                self.wrote = self.wrote or name in _WRITES
                observation = f"Tool result: {json.dumps(result, sort_keys=True)}"
            except ToolError as exc:
                observation = f"Tool error: {exc}"
            if out_of_turns:
                return self._end(observation, truncated=True)
            return observation, 0.0, False, False, {"tool": name}
        if not isinstance(action, str):
            message = f"An action is text: a tool call or a message to the customer, not {type(action).__name__}."
            return self._end(message, truncated=True) if out_of_turns else self.invalid_action(message)
        reply = self._customer_reply(action)
        if STOP in reply:
            return self._end(f"Customer: {reply}", truncated=False)
        if out_of_turns:
            return self._end(f"Customer: {reply}", truncated=True)
        return f"Customer: {reply}", 0.0, False, False, {}

    def sample_random_action(self) -> str:
        """A message asking for the email, or a tool call on a random order written in :attr:`call_format`
        (a call in another format would reach the customer as chat, never exercising the tools).

        Raises:
            ResetNeeded: before the first :meth:`reset` (there is no store to pick an order from).
        """
        if not self.db:
            raise ResetNeeded("No conversation yet: call reset() before sample_random_action().")
        choice = int(self.np_random.integers(3))
        if choice == 0:
            return "Could you give me your email, please?"
        orders = sorted(self.db["orders"])
        order = orders[int(self.np_random.integers(len(orders)))]
        name = ["get_order_details", "cancel_pending_order"][choice - 1]
        arguments = {"order_id": order} if choice == 1 else {"order_id": order, "reason": "no longer needed"}
        return _CALL_WRITERS[self.call_format](name, arguments)


_DEEPSEEK_CALL = "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>{name}\n```json\n{arguments}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>"
_CALL_WRITERS: dict[str, Callable[[str, dict[str, Any]], str]] = {
    "hermes": lambda name, arguments: f"<tool_call>{json.dumps({'name': name, 'arguments': arguments})}</tool_call>",
    "llama3_json": lambda name, arguments: json.dumps({"name": name, "parameters": arguments}),
    "deepseek_v3": lambda name, arguments: _DEEPSEEK_CALL.format(name=name, arguments=json.dumps(arguments)),
    "mistral": lambda name, arguments: f"[TOOL_CALLS] {json.dumps([{'name': name, 'arguments': arguments}])}",
}
"""One tool call in each of :data:`gem_core.tools.calls.CALL_FORMATS`, as :func:`~gem_core.tools.calls.parse_native_calls`
reads it (that module parses calls but writes only instructions)."""
