python3 - <<'PY'
text = open("stats.py").read()
head, _, tail = text.rpartition("    return ordered[middle]")
open("stats.py", "w").write(head + "    return (ordered[middle - 1] + ordered[middle]) / 2" + tail)
PY
python3 test_stats.py
