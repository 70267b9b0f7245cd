"""The TAU-bench-retail-style env: store rules, the scripted customer, and rewards from the final database.

The contract tests (gymnasium checker, determinism, hostile actions, state) cover ``agent:Retail-v0``
through ``list_envs()``.
"""

from __future__ import annotations

import json
import re

import pytest

import gem_core
from gem_core.envs.retail.env import RetailService, load_store, load_tasks


def call(name, **arguments):
    return f"<tool_call>{json.dumps({'name': name, 'arguments': arguments})}</tool_call>"


def identify(env) -> None:
    """Ask the customer for their email, as the policy says, and look it up."""
    observation, *_ = env.step("Could you give me your email to verify your identity?")
    email = observation.rsplit(" ", 1)[1].rstrip(".")
    observation, *_ = env.step(call("find_user_id_by_email", email=email))
    assert observation.startswith("Tool result:"), observation


class ScriptedAgent:
    """Serves the customer the way the store's policy asks, reading only what it is shown."""

    def __init__(self):
        self.request = ""
        self.plan: list[str] = []
        self.order: dict | None = None
        self.products: dict[str, dict] = {}

    def act(self, observation: str) -> str:
        if not self.request:
            self.request = observation.split("Customer: Hi! ", 1)[1]
            return "Could you give me your email so I can verify your identity?"
        if observation.startswith("Customer: Sure, my email is"):
            return call("find_user_id_by_email", email=observation.rsplit(" ", 1)[1].rstrip("."))
        if observation.startswith("Tool result:"):
            result = json.loads(observation.split(": ", 1)[1])
            order_id = re.search(r"#W\d+", self.request).group(0)
            if isinstance(result, str):  # the user id
                return call("get_order_details", order_id=order_id)
            if "items" in result and "user_id" in result and self.order is None:
                self.order = result
            elif "items" in result and "user_id" not in result:
                self.products[next(p for p in self._mentioned_products() if p not in self.products)] = result
            if "status" in result and result["status"] != self.order["status"]:
                return "All done: your request has been processed."
            return self._write(order_id)
        return "Could you repeat your request?"

    def _mentioned_products(self) -> list[str]:
        store = load_store()  # the product catalogue is public: names by product id
        request = self.request.lower()
        return [item["product_id"] for item in self.order["items"] if store["products"][item["product_id"]]["name"].lower() in request]

    def _write(self, order_id: str) -> str:
        request = self.request.lower()
        if "cancel" in request:
            reason = "ordered by mistake" if "mistake" in request else "no longer needed"
            return call("cancel_pending_order", order_id=order_id, reason=reason)
        mentioned = self._mentioned_products()
        items = [item["item_id"] for item in self.order["items"] if item["product_id"] in mentioned]
        if "return" in request:
            return call("return_delivered_order_items", order_id=order_id, item_ids=items)
        for product_id in mentioned:
            if product_id not in self.products:
                return call("get_product_details", product_id=product_id)
        new_items = []
        for item_id, product_id in zip(items, mentioned):
            candidates = self.products[product_id]["items"]
            words = lambda options: set(re.findall(r"[a-z0-9]+", options.lower()))  # noqa: E731
            best = max(
                (i for i, spec in candidates.items() if i != item_id and spec["available"]),
                key=lambda i: len(words(candidates[i]["options"]) & words(request)),
            )
            new_items.append(best)
        return call("exchange_delivered_order_items", order_id=order_id, item_ids=items, new_item_ids=new_items)


def play(env, agent, seed=None, options=None):
    observation, info = env.reset(seed=seed, options=options)
    total = 0.0
    while True:
        observation, reward, terminated, truncated, info = env.step(agent.act(observation))
        total += float(reward)
        if terminated or truncated:
            return total, terminated, info


def test_a_scripted_agent_that_follows_the_store_policy_solves_seeds_0_to_19_and_every_task():
    env = gem_core.make("agent:Retail-v0")
    for seed in range(20):
        total, terminated, info = play(env, ScriptedAgent(), seed=seed)
        assert (total, terminated, info["success"]) == (1.0, True, True), seed
    for task in range(len(load_tasks())):
        assert play(env, ScriptedAgent(), options={"task": task})[0] == 1.0, task


def test_talking_without_acting_earns_nothing_when_the_turns_run_out():
    env = RetailService(max_turns=4)
    env.reset(seed=0)
    for _ in range(4):
        observation, reward, terminated, truncated, info = env.step("How can I help you?")
    assert truncated and reward == 0.0 and info["success"] is False


