"""Per-call overhead of the agent endpoint (issue 42): an agent's call through HTTP vs the policy called directly.

The policy is a scripted one (no model), so the figures are the endpoint's own cost: HTTP on loopback,
JSON, rendering the messages with the chat template, stitching the call onto the episode, decoding the
reply. Rows:

- ``direct``: ``policy.generate(prompt_ids)`` on prompts of the same length, in process;
- ``endpoint, 1 agent (raw httpx)``: the same calls as plain HTTP posts (the endpoint without the OpenAI client's own cost);
- ``endpoint, 1 agent``: one OpenAI client making ``--turns`` calls of one growing conversation;
- ``endpoint, N agents``: ``--agents`` clients at once, each its own episode (per-call time is wall time
  over all calls, the rate the endpoint sustains).

    python bench/agent_proxy_overhead.py [--turns 20] [--agents 16] [--reply-words 40]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time

import httpx
import openai

from gem_core.agent import AgentEndpoint
from gem_core.rollout import SamplingParams
from gem_core.testing import ScriptedPolicy, make_tokenizer


def parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=20, help="calls per agent (one growing conversation)")
    parser.add_argument("--agents", type=int, default=16, help="agents at once in the concurrent row")
    parser.add_argument("--reply-words", type=int, default=40, help="words in each scripted reply")
    return parser.parse_args()


async def agent(endpoint: AgentEndpoint, turns: int, raw: bool = False) -> list[float]:
    episode = endpoint.open_episode()
    client = openai.AsyncOpenAI(base_url=endpoint.base_url, api_key=episode.key, max_retries=0)
    http = httpx.AsyncClient(headers={"Authorization": f"Bearer {episode.key}"})
    messages = [{"role": "system", "content": "You are a helpful assistant."}, {"role": "user", "content": "Guess the number."}]
    times = []
    for turn in range(turns):
        start = time.perf_counter()
        if raw:
            answer = (await http.post(endpoint.base_url + "/chat/completions", json={"model": "policy", "messages": messages})).json()
            content = answer["choices"][0]["message"]["content"]
        else:
            content = (await client.chat.completions.create(model="policy", messages=messages)).choices[0].message.content
        times.append(time.perf_counter() - start)
        messages += [{"role": "assistant", "content": content},
                     {"role": "user", "content": f"The number is higher than {turn}."}]
    await client.close()
    await http.aclose()
    (trajectory,) = endpoint.close_episode(episode.key).trajectories()
    assert trajectory.num_turns == turns
    return times


async def direct(policy: ScriptedPolicy, tokenizer, turns: int) -> list[float]:
    prompt = tokenizer.apply_chat_template([{"role": "user", "content": "Guess the number."}], add_generation_prompt=True)
    times = []
    for _ in range(turns):
        start = time.perf_counter()
        generation = await policy.generate(list(prompt), SamplingParams(max_new_tokens=1024))
        times.append(time.perf_counter() - start)
        prompt = list(prompt) + generation.token_ids + list(prompt[-8:])
    return times


def main() -> None:
    args = parse()
    tokenizer = make_tokenizer("chatml")
    policy = ScriptedPolicy(tokenizer, [" ".join(["the quick brown fox"] * max(1, args.reply_words // 4))])
    rows = []
    direct_times = asyncio.run(direct(policy, tokenizer, args.turns))
    rows.append(("direct policy.generate", statistics.median(direct_times), len(direct_times)))
    with AgentEndpoint(policy, tokenizer) as endpoint:
        asyncio.run(agent(endpoint, 3))  # warm-up: template probe, connections
        raw = asyncio.run(agent(endpoint, args.turns, raw=True))
        rows.append(("endpoint, 1 agent (raw httpx)", statistics.median(raw), len(raw)))
        single = asyncio.run(agent(endpoint, args.turns))
        rows.append(("endpoint, 1 agent", statistics.median(single), len(single)))

        async def many() -> float:
            start = time.perf_counter()
            await asyncio.gather(*(agent(endpoint, args.turns) for _ in range(args.agents)))
            return time.perf_counter() - start

        wall = asyncio.run(many())
        rows.append((f"endpoint, {args.agents} agents", wall / (args.agents * args.turns), args.agents * args.turns))
    base = rows[0][1]
    print(f"{'path':<32}{'calls':>7}{'ms/call':>10}{'overhead ms':>13}")
    for name, seconds, calls in rows:
        print(f"{name:<32}{calls:>7}{seconds * 1e3:>10.2f}{(seconds - base) * 1e3:>13.2f}")


if __name__ == "__main__":
    main()
