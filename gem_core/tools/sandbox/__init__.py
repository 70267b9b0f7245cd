"""Run untrusted Python: isolated, resource-limited, from a pool of warm workers.

Model-written code is hostile until proven otherwise, so a snippet runs:

- in its own process, inside a bubblewrap sandbox (mode ``"bwrap"``): new user, PID, network, IPC and
  UTS namespaces (no network at all), a read-only view of only the system and Python directories (the
  project's files, GEM's own package data and the home directory are not there), a private size- and
  file-count-capped ``/tmp``, a seccomp filter, a scrubbed environment, and no way back to the caller's
  terminal (:mod:`.isolation`, :mod:`.syscall_filter`);
- under resource limits: wall time (the host kills the sandbox), CPU time, address space per process,
  memory of all its processes together (:mod:`.accounting`), processes, file size and open files, and
  a cap on the bytes of output read back;
- forked from a zygote (:mod:`.zygote`): one sandbox per pool whose interpreter (``numpy`` already
  imported) forks calls ahead of time, each into namespaces of its own with a fresh ``/tmp``, its
  capabilities dropped and seccomp loaded before it waits for a snippet; so a call costs handing the
  snippet over, not a sandbox, an interpreter start or a fork (the zygote forks the replacement while the
  snippet runs); how it ended is the kernel's word: the snippet's own report once the kernel shows its exit
  begun with the status claimed (:mod:`.zygote`), else the zygote's ``waitpid``, which the snippet cannot reach (:mod:`.in_sandbox`). ``SandboxConfig(zygote=False)`` keeps sandboxes started ahead of time
  instead, one per snippet (:mod:`.worker`, :mod:`.pool`), as ``process`` mode always does.

Shell commands with a host working directory of their own (a terminal env's workspace, bound read-write
at ``/workspace``): :func:`run_shell` and :class:`WorkDir` in :mod:`.shell`.

When bubblewrap is not usable, :func:`run_python` refuses to run (:class:`SandboxUnavailableError`)
unless the caller explicitly picks the weaker ``mode="process"`` (or sets ``GEM_SANDBOX=process``): a
plain child process with the same resource limits, scrubbed environment and a temporary working
directory, but sharing the network, the file system and the user's processes (a snippet can signal its
host). Use it only for trusted code or inside a container that is the sandbox. The mode that ran is in
:attr:`SandboxResult.mode`. The README's "Security model" says what each mode guarantees.

Install bubblewrap on Debian/Ubuntu with ``apt-get install -y bubblewrap``.
"""

from gem_core.tools.sandbox.config import MODES, FunctionCall, SandboxConfig, SandboxResult, SandboxUnavailableError
from gem_core.tools.sandbox.isolation import available_modes, resolve_mode
from gem_core.tools.sandbox.pool import SandboxPool, SandboxPools, arun_python, default_pools, run_python
from gem_core.tools.sandbox.shell import WorkDir, run_shell

__all__ = [
    "SandboxResult",
    "SandboxConfig",
    "SandboxUnavailableError",
    "SandboxPool",
    "SandboxPools",
    "FunctionCall",
    "run_python",
    "run_shell",
    "WorkDir",
    "arun_python",
    "default_pools",
    "resolve_mode",
    "available_modes",
    "MODES",
]