def test_the_wrong_write_scores_zero_even_though_the_customer_is_satisfied():
    env = RetailService()
    env.reset(options={"task": 0})  # return the headphones of #W1001
    identify(env)
    _, _, _, _, info = env.step(call("return_delivered_order_items", order_id="#W1001", item_ids=["5001"]))  # the mug
    assert info == {"tool": "return_delivered_order_items"}
    observation, reward, terminated, _, info = env.step("Done!")
    assert "###STOP###" in observation and terminated and reward == 0.0 and info["success"] is False


def test_changes_need_an_identified_customer_who_owns_the_order():
    env = RetailService()
    env.reset(options={"task": 0})
    observation, *_ = env.step(call("return_delivered_order_items", order_id="#W1001", item_ids=["1001"]))
    assert observation.startswith("Tool error: Identify the customer first")
    identify(env)  # Ada
    observation, *_ = env.step(call("cancel_pending_order", order_id="#W1004", reason="no longer needed"))  # Alan's
    assert observation == "Tool error: This order does not belong to the identified customer."
    assert env.db == load_store()


@pytest.mark.parametrize(
    "action, message",
    [
        ("<tool_call>{not json}</tool_call>", "Invalid tool call (tool call is not valid JSON"),
        ('<tool_call>{"arguments": {}}</tool_call>', "Invalid tool call"),
        ('<tool_call>{"name": 3, "arguments": []}</tool_call>', "Invalid tool call"),
        ('<tool_call>{"name": "get_order_details", "arguments": {"order_id": ' + "[" * 1000 + "]" * 1000 + "}}</tool_call>", "Invalid tool call (tool call is nested"),
    ],
)
def test_a_malformed_tool_call_costs_the_format_penalty(action, message):
    env = RetailService()
    env.reset(seed=0)
    observation, reward, terminated, truncated, info = env.step(action)
    assert observation.startswith(message) and reward == env.format_penalty and info["format_error"]
    assert not (terminated or truncated)


@pytest.mark.parametrize(
    "name, arguments, error",
    [
        ("delete_everything", {}, "Unknown tool"),
        ("get_order_details", {}, "needs the argument(s) order_id"),
        ("get_order_details", {"order_id": "#W9999"}, "No order"),
        ("cancel_pending_order", {"order_id": "#W1001", "reason": "no longer needed"}, "Only pending orders"),
        ("cancel_pending_order", {"order_id": "#W1002", "reason": "bored"}, "The reason must be"),
        ("exchange_delivered_order_items", {"order_id": "#W1001", "item_ids": ["1001"], "new_item_ids": ["1003"]}, "not available"),
        ("exchange_delivered_order_items", {"order_id": "#W1001", "item_ids": ["1001"], "new_item_ids": ["2001"]}, "not another item"),
    ],
)
def test_the_store_refuses_what_its_rules_forbid(name, arguments, error):
    env = RetailService()
    env.reset(options={"task": 0})
    identify(env)
    observation, reward, *_ = env.step(call(name, **arguments))
    assert observation.startswith("Tool error:") and error in observation and reward == 0.0
    assert env.db == load_store()


async def test_one_episode_through_the_token_runner(tiny_tokenizer):
    from gem_core.rollout import run_episode
    from gem_core.testing import ScriptedPolicy

    agent = ScriptedAgent()

    def next_move(prompt_ids):
        text = tiny_tokenizer.decode(prompt_ids)
        last = text.rsplit("<|im_start|>user\n", 1)[1].split("<|im_end|>", 1)[0]
        return agent.act(last)

    trajectory = await run_episode(gem_core.make("agent:Retail-v0"), ScriptedPolicy(tiny_tokenizer, next_move), tiny_tokenizer, seed=2)
    assert trajectory.terminated and trajectory.episode_return == 1.0 and trajectory.rewards[-1] == 1.0


def test_a_llama_model_calls_the_store_tools_in_its_own_json_format():
    env = RetailService(call_format="llama3_json")
    observation, _ = env.reset(options={"task": 0})
    assert '"parameters"' in observation  # the example call is shown in the model's format
    env.step("Could you give me your email to verify your identity?")
    observation, *_ = env.step('{"name": "find_user_id_by_email", "parameters": {"email": "ada@example.com"}}')
    assert observation == 'Tool result: "ada_lovelace_1815"'
    with pytest.raises(ValueError, match="call_format must be one of"):
        RetailService(call_format="xml")


# ------------------------------------------------------------------------------ the identity rule


