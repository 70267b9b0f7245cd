"""How the project hands data to other processes, servers and later runs: bounded, and whole.

- :mod:`.atomic_file`: a file that appears whole or not at all (datasets, checkpoint state, eval reports).
- :mod:`.http_call`: one HTTP request with bounded retries and a deadline (``RemoteEnv``, the search tool).
- :mod:`.http_limits`: response bodies decoded under a byte cap, one content encoding at most.
- :mod:`.json_depth`: refuse JSON nested deeper than a limit before parsing it.
- :mod:`.url_secrets`: passwords in URLs masked in what is printed, and kept from replacing an API key.
- :mod:`.sync_bridge`: sync code driving async code (a fresh loop, or a private loop thread).

Nothing here imports an env, a tool or a trainer: every layer above may use it.
"""
