# The checker brings its own copy of the tests (editing test_stats.py does not help) and keeps the verdict
# to itself: stats.py runs in a child process that only reports the values it computed, as JSON on a pipe
# of its own; this process compares them with plain numbers of exact types. So exiting early (no values),
# returning objects that claim to equal anything (not plain numbers), or rewriting this process's memory
# (it is not dumpable: no /proc/PID/mem for the child) cannot pass. The program is read from stdin, so the
# child cannot read the expected values either.
cp stats.py /tmp/stats.py 2>/dev/null || exit 1
cd /tmp && exec python3 -I - <<'PY'
import ctypes, json, os, subprocess, sys

if ctypes.CDLL(None).prctl(4, 0, 0, 0, 0) != 0:  # PR_SET_DUMPABLE 0
    sys.exit("the checker could not protect itself")
CASES = [("mean", [1, 2, 3, 4], 2.5), ("median", [5, 1, 3], 3), ("median", [4, 1, 3, 2], 2.5), ("median", [10, 2], 6), ("median", [7], 7)]
CHILD = """
import json, os, sys
fd, calls = int(sys.argv[1]), json.loads(sys.argv[2])
sys.path.insert(0, "/tmp")
import stats
values = [getattr(stats, name)(list(args)) for name, args in calls]
plain = [value if type(value) in (int, float) else repr(value)[:100] for value in values]
with os.fdopen(fd, "w") as channel:
    channel.write(json.dumps(plain))
"""
read_end, write_end = os.pipe()
child = subprocess.Popen(
    [sys.executable, "-I", "-c", CHILD, str(write_end), json.dumps([[name, args] for name, args, _ in CASES])],
    pass_fds=(write_end,), stdin=subprocess.DEVNULL, cwd="/tmp",
)
os.close(write_end)
report = b""
while len(report) <= 65536:
    chunk = os.read(read_end, 65536)
    if not chunk:
        break
    report += chunk
if child.wait() != 0 or len(report) > 65536:
    sys.exit(1)
try:
    values = json.loads(report)
except (ValueError, RecursionError):
    sys.exit(1)
passed = isinstance(values, list) and len(values) == len(CASES) and all(
    type(value) in (int, float) and value == expected for value, (_, _, expected) in zip(values, CASES)
)
sys.exit(0 if passed else 1)
PY