def test_reading_the_email_off_the_account_does_not_identify_the_customer():
    """Order -> user id -> user details -> email -> lookup: the customer never gave the email."""
    env = RetailService()
    env.reset(options={"task": 0})  # return the headphones of #W1001
    observations = [env.step(call("get_order_details", order_id="#W1001"))[0]]
    observations.append(env.step(call("get_user_details", user_id="ada_lovelace_1815"))[0])
    observations.append(env.step(call("find_user_id_by_email", email="ada@example.com"))[0])
    observations.append(env.step(call("return_delivered_order_items", order_id="#W1001", item_ids=["1001"]))[0])
    assert all(observation.startswith("Tool error:") for observation in observations), observations
    assert "ada@example.com" not in " ".join(observations)
    _, reward, terminated, truncated, info = env.step("Done!")
    assert reward == 0.0 and env.db == load_store()


def test_an_email_the_customer_did_not_give_identifies_no_one():
    env = RetailService()
    env.reset(options={"task": 0})
    observation, reward, terminated, truncated, info = env.step(call("find_user_id_by_email", email="ada@example.com"))
    assert observation.startswith("Tool error:") and "ask the customer" in observation.lower()
    assert (reward, terminated, truncated) == (0.0, False, False) and env.identified_user is None
    env.step("Could you give me your email to verify your identity?")
    observation, *_ = env.step(call("find_user_id_by_email", email="alan@example.com"))  # someone else's
    assert observation.startswith("Tool error:") and env.identified_user is None


def test_personal_data_is_shown_only_for_the_identified_customer():
    env = RetailService()
    env.reset(options={"task": 0})
    for action in (call("get_user_details", user_id="ada_lovelace_1815"), call("get_order_details", order_id="#W1001")):
        observation, *_ = env.step(action)
        assert observation.startswith("Tool error: Identify the customer first"), observation
    identify(env)
    assert "ada@example.com" in env.step(call("get_user_details", user_id="ada_lovelace_1815"))[0]
    assert env.step(call("get_order_details", order_id="#W1001"))[0].startswith("Tool result:")
    for action in (call("get_user_details", user_id="alan_turing_1912"), call("get_order_details", order_id="#W1003")):
        observation, *_ = env.step(action)
        assert observation.startswith("Tool error:") and "alan" not in observation, observation


@pytest.mark.parametrize(
    "name, arguments, message",
    [
        ("get_order_details", {"order_id": ["#W1001"]}, "order_id must be text"),
        ("get_order_details", {"order_id": {"id": "#W1001"}}, "order_id must be text"),
        ("cancel_pending_order", {"order_id": "#W1002", "reason": ["no longer needed"]}, "reason must be text"),
        ("get_user_details", {"user_id": [1]}, "user_id must be text"),
        ("get_product_details", {"product_id": ["x"]}, "product_id must be text"),
        ("find_user_id_by_email", {"email": {"a": 1}}, "email must be text"),
        ("return_delivered_order_items", {"order_id": "#W1001", "item_ids": [["1001"]]}, "item_ids must be a list of item ids"),
    ],
)
def test_an_argument_of_the_wrong_type_is_a_malformed_action_not_an_exception(name, arguments, message):
    env = RetailService()
    env.reset(options={"task": 0})
    identify(env)
    observation, reward, terminated, truncated, info = env.step(call(name, **arguments))
    assert observation.startswith("Invalid tool call") and message in observation, observation
    assert reward == env.format_penalty and info["format_error"] and not (terminated or truncated)
    assert env.db == load_store()


@pytest.mark.parametrize("task", ["abc", None, float("nan"), -1, 12, 10**30, 1.9, True, "1"])
def test_a_task_option_outside_the_tasks_is_refused_naming_the_range(task):
    """A task index that is not a whole number from 0 to N-1 is refused, not wrapped (-1 was task 11,
    10**30 task 4) or truncated (1.9 and True were task 1), nor a bare ValueError/TypeError."""
    from gem_core.errors import InvalidArgument

    env = RetailService()
    last = len(env.tasks) - 1
    if task == 12 and last >= 12:
        pytest.skip("more tasks shipped")
    with pytest.raises(InvalidArgument, match=rf"options\['task'\] must be a whole number from 0 to {last}"):
        env.reset(seed=0, options={"task": task})
    assert env.reset(seed=0, options={"task": last})[1] == {"task": last}


def test_a_call_format_that_is_not_a_name_is_refused_naming_the_choices():
    from gem_core.errors import InvalidArgument

    with pytest.raises(InvalidArgument, match=r"call_format must be one of .*'hermes'.*got \['hermes'\]"):
        gem_core.make("agent:Retail-v0", call_format=["hermes"])
