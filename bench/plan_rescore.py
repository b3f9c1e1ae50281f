#!/usr/bin/env python3
"""Scores a planner's predictions against plans measured before: the measured lines of
`meshflow plan --measure N --json` (measured_s, measured_peak per layout) joined by layout with the
lines of `meshflow plan --json` (a later planner, the same config and profile). Prints the chosen
plan's rank and regret among the measured, Kendall's tau of the predicted and measured orders, and
the memory errors; --table lists every measured plan, --worst K the K plans the time model misses
most; --retest AGAIN.jsonl[.gz] (a second measurement of the same plans) prints how well the machine
repeats itself: Kendall's tau between the two measured orders (no time model can be expected to
order the plans better) and the spread of their ratios; --retest may repeat. Where the lines carry a
"session" (plans measured over several sittings of a machine whose speed drifts between them), the
retest's session is scored alone as well: its plans with the measured file's plans of the same
session, all timed in one sitting; --memory scores the peaks alone (a memory
sweep, whose step times were not measured on an idle machine). MEASURED may be gzipped (.gz: the
measurements kept in bench/plan_data/).
Usage: python3 bench/plan_rescore.py MEASURED.jsonl[.gz] PREDICTED.jsonl [--table] [--worst K]
         [--retest AGAIN.jsonl[.gz] ...] [--memory]"""
import gzip
import json
import math
import statistics
import sys


def read_measured(path):
    measured = {}
    for line in (gzip.open if path.endswith(".gz") else open)(path, "rt"):
        d = json.loads(line)
        if "measured_s" in d:
            measured[d["layout"]] = d
    return measured


def kendall(a, b):
    n, net = len(a), 0
    for i in range(n):
        for j in range(i + 1, n):
            s = (a[i] - a[j]) * (b[i] - b[j])
            net += (s > 0) - (s < 0)
    return net / (n * (n - 1) / 2)


def main():
    args = sys.argv[1:]
    worst = 0
    table = "--table" in args
    if table:
        args.remove("--table")
    memory_only = "--memory" in args
    if memory_only:
        args.remove("--memory")
    if "--worst" in args:
        k = args.index("--worst")
        worst = int(args[k + 1])
        del args[k:k + 2]
    retests = []
    while "--retest" in args:
        k = args.index("--retest")
        retests.append(read_measured(args[k + 1]))
        del args[k:k + 2]
    if len(args) != 2:
        sys.exit(__doc__)
    measured = read_measured(args[0])
    predicted = [json.loads(line) for line in open(args[1])]
    rows = []  # (predicted rank, predicted s, measured s, predicted peak, measured peak, layout)
    for p in predicted:
        m = measured.get(p["layout"])
        if m:
            rows.append((p["rank"], p["step_s"], m["measured_s"], p["memory"]["peak"], m["measured_peak"], p["layout"]))
    if len(rows) < 2:
        sys.exit(f"only {len(rows)} of the {len(measured)} measured plans are among the predicted ones")
    rows.sort()
    if memory_only:
        errors = [(r[3] / r[4] - 1, r[5]) for r in rows]
        worst_error = max(errors, key=lambda e: abs(e[0]))
        print(f"memory: {sum(abs(e) <= 0.10 for e, _ in errors)} of {len(rows)} measured plans within 10% of their "
              f"measured peak ({len(predicted)} predicted); largest error {100 * worst_error[0]:+.1f}% ({worst_error[1]})")
        return
    if table:
        for r in rows:
            print(f"plan {r[0]:5d} | {r[5]:<56} | predicted {r[1]:8.4f} s | measured {r[2]:8.4f} s | "
                  f"peak predicted {r[3] / 1e9:.4f} GB, measured {r[4] / 1e9:.4f} GB ({100 * (r[3] / r[4] - 1):+.1f}%)")
    chosen = rows[0][5]
    print(f"{len(rows)} measured plans of {len(predicted)} predicted; {score(rows, chosen)}")
    errors = [abs(r[3] - r[4]) / r[4] for r in rows]
    print(f"memory: {sum(e <= 0.10 for e in errors)} of {len(rows)} within 10%, largest error {100 * max(errors):.1f}%")
    for r in sorted(rows, key=lambda r: -abs(r[1] / r[2] - 1))[:worst]:
        print(f"  plan {r[0]:5d} {r[5]:<56} predicted {r[1]:.4f} s, measured {r[2]:.4f} s ({100 * (r[1] / r[2] - 1):+.0f}%)")
    sessions = sorted({d.get("session") for d in measured.values()} - {None})
    for session in sessions if len(sessions) > 1 else []:
        alone = [r for r in rows if measured[r[5]].get("session") == session]
        if len(alone) >= 2:
            print(f"session {session}'s plans alone ({len(alone)}): {score(alone, chosen)}")
    for again in retests:
        both = [(r[2], again[r[5]]["measured_s"], r[1]) for r in rows if r[5] in again]
        if len(both) < 2:
            sys.exit(f"--retest: only {len(both)} plans measured twice")
        logs = [math.log(b / a) for a, b, _ in both]
        print(f"retest: {len(both)} plans measured twice; Kendall's tau between the two measurements "
              f"{kendall([a for a, _, _ in both], [b for _, b, _ in both]):.3f} (the predicted against the first "
              f"{kendall([a for a, _, _ in both], [p for _, _, p in both]):.3f}, against the second "
              f"{kendall([b for _, b, _ in both], [p for _, _, p in both]):.3f}); second / first: geometric mean "
              f"{math.exp(statistics.fmean(logs)):.3f}, log standard deviation {statistics.pstdev(logs):.3f}")
        retest_sessions = {d.get("session") for d in again.values()} - {None}
        if len(retest_sessions) != 1:
            continue
        session = retest_sessions.pop()
        # The retest's sitting alone: its plans, and the measured file's plans of the same sitting.
        alone = [r[:2] + (again[r[5]]["measured_s"],) + r[3:] if r[5] in again else r for r in rows
                 if r[5] in again or measured[r[5]].get("session") == session]
        if len(alone) > len(both):
            print(f"session {session} alone ({len(alone)} plans timed in one sitting, {len(both)} of them the "
                  f"retest's): {score(alone, chosen)}")


def score(rows, chosen_layout):
    """The first predicted of rows (sorted by predicted rank; the chosen plan where it is among
    them) among them: its measured rank, regret, tau."""
    best = min(r[2] for r in rows)
    chosen = rows[0]
    chosen_name = "the chosen plan" if chosen[5] == chosen_layout else "the first predicted of them"
    faster = sum(r[2] < chosen[2] for r in rows)
    tau = kendall([r[1] for r in rows], [r[2] for r in rows])
    return (f"{chosen_name} {chosen[5]} (predicted rank {chosen[0]}) measured {chosen[2]:.4f} s, rank "
            f"{faster + 1} of {len(rows)}; regret {100 * (chosen[2] / best - 1):.1f}% against the best measured "
            f"({best:.4f} s); Kendall's tau {tau:.3f}")

main()
