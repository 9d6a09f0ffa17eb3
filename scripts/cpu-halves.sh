#!/usr/bin/env bash
# cpu-halves.sh: the CPUs this process may run on, split into two halves
# for two "hosts" on one machine; prints "FIRST SECOND" as CPU lists
# (taskset's format, e.g. "0-7 8-15"). With one CPU both halves are it.
set -euo pipefail
cpus=$(taskset -cp $$ | sed 's/.*: //')
python3 - "$cpus" <<'PY' 2>/dev/null || echo "$cpus $cpus"
import sys
c = []
for part in sys.argv[1].split(','):
    a, _, b = part.partition('-')
    c += range(int(a), int(b or a) + 1)
h = len(c) // 2 or 1
print(','.join(map(str, c[:h])), ','.join(map(str, c[h:] or c)))
PY
