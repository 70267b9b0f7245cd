"""The program a sandbox worker runs: a supervisor that waits for one snippet and a child that runs it.

This file is never imported by the host. :mod:`gem_core.tools.sandbox.worker` passes its source to
``python -I -S -c`` inside the sandbox, where the project's files are not visible, so it uses the
standard library only. Protocol, all over pipes the host created:

1. argv: ``STATUS_FD DROP_TO_UID PRELOAD SITE_DIRS STDIN_FD`` (``DROP_TO_UID`` is 0 for "keep the uid";
   ``PRELOAD`` a comma-separated list of modules to import before the worker reports ready;
   ``SITE_DIRS`` the interpreter's site-packages, joined by ``os.pathsep``: ``-S`` skips ``site``;
   ``STDIN_FD`` an empty memfd made by the host, for the snippet's stdin: the seccomp filter takes
   ``memfd_create`` away before this program starts).
2. The supervisor writes ``R`` on the status fd (a Unix socket) once ready, with a ``NETLINK_SOCK_DIAG``
   socket of the sandbox's network namespace attached (the host counts socket memory through it), then reads one request from stdin: a line
   with its length in bytes, then that many bytes of JSON:
   ``{"code", "stdin", "memory_mb", "cpu_seconds", "file_mb", "processes", "open_files", "call"?,
   "shared_uid"?, "max_returned_bytes"}`` (``shared_uid``: the snippet keeps a uid other sandboxes' processes
   have, so ``processes`` is counted on top of what it has when the snippet starts, see :func:`_apply_limits`).
3. It forks the child that runs the snippet. The child never holds the status fd: it is closed in the
   child before any of the snippet's code runs, the supervisor is not dumpable (no ``/proc/PID/mem``,
   no ``/proc/PID/fd``), the seccomp filter forbids ``ptrace``, and as root the child runs as a uid of
   its own. So the only way the snippet can speak to the host is its output and its exit status.
4. The child applies the resource limits, runs the code as ``__main__`` (then, for a call request, the
   named function), and writes one JSON line ``{"limit"?, "returned"?}`` to its report pipe; the
   supervisor reads at most ``max_returned_bytes`` of it, waits for the child and writes
   ``{"exit": STATUS, "limit"?, "returned"?}`` to the status fd, with ``STATUS`` what ``waitpid``
   says (``-N`` for death by signal ``N``), never what the snippet claims.

The worker runs exactly one snippet and is discarded.
"""

import _signal  # signal.signal's C function: the module's wrapper turns the old handler into an enum
import errno
import io
import json
import os
import resource
import select
import signal
import sys
import traceback

_PR_SET_DUMPABLE = 4
_PR_SET_CHILD_SUBREAPER = 36


_libc = None


def _prctl(option, value):
    # libc is looked up once per interpreter (a zygote's calls inherit it): a lookup costs a call's
    # snippet process about 0.2 ms of page faults on its way to the snippet.
    global _libc
    try:
        if _libc is None:
            import ctypes

            _libc = ctypes.CDLL(None, use_errno=True)
        _libc.prctl(option, value, 0, 0, 0)
    except Exception:
        pass


def _drop_privileges(uid):
    """When the host runs as root, run the snippet as an unprivileged uid of its own.

    RLIMIT_NPROC is not enforced for root, and a uid used by nothing else gives the snippet its own
    process count and no power over the supervisor.
    """
    os.setgroups([])
    os.setgid(uid)
    os.setuid(uid)


def _limit(kind, soft, hard=None):
    hard = soft if hard is None else hard
    try:
        resource.setrlimit(kind, (soft, hard))
    except (ValueError, OSError):
        # The host's hard limit may be lower than asked: use the lowest allowed.
        _, current_hard = resource.getrlimit(kind)
        if current_hard != resource.RLIM_INFINITY:
            resource.setrlimit(kind, (min(soft, current_hard), current_hard))


def _address_space_in_use():
    """This process's mapped bytes. The interpreter's own reservations (numpy's preload alone maps about
    100 MiB, most of it never touched) differ by machine and build, so ``memory_mb`` is counted on top."""
    try:
        with open("/proc/self/statm", "rb") as statm:
            return int(statm.read().split()[0]) * resource.getpagesize()
    except (OSError, ValueError, IndexError):
        return 0


def _tasks_in(proc_fd):
    """Tasks (processes and threads) the ``/proc`` open at ``proc_fd`` shows, this process not counted.

    Run unprivileged, every process of a sandbox (the zygote, the calls waiting in the pool, every running
    call and what it started) has the one uid bubblewrap mapped, and ``RLIMIT_NPROC`` counts all of them.
    """
    count = -1  # this process
    for name in os.listdir(proc_fd):
        if not name.isdigit():
            continue
        try:
            fd = os.open(f"{name}/stat", os.O_RDONLY | os.O_CLOEXEC, dir_fd=proc_fd)
        except OSError:
            continue  # ended meanwhile
        try:
            stat = os.read(fd, 4096)
        except OSError:
            stat = b""
        finally:
            os.close(fd)
        fields = stat[stat.rfind(b")") + 2:].split()  # the name may hold spaces and parentheses
        count += int(fields[17]) if len(fields) > 17 and fields[17].isdigit() else 1  # num_threads
    return max(count, 0)


