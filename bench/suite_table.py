#!/usr/bin/python3
"""The suite's time from a log of the README's test command (or of .ci/run,
which runs it): one JSON object with ctest's total, every test's status and
seconds, and the slowest N; --markdown prints those N as docs/testing.md's
table instead.

    CI=true .ci/run 2>&1 | tee ci.log; python3 bench/suite_table.py ci.log
    python3 bench/suite_table.py --markdown --top 15 ci.log

Under `ctest -j` a test's seconds are its wall time beside whatever ran next
to it, not alone. Reads ctest's lines `  3/105 Test  #9: name ....   Passed
26.83 sec` and `Total Test time (real) = 2019.64 sec`; a log without them
is an error."""
import argparse
import json
import re
import sys

LINE = re.compile(r"^\s*\d+/\d+ Test\s+#\d+: (\S+) \.*\s*(\*\*\*)?(\w[\w ]*?)\s+(\d+(?:\.\d+)?) sec")
TOTAL = re.compile(r"^Total Test time \(real\) =\s*(\d+(?:\.\d+)?) sec")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("log")
    ap.add_argument("--top", type=int, default=15)
    ap.add_argument("--markdown", action="store_true")
    a = ap.parse_args()
    tests, total = [], None
    with open(a.log, errors="replace") as f:
        for line in f:
            m = LINE.match(line)
            if m:
                tests.append({"name": m.group(1), "status": m.group(3).strip(), "seconds": float(m.group(4))})
                continue
            m = TOTAL.match(line)
            if m:
                total = float(m.group(1))
    if not tests or total is None:
        sys.exit("suite_table.py: %s has no ctest test lines or no 'Total Test time' line" % a.log)
    slow = sorted(tests, key=lambda t: -t["seconds"])[: a.top]
    count = {}
    for t in tests:
        count[t["status"]] = count.get(t["status"], 0) + 1
    if a.markdown:
        print("| test | seconds | status |")
        print("|---|---:|---|")
        for t in slow:
            print("| %s | %.1f | %s |" % (t["name"], t["seconds"], t["status"]))
        return
    json.dump({"log": a.log, "total_test_seconds": total, "tests": len(tests), "by_status": count,
               "sum_of_test_seconds": round(sum(t["seconds"] for t in tests), 2), "slowest": slow,
               "all": tests}, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main()
