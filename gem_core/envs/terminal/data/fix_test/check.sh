# The checker brings its own copy of the tests: editing test_stats.py does not help.
cp stats.py /tmp/stats.py 2>/dev/null || exit 1
cat > /tmp/check_stats.py <<'PY'
import sys
sys.path.insert(0, "/tmp")
from stats import mean, median
assert mean([1, 2, 3, 4]) == 2.5
assert median([5, 1, 3]) == 3
assert median([4, 1, 3, 2]) == 2.5
assert median([10, 2]) == 6
assert median([7]) == 7
PY
cd /tmp && python3 -I check_stats.py