def _apply_limits(request, proc_fd=None):
    """Set the snippet's limits. With ``shared_uid`` the snippet's uid is the one every process of this
    sandbox has (the host is not root), so its ``processes`` are allowed on top of the tasks the sandbox's
    ``/proc`` (``proc_fd``, else ``/proc``) shows now: a snippet run alone gets its whole budget and a fork
    bomb is still bounded, while calls running at once share what each of them has left."""
    mib = 1024 * 1024
    _limit(resource.RLIMIT_CORE, 0)
    _limit(resource.RLIMIT_AS, _address_space_in_use() + int(request["memory_mb"]) * mib)
    cpu = int(request["cpu_seconds"])
    _limit(resource.RLIMIT_CPU, cpu, cpu + 1)
    _limit(resource.RLIMIT_FSIZE, int(request["file_mb"]) * mib)
    _limit(resource.RLIMIT_NOFILE, int(request["open_files"]))
    processes = int(request["processes"])
    if request.get("shared_uid"):
        own_fd = proc_fd is None
        if own_fd:
            proc_fd = os.open("/proc", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            processes += _tasks_in(proc_fd)
        except (OSError, ValueError):
            pass  # no count: the plain budget, as root has it
        finally:
            if own_fd:
                os.close(proc_fd)
    _limit(resource.RLIMIT_NPROC, processes)
    # POSIX message queues are kernel memory no process maps (the seccomp filter also takes mq_open away)
    _limit(resource.RLIMIT_MSGQUEUE, 0)


def _stdin_file():
    """An empty memfd for a snippet's stdin, made while ``memfd_create`` is still allowed (the seccomp
    filter takes it away: a memfd sent over a socket and closed is memory no process holds)."""
    return os.memfd_create("stdin", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)


def _install_stdin(data, fd):
    """Give the snippet ``data`` as its stdin, on fd 0 too so child processes see it: the memfd ``fd``
    (from :func:`_stdin_file`), filled then sealed, so the snippet cannot write, grow or reuse it to hold
    memory of its own."""
    _fill_and_seal(fd, data)
    os.dup2(fd, 0)
    os.close(fd)
    sys.stdin = _text_reader(0)


def _fill_and_seal(fd, data):
    import fcntl

    view = memoryview(data.encode("utf-8", "replace"))
    while view:
        view = view[os.write(fd, view):]
    os.lseek(fd, 0, os.SEEK_SET)
    fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_WRITE | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_SEAL)


def _text_reader(fd):
    return io.TextIOWrapper(io.BufferedReader(io.FileIO(fd, "r", closefd=False)), encoding="utf-8", errors="replace")


def _limit_hit(error):
    """The resource limit an exception reports, if any."""
    if isinstance(error, MemoryError):
        return "memory"
    if isinstance(error, RuntimeError) and "new thread" in str(error):
        return "processes"
    if isinstance(error, OSError):
        return {
            errno.EAGAIN: "processes",
            errno.EFBIG: "file_size",
            errno.ENOSPC: "disk",
            errno.EMFILE: "open_files",
            errno.ENOMEM: "memory",
        }.get(error.errno)
    return None


def _say_ready(status_fd, first_fds=()):
    """Write ``R`` on the status socket with ``first_fds`` and then a ``NETLINK_SOCK_DIAG`` socket of
    this network namespace attached, through which the host counts the memory of the sandbox's sockets
    (sent without one if the kernel has no ``sock_diag``); this process keeps no copy of that socket."""
    import socket

    status = socket.socket(fileno=status_fd)
    try:
        try:
            diag = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW | socket.SOCK_CLOEXEC, 4)
        except OSError:
            if first_fds:
                socket.send_fds(status, [b"R"], list(first_fds))
            else:
                status.sendall(b"R")
            return
        with diag:
            socket.send_fds(status, [b"R"], [*first_fds, diag.fileno()])
    finally:
        status.detach()


def _close_inherited_fds(keep):
    """Close every descriptor but stdio and ``keep`` (bwrap's argument pipes may still be open)."""
    for fd in range(3, 1024):
        if fd not in keep:
            try:
                os.close(fd)
            except OSError:
                pass


def _preload(site_dirs, preload):
    """Add the host's site directories and import the preloads before the snippet runs, so every snippet
    starts with them loaded; a preload that fails to import is the snippet's affair, not the worker's."""
    sys.path.extend(filter(None, site_dirs.split(os.pathsep)))
    for name in filter(None, preload.split(",")):
        try:
            __import__(name)
        except Exception:
            pass


