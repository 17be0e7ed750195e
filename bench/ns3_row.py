"""One ns-3 scenario of bench/ns3_compare.py, once, for counting its instructions with
callgrind (issue 35 §2: the speed ratio in instructions, which neither machine's load nor
ns-3's own run-to-run spread moves). Prints the run's row as JSON.

    valgrind --tool=callgrind --toggle-collect='ns3::Simulator::Run*' \\
        python bench/ns3_row.py "A 16 flows 10M/100ms fq_codel" 30

The scenario names are ns3_compare.py's (``--short`` durations: A 30 s, B 3 s, C 6 s);
the ns3 wheel must be installed (see ns3_compare.py). Under callgrind ns-3 runs ~50x
slower: row A for 30 s took 7 minutes here, row B for 3 s 35 minutes.
"""
from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import ns3_compare as nc  # noqa: E402


def main(argv: list) -> int:
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    name, duration_s = argv[0], float(argv[1])
    rows = {s.name: s for s in nc.scenarios(short=False, max_pairs=16)}
    if name not in rows:
        print(f"ns3_row.py: no scenario {name!r}; one of: {', '.join(rows)}", file=sys.stderr)
        return 2
    print(json.dumps(nc.run_ns3(dataclasses.replace(rows[name], duration_s=duration_s))))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
