"""Play scripted episodes with whichever ``gem`` the running interpreter imports; print them as JSON.

Run by ``test_side_by_side.py`` twice: under GEM's released package (its own virtualenv, since both
packages are named ``gem``) and under this project's. Reads ``[{"id", "seed", "actions"}, ...]`` on
stdin; writes one record per episode: the reset's observation and info, then each step's full result,
stopping at the end of the episode. An error is recorded, not raised, so both sides can be compared.
"""

import json
import sys


def play(env_id, seed, actions, envs):
    import gem

    record = {"id": env_id, "seed": seed}
    try:
        # one env per id, reset with each episode's seed: building some envs draws a whole episode
        env = envs[env_id] if env_id in envs else envs.setdefault(env_id, gem.make(env_id))
        observation, info = env.reset(seed=seed)
        record["reset"] = [observation, info]
        steps = record["steps"] = []
        for action in actions:
            observation, reward, terminated, truncated, info = env.step(action)
            steps.append([action, observation, float(reward), bool(terminated), bool(truncated), info])
            if terminated or truncated:
                break
    except Exception as exc:  # compared like any other outcome
        record["error"] = type(exc).__name__
    return record


def main():
    episodes = json.load(sys.stdin)
    envs = {}
    json.dump([play(e["id"], e["seed"], e["actions"], envs) for e in episodes], sys.stdout)


if __name__ == "__main__":
    main()