def main():
    status_fd, drop_to_uid, preload = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    site_dirs, stdin_fd = sys.argv[4], int(sys.argv[5])
    _close_inherited_fds({status_fd, stdin_fd})
    _prctl(_PR_SET_DUMPABLE, 0)
    # Orphans of the snippet (daemons) become the supervisor's, so the host finds them in its tree.
    _prctl(_PR_SET_CHILD_SUBREAPER, 1)
    _preload(site_dirs, preload)
    _say_ready(status_fd)
    os.set_inheritable(status_fd, False)

    size = int(sys.stdin.buffer.readline())
    request = json.loads(sys.stdin.buffer.read(size))
    report_read, report_write = os.pipe()
    child = os.fork()
    if child == 0:
        # Nothing the snippet can reach may lead back to the status fd.
        os.close(status_fd)
        os.close(report_read)
        del request["max_returned_bytes"]
        _run_snippet(request, report_write, drop_to_uid, stdin_fd)  # never returns
    os.close(report_write)
    os.close(stdin_fd)
    status = _supervise(child, report_read, int(request["max_returned_bytes"]))
    os.write(status_fd, json.dumps(status).encode() + b"\n")
    os._exit(0)


def _supervise(child, report_read, cap):
    """Collect the child's report (at most ``cap`` bytes) while waiting for it; the status to send."""
    report = bytearray()
    pidfd = os.pidfd_open(child)
    waiting = [report_read, pidfd]
    exited = False
    while not exited:
        readable, _, _ = select.select(waiting, [], [])
        if report_read in readable:
            chunk = os.read(report_read, 65536)
            if not chunk:
                waiting.remove(report_read)
            elif len(report) <= cap:
                report += chunk[: cap + 1 - len(report)]
        if pidfd in readable:
            exited = True
    os.set_blocking(report_read, False)
    try:
        while len(report) <= cap:
            chunk = os.read(report_read, 65536)
            if not chunk:
                break
            report += chunk[: cap + 1 - len(report)]
    except BlockingIOError:
        pass  # a process the child started still holds the pipe: what it wrote so far is all we take
    _, wait_status = os.waitpid(child, 0)
    status = {"exit": os.waitstatus_to_exitcode(wait_status)}
    if len(report) > cap:
        status["limit"] = "output"
        return status
    try:
        claims = json.loads(bytes(report).split(b"\n", 1)[0]) if report else {}
    except ValueError:
        claims = {}
    if isinstance(claims, dict):
        if isinstance(claims.get("limit"), str):
            status["limit"] = claims["limit"][:20]
        if isinstance(claims.get("returned"), str):
            status["returned"] = claims["returned"]
    return status


#: A request as the host sends one (:func:`_warm_up_snippet_path` parses it).
_SAMPLE_REQUEST = (
    b'{"code": "pass", "stdin": "", "memory_mb": 512, "cpu_seconds": 10, "file_mb": 16, "processes": 32, '
    b'"open_files": 64, "call": null}'
)


def _warm_up_snippet_path(scratch_fd):
    """Walk a call's path to the snippet once, on a sample request, before the call says it is ready.

    The snippet's process is forked from interpreters that share their pages with it copy-on-write, and
    the kernel maps their code into each child lazily: run first after the hand-over, the request's
    parsing, the stdin set-up and the compile took about 160 page faults (0.5-0.8 ms here), most of a
    short call's way to its snippet. Taken here, while the call waits in the pool, they are off that
    path. ``scratch_fd`` (an empty memfd, closed here) stands in for the snippet's stdin; nothing of
    the walk is left for the snippet (no output, no state but ``sys.stdout`` line-buffered, as
    :func:`_run_snippet` sets it anyway).
    """
    request = json.loads(_SAMPLE_REQUEST)
    _fill_and_seal(scratch_fd, request["stdin"])
    _text_reader(scratch_fd).read()
    os.close(scratch_fd)
    sys.stdout.reconfigure(line_buffering=True)
    for kind in (resource.RLIMIT_CORE, resource.RLIMIT_AS, resource.RLIMIT_CPU):
        resource.getrlimit(kind)
    exec(compile(request["code"], "<sandbox>", "exec"), {"__name__": "__main__", "__builtins__": __builtins__})
    print(end="")
    json.dumps({"wait_status": 0, "returned": ""}).encode()


def _run_snippet(request, report_fd, drop_to_uid, stdin_fd, proc_fd=None):
    if drop_to_uid:
        _drop_privileges(drop_to_uid)
    _prctl(_PR_SET_DUMPABLE, 1)  # its own /proc files stay its own (subprocess reads /proc/self/fd)
    _install_stdin(request["stdin"], stdin_fd)
    sys.stdout.reconfigure(line_buffering=True)
    sys.argv = ["<sandbox>"]
    namespace = {"__name__": "__main__", "__builtins__": __builtins__}
    call = request.get("call")
    _apply_limits(request, proc_fd)
    if proc_fd is not None:
        os.close(proc_fd)  # the sandbox's whole /proc: never the snippet's
    report = {}
    exit_status = 0
    try:
        exec(compile(request.pop("code"), "<sandbox>", "exec"), namespace)
        if call is not None:
            report["returned"] = json.dumps(_call(namespace, call["fn_name"], call["args"]), default=_plain)
        _finish_like_python()
    except SystemExit as stop:
        exit_status = _exit_status(stop.code)
    except BaseException as error:  # the snippet's own exception: report it like python would
        exit_status = 1
        report.pop("returned", None)
        limit = _limit_hit(error)
        if limit:
            report["limit"] = limit
        try:
            traceback.print_exception(type(error), error, error.__traceback__.tb_next)
        except BaseException:
            pass
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except BaseException:
            pass
    report["wait_status"] = exit_status << 8  # as waitpid will say: what its PID 1 checks it against
    try:
        os.write(report_fd, json.dumps(report).encode() + b"\n")
    except OSError:
        pass
    os._exit(exit_status)


