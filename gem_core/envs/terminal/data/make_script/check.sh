# greet.sh runs as a child of a checker that is not dumpable (no /proc/PID/mem to rewrite its verdict
# through), which compares the output itself; the program is read from stdin, out of the script's reach.
test -x greet.sh || exit 1
exec python3 -I - <<'PY'
import ctypes, subprocess, sys

if ctypes.CDLL(None).prctl(4, 0, 0, 0, 0) != 0:  # PR_SET_DUMPABLE 0
    sys.exit("the checker could not protect itself")
for name in ("Ada", "Grace Hopper"):
    try:
        run = subprocess.run(["./greet.sh", name], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    except OSError:
        sys.exit(1)
    if run.stdout.rstrip(b"\n") != f"Hello, {name}!".encode():  # as "$(./greet.sh ...)" compares
        sys.exit(1)
PY