def _plain(value):
    """json's fallback for a returned value: a numpy scalar or array as the Python value it holds (``np.int64(55)``
    is 55, as the test expects, not the text ``"np.int64(55)"``), anything else as its repr. Only numpy's own
    methods run, unbound from numpy's classes: an override on a subclass, or a class naming numpy as its
    module, is never called (issubclass on the type, not isinstance, which would read a ``__class__`` it defines)."""
    numpy = sys.modules.get("numpy")
    kind = type(value)
    if numpy is not None and issubclass(kind, (numpy.generic, numpy.ndarray)) and kind.__module__ == "numpy":
        plain = numpy.generic.item(value) if issubclass(kind, numpy.generic) else numpy.ndarray.tolist(value)
        if type(plain) is not kind:  # some scalars (longdouble) stay themselves: json would loop
            return plain
    return repr(value)


def _call(namespace, fn_name, args):
    function = namespace.get(fn_name)
    if function is None and "Solution" in namespace:
        function = getattr(namespace["Solution"](), fn_name, None)
    if function is None:
        raise NameError("define a function named " + fn_name)
    return function(*args) if isinstance(args, list) else function(args)


def _finish_like_python():
    """What the interpreter does at a normal exit: wait for non-daemon threads, run atexit handlers."""
    threading = sys.modules.get("threading")
    if threading is not None:
        for thread in threading.enumerate():
            if thread is not threading.main_thread() and not thread.daemon:
                thread.join()
    atexit = sys.modules.get("atexit")
    if atexit is not None:
        atexit._run_exitfuncs()


def _exit_status(code):
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    try:
        print(code, file=sys.stderr)
    except BaseException:
        pass
    return 1


# --------------------------------------------------------------------------------------------------
# Zygote: one long-lived sandbox whose initialised interpreter forks calls ahead of time. Each waits,
# fully set up, for the snippet the host hands it.

_CLONE_NEWNS, _CLONE_NEWIPC, _CLONE_NEWPID, _CLONE_NEWNET = 0x00020000, 0x08000000, 0x20000000, 0x40000000
_CLONE_VM, _INIT_STACK_BYTES = 0x100, 4096
#: ``pause``'s system call number where the architecture has one (x86-64); elsewhere an init calls libc's
#: ``pause()`` (which may mark the cancellation state of the zygote's thread it shares; nothing cancels it).
_SYS_PAUSE = {"x86_64": 34}.get(os.uname().machine)
_MS_RDONLY, _MS_NOSUID, _MS_NODEV, _MS_NOEXEC, _MS_REMOUNT, _MS_BIND = 1, 2, 4, 8, 32, 4096
_MS_REC, _MS_PRIVATE = 16384, 1 << 18
_PR_SET_NO_NEW_PRIVS, _PR_SET_SECCOMP, _SECCOMP_MODE_FILTER = 38, 22, 2
_FIRST_UID, _UIDS = 1_000_000, 1_999_000_000


def _check(result, what):
    if result != 0:
        import ctypes

        code = ctypes.get_errno()
        raise OSError(code, f"{what}: {os.strerror(code)}")


class _Kernel:
    """The system calls a call's setup makes through ``ctypes``, with their arguments built once in the
    zygote (building ``ctypes`` structures costs more than the calls): every call inherits them."""

    def __init__(self, seccomp_program):
        import ctypes

        class Header(ctypes.Structure):
            _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]

        class Data(ctypes.Structure):
            _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]

        class Program(ctypes.Structure):
            _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

        self.libc = ctypes.CDLL(None, use_errno=True)
        self._clone = self.libc.clone
        self._clone.restype = ctypes.c_int
        self._clone.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p]
        if _SYS_PAUSE is None:
            self._init_body, self._init_argument = ctypes.cast(self.libc.pause, ctypes.c_void_p), None
        else:
            self._init_body, self._init_argument = ctypes.cast(self.libc.syscall, ctypes.c_void_p), ctypes.c_void_p(_SYS_PAUSE)
        self._ctypes = ctypes  # imported here, not at the top: the single-sandbox worker never needs it
        #: init PID -> its stack and the stack's top, kept until it is reaped. Each init has its own: one shared
        #: stack broke a call in a few (the wrapper writes the function and its argument at the stack's top
        #: for the next init while the last one pushes a return address there, so the next one ran garbage).
        self.init_stacks = {}
        #: Stacks of reaped inits, for the next ones: a new ``ctypes`` buffer per call touched pages the zygote
        #: shares with the calls it forked, each a copy-on-write fault.
        self._free_stacks = []
        self._no_capabilities = (ctypes.byref(Header(0x20080522, 0)), (Data * 2)())  # version 3: two sets
        self._filter_buffer = ctypes.create_string_buffer(seccomp_program, len(seccomp_program))
        self._filter = ctypes.byref(Program(len(seccomp_program) // 8, ctypes.cast(self._filter_buffer, ctypes.c_void_p)))

    def start_init(self):
        """A child that only waits in ``pause()`` (the first child after ``unshare(CLONE_NEWPID)``: that
        namespace's PID 1) and its PID. It shares this process's memory (``CLONE_VM``): no page tables
        copied, none torn down at its exit, where a forked interpreter's copy cost a millisecond of CPU
        each way (issue 46). It runs no Python: ``syscall(SYS_pause)`` never returns, as every signal
        handler it inherits is the default or ignored (:func:`zygote_main`), and the default action of
        a signal sent to a PID 1 from inside its namespace is dropped by the kernel; SIGKILL from the
        host or the zygote ends it, and with it the namespace."""
        if self._free_stacks:
            stack = self._free_stacks.pop()
        else:
            buffer = self._ctypes.create_string_buffer(_INIT_STACK_BYTES)
            stack = buffer, self._ctypes.c_void_p((self._ctypes.addressof(buffer) + _INIT_STACK_BYTES - 64) & ~0xF)
        pid = self._clone(self._init_body, stack[1], _CLONE_VM | signal.SIGCHLD, self._init_argument)
        if pid <= 0:
            self._free_stacks.append(stack)
            _check(-1, "clone")
        self.init_stacks[pid] = stack
        return pid

    def init_reaped(self, pid):
        """The init ``pid`` was reaped: its stack serves the next one (no thread of it runs any more)."""
        stack = self.init_stacks.pop(pid, None)
        if stack is not None:
            self._free_stacks.append(stack)

    def unshare(self, flags):
        _check(self.libc.unshare(flags), "unshare")

    def setns(self, fd, flags):
        _check(self.libc.setns(fd, flags), "setns")

    def mount(self, source, target, fstype, flags, data):
        def raw(text):
            return None if text is None else text.encode()

        _check(self.libc.mount(raw(source), raw(target), raw(fstype), flags, raw(data)), "mount " + target)

    def drop_capabilities(self):
        """Empty every capability set (the zygote's CAP_SYS_ADMIN in the sandbox's user namespace)."""
        _check(self.libc.capset(*self._no_capabilities), "capset")

    def load_seccomp(self):
        """Put this process (and all it starts) under the compiled filter; no way back."""
        _check(self.libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")
        _check(self.libc.prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, self._filter, 0, 0), "seccomp")


def zygote_main():
    """argv: ``zygote CONTROL_FD SECCOMP_FD PRELOAD SITE_DIRS TMP_BYTES TMP_FILES MAX_RETURNED_BYTES
    OWN_UIDS``. Reads the seccomp program, imports the preloads, says ``R`` on the control socket, then
    forks one call per message received (each message carries the call's request pipe, stdout, stderr
    and status socket). It never runs snippet code itself, and never reads a request."""
    import fcntl  # noqa: F401 - imported once here, not in every call (_loopback_up)
    import gc
    import socket
    import struct  # noqa: F401 - likewise

    control_fd, seccomp_fd, preload, site_dirs = int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5]
    limits = {"tmp_bytes": int(sys.argv[6]), "tmp_files": int(sys.argv[7]), "cap": int(sys.argv[8])}
    # Found once here: walking the paths in each call cost its process ~60 page faults.
    limits["interpreter_dirs_in_tmp"] = _interpreter_dirs_under("/tmp")
    own_uids = sys.argv[9] == "1"
    program = b""
    while True:
        chunk = os.read(seccomp_fd, 65536)
        if not chunk:
            break
        program += chunk
    _close_inherited_fds({control_fd})
    _prctl(_PR_SET_DUMPABLE, 0)
    kernel = _Kernel(program)
    # Each running call holds two descriptors here (its status socket, its process's pidfd): hundreds of
    # calls at once pass a soft limit of 1024. A call's process sets its own limit from its request.
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    _limit(resource.RLIMIT_NOFILE, 1 << 20 if hard == resource.RLIM_INFINITY else hard, hard)
    _enter_own_pid_namespace(kernel, control_fd)
    _preload(site_dirs, preload)
    own_pid_namespace = os.open("/proc/self/ns/pid", os.O_RDONLY | os.O_CLOEXEC)
    networks = _Networks(kernel)
    control = socket.socket(fileno=control_fd)
    # A call's init inherits these handlers and runs none: every one must be the default or ignored (the
    # interpreter's SIGINT handler would run, in memory it shares with this process). Calls put it back.
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    # Woken by an order on the control socket, or by the end of a call's process (its pidfd): poll, as
    # a zygote serving hundreds of calls at once holds descriptors past select's limit.
    poller = select.poll()
    poller.register(control_fd, select.POLLIN)
    running = _RunningCalls(poller)
    _rehearse_call_path()
    # Everything allocated so far is shared with every call: keep the calls' collections from touching
    # (and so copying) those pages.
    gc.freeze()
    control.sendall(b"R")
    while True:
        events = poller.poll()
        for ended, wait_status in _reap():
            if not running.ended(ended, wait_status):
                networks.give_back(ended)
                kernel.init_reaped(ended)
        if not any(fd == control_fd for fd, _ in events):
            continue
        try:
            message, fds, _, _ = socket.recv_fds(control, 1, 5)
        except OSError:
            break
        if not message:
            break  # the host closed the pool
        if len(fds) != 5:
            for fd in fds:
                os.close(fd)
            continue
        uid = _FIRST_UID + int.from_bytes(os.urandom(4), "little") % _UIDS if own_uids else 0
        # The call's init is PID 1 of a PID namespace of its own; the call's process, forked next, is its
        # PID 2, and enters a network namespace no running call has; the zygote's own children go back to
        # the zygote's namespace right after (a failure of any of these ends the zygote: the host notices).
        network = networks.take()
        kernel.unshare(_CLONE_NEWPID)
        init = kernel.start_init()
        pid = os.fork()
        if pid == 0:
            try:
                kernel.setns(network, _CLONE_NEWNET)
                os.close(network)
                os.close(own_pid_namespace)
                networks.close()
                running.close()
                control.close()  # nothing a call can reach leads back to the zygote
                _serve_call(kernel, fds, limits, uid)
            except BaseException:
                traceback.print_exc()
            os._exit(70)
        kernel.setns(own_pid_namespace, _CLONE_NEWPID)
        networks.lend(network, init)
        request_fd, out_fd, err_fd, status_fd, report_fd = fds
        for fd in (request_fd, out_fd, err_fd, report_fd):
            os.close(fd)
        running.add(pid, init, status_fd)
    os._exit(0)


def _rehearse_call_path(times=20):
    """Walk the pure-Python part of a call's path here in the zygote, ``times`` times, before any call is forked.

    Python 3.11 writes into a code object while it warms up (a counter on each run, then the adaptive
    bytecode it specialises), and a first lookup fills the type cache and interns names. A call's process
    runs its path once, so each of those writes copied a page it shares with the zygote; made here, they
    are shared by every call instead: a call's process takes about 45 page faults fewer (issue 46). Nothing
    here changes what a call sees: the descriptors are closed, the limits set to what they are, and the
    handler of SIGINT put back to the default.
    """
    import socket

    for _ in range(times):
        _warm_up_snippet_path(_stdin_file())
        read, write = os.pipe()
        os.write(write, b"%d\n" % len(_SAMPLE_REQUEST) + _SAMPLE_REQUEST)
        _read_request(read)
        os.close(read)
        os.close(write)
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        pidfd = os.pidfd_open(os.getpid())
        with ours, theirs:
            _say_ready(theirs.fileno(), [pidfd])  # it keeps the fds it is given open: closed here
            _, fds, _, _ = socket.recv_fds(ours, 1, 4)
        for fd in (pidfd, *fds):
            os.close(fd)
        for kind in (resource.RLIMIT_CORE, resource.RLIMIT_AS, resource.RLIMIT_CPU):
            _limit(kind, *resource.getrlimit(kind))
        _signal.signal(signal.SIGINT, signal.default_int_handler)
        _signal.signal(signal.SIGINT, _signal.SIG_DFL)


class _RunningCalls:
    """The calls' processes the zygote forked and has not reaped, with each one's init and status socket.

    The zygote is the parent of a call's process, so ``waitpid``'s status of it is the zygote's to tell:
    it keeps the call's status socket (the call's process closes its own before any snippet code runs)
    and writes that status there when it reaps the process, then kills the call's init, which ends the
    namespace and everything the snippet left in it. A pidfd of each process wakes the zygote then.
    """

    def __init__(self, poller):
        self.poller = poller
        self.calls = {}  # call's process PID -> (its pidfd, its init's PID, status socket fd)

    def add(self, pid, init, status_fd):
        pidfd = os.pidfd_open(pid)
        self.poller.register(pidfd, select.POLLIN)
        self.calls[pid] = (pidfd, init, status_fd)

    def ended(self, pid, wait_status):
        """Report a reaped call's status; False if ``pid`` was not a call's process."""
        call = self.calls.pop(pid, None)
        if call is None:
            return False
        pidfd, init, status_fd = call
        self.poller.unregister(pidfd)
        try:
            os.write(status_fd, b'{"exit": %d}\n' % os.waitstatus_to_exitcode(wait_status))
        except OSError:
            pass  # the host gave up on the call (it killed it at its time limit)
        for fd in (status_fd, pidfd):
            os.close(fd)
        try:
            os.kill(init, signal.SIGKILL)  # not reaped yet, so the PID is still the init's
        except ProcessLookupError:
            pass
        return True

    def close(self):
        """In a call: hold none of the others' descriptors."""
        for pidfd, _, status_fd in self.calls.values():
            os.close(pidfd)
            os.close(status_fd)
        self.calls = {}


def _enter_own_pid_namespace(kernel, control_fd):
    """Go on as PID 1 of a new PID namespace; this process stays behind only to wait for it.

    The zygote makes each call's PID namespace with ``unshare`` and must then ``setns`` back into its
    own, which needs CAP_SYS_ADMIN in the user namespace that owns it. Unprivileged, bubblewrap's
    namespaces belong to the user namespace above the one the zygote runs in (bubblewrap nests a second
    one to map the uid after mounting /dev), so that ``setns`` was refused and every call fell back to
    a sandbox of its own (issue 23). A PID namespace made here belongs to the zygote's own.
    """
    kernel.unshare(_CLONE_NEWPID)
    pid = os.fork()
    if pid == 0:
        return
    os.close(control_fd)  # the host sees the zygote's end when the zygote ends, not this process's
    _, status = os.waitpid(pid, 0)
    os._exit(os.waitstatus_to_exitcode(status) & 0xFF)


def _reap():
    """``(PID, wait status)`` of each child that ended since the last look (reaped: no zombies)."""
    ended = []
    while True:
        try:
            pid, wait_status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return ended
        if pid == 0:
            return ended
        ended.append((pid, wait_status))


class _Networks:
    """Network namespaces for the calls, each lent to one call at a time and reused after it ended.

    Creating a network namespace and tearing it down cost about 0.85 ms of CPU per call, a seventh of
    a call's total (issue 23). A call's namespace holds nothing of it once the call's PID 1 has been
    reaped: the kernel killed every process of the call's PID namespace before that, so every socket
    is closed, and no process of a call keeps the capabilities to change ``lo``, routes or sysctls (and
    no call can make an IP socket: :mod:`.syscall_filter`). Concurrent calls never share one.
    """

    #: Free namespaces kept; more are closed (the kernel frees them).
    KEEP = 64

    def __init__(self, kernel):
        self.kernel = kernel
        self.free = []
        self.lent = {}  # call PID -> namespace fd

    def take(self):
        """A namespace no call uses, with ``lo`` up: a free one, or a new one. The call enters it
        itself (``setns``): the zygote never leaves its own, which it could not enter again when
        unprivileged (bubblewrap's namespace is not the zygote's user namespace's to join)."""
        if self.free:
            # the one given back longest ago: every namespace is reused in turn, not the last one only
            return self.free.pop(0)
        import socket

        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        pid = os.fork()
        if pid == 0:  # makes the namespace and sends it back (its /proc entry is not readable: not dumpable)
            try:
                ours.close()
                self.kernel.unshare(_CLONE_NEWNET)
                _loopback_up()
                socket.send_fds(theirs, [b"R"], [os.open("/proc/self/ns/net", os.O_RDONLY)])
            except BaseException:
                traceback.print_exc()
            os._exit(0)
        theirs.close()
        try:
            message, fds, _, _ = socket.recv_fds(ours, 1, 1)
        finally:
            ours.close()
            os.waitpid(pid, 0)
        if message != b"R" or len(fds) != 1:
            raise OSError("making a network namespace for a call failed")
        os.set_inheritable(fds[0], False)
        return fds[0]

    def lend(self, network, pid):
        self.lent[pid] = network

    def give_back(self, pid):
        network = self.lent.pop(pid, None)
        if network is None:
            return
        if len(self.free) < self.KEEP:
            self.free.append(network)
        else:
            os.close(network)

    def close(self):
        """In a call: hold none of them (not even its own, which it is in)."""
        for fd in [*self.free, *self.lent.values()]:
            os.close(fd)


def _loopback_up():
    """A new network namespace has only ``lo``, down: bring it up (no other interface exists)."""
    import fcntl
    import socket
    import struct

    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        flags = struct.unpack("16sH", fcntl.ioctl(probe, 0x8913, struct.pack("16sH14x", b"lo", 0))[:18])[1]
        fcntl.ioctl(probe, 0x8914, struct.pack("16sH14x", b"lo", flags | 0x1 | 0x40))  # IFF_UP | IFF_RUNNING


def _interpreter_dirs_under(root):
    """The running interpreter's directories that lie below ``root`` (outermost first, no duplicates):
    its prefixes and the virtualenv ``sys.executable`` belongs to (started with ``-I``, the interpreter
    reports the base prefix, but the snippet's child processes run ``sys.executable``)."""
    prefixes = {os.path.realpath(p) for p in (sys.prefix, sys.exec_prefix, sys.base_prefix, sys.base_exec_prefix)}
    prefixes.add(os.path.dirname(os.path.dirname(os.path.abspath(sys.executable))))
    inside = sorted(p for p in prefixes if p.startswith(root.rstrip("/") + "/"))
    return [p for p in inside if not any(p != q and p.startswith(q + "/") for q in inside)]


def _make_traversable(directory, root):
    """Create ``directory`` below ``root`` with parents the snippet's uid can pass through (0755)."""
    path = root
    for part in os.path.relpath(directory, root).split(os.sep):
        path = os.path.join(path, part)
        if not os.path.isdir(path):
            os.mkdir(path)
            os.chmod(path, 0o755)


def _read_request(fd):
    """One length-prefixed request from the host (``b"%d\\n" % len`` then the JSON); None at end of file."""
    data = bytearray()
    while b"\n" not in data:
        chunk = os.read(fd, 65536)
        if not chunk:
            return None
        data += chunk
    size, _, data = bytes(data).partition(b"\n")
    data, size = bytearray(data), int(size)
    while len(data) < size:
        chunk = os.read(fd, size - len(data))
        if not chunk:
            return None
        data += chunk
    return json.loads(bytes(data[:size]))


def _keep_only_fds(keep):
    """Close every descriptor but ``keep`` (``close_range``: one system call, not one per number)."""
    low = 0
    for fd in sorted(keep):
        if fd > low:
            os.closerange(low, fd)
        low = fd + 1
    os.closerange(low, 1 << 20)


def _serve_call(kernel, fds, limits, uid):
    """One call's process, forked ahead of its snippet as PID 2 of a PID namespace of its own (PID 1 is
    the call's init, :meth:`_Kernel.start_init`), in a network namespace the zygote lends it alone
    (:class:`_Networks`): it makes new mount and IPC namespaces with a fresh /tmp, drops every capability
    (as root: switches to ``uid``), says ``R`` on the status socket with pidfds of the init and of itself
    (the host learns its PID from the message's credentials), closes that socket, loads the seccomp
    filter and only then waits for the host's request. Its report goes to the host on its own pipe
    (``report_fd``); how it ended, the zygote tells (:class:`_RunningCalls`)."""
    request_fd, out_fd, err_fd, status_fd, report_fd = fds
    os.setsid()
    os.dup2(out_fd, 1)
    os.dup2(err_fd, 2)
    os.close(out_fd)
    os.close(err_fd)
    _signal.signal(signal.SIGINT, signal.default_int_handler)  # the zygote's is the default, for the inits
    kernel.unshare(_CLONE_NEWNS | _CLONE_NEWIPC)
    kernel.mount(None, "/", None, _MS_REC | _MS_PRIVATE, None)
    options = f"size={limits['tmp_bytes']},nr_inodes={limits['tmp_files']},mode=1777"
    # The interpreter may live under /tmp (a virtualenv in a checkout there): hold its directories
    # before the fresh /tmp covers them, and bind them back read-only on top of it.
    keep = [(d, os.open(d, os.O_PATH | os.O_DIRECTORY)) for d in limits["interpreter_dirs_in_tmp"]]
    for target in ("/tmp", "/dev/shm"):
        kernel.mount("tmpfs", target, "tmpfs", _MS_NOSUID | _MS_NODEV, options)
    for directory, fd in keep:
        _make_traversable(directory, "/tmp")
        kernel.mount(f"/proc/self/fd/{fd}", directory, None, _MS_BIND | _MS_REC, None)
        kernel.mount(None, directory, None, _MS_BIND | _MS_REMOUNT | _MS_RDONLY | _MS_NOSUID | _MS_NODEV, None)
        os.close(fd)
    # Unprivileged (no uid of its own), the call counts its process limit on top of what the sandbox's
    # processes are when its snippet starts: read in the zygote's /proc, which the call's own then covers.
    sandbox_proc = None if uid else os.open("/proc", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    kernel.mount("proc", "/proc", "proc", _MS_NOSUID | _MS_NODEV | _MS_NOEXEC, None)
    # The init is PID 1 here: when the host (or the zygote) kills it, the kernel kills everything the
    # snippet left in the namespace.
    pidfds = [os.pidfd_open(1), os.pidfd_open(os.getpid())]
    if uid:
        _drop_privileges(uid)
    kernel.drop_capabilities()  # as root, setuid left the inheritable set: empty it too
    stdin_fd = _stdin_file()
    _warm_up_snippet_path(_stdin_file())
    _say_ready(status_fd, pidfds)
    keep = {0, 1, 2, report_fd, stdin_fd, request_fd} | ({sandbox_proc} if sandbox_proc is not None else set())
    _keep_only_fds(keep)  # the status socket and pidfds too
    kernel.load_seccomp()
    request = _read_request(request_fd)
    if request is None:
        os._exit(0)  # the host closed the pool
    os.close(request_fd)
    _run_snippet(request, report_fd, 0, stdin_fd, sandbox_proc)


if __name__ == "__main__":
    if sys.argv[1:2] == ["zygote"]:
        zygote_main()
    else:
        main()
