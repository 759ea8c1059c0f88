#!/usr/bin/env python3
"""A bench run's JSON compared with bench/baseline.json, figure by figure:
a mediafs figure more than 10% worse than the baseline's is printed as a
REGRESSION line. `make bench` does this after every run (bench/run.py);
by hand:

    python3 bench/baseline.py [RESULTS_JSON] [--baseline bench/baseline.json] [--tolerance 0.10]
    python3 bench/baseline.py --take [RESULTS_JSON]    # a run's figures become the baseline

Which figures: every number of the run's JSON that is mediafs's (its path
names mediafs: a row's mediafs column, a WAN cell of mediafs, an HLS or
media-server figure of mediafs) and whose name says which way is better:
times (`s`, `*_s`, `*_ms`, medians of them), requests, rounds and bytes
are better lower; throughputs (`*_mbps`) higher. The rest (ratios between
tools, goals, settings) is not compared. A figure missing from either run
is listed once, not judged. The whole run's peak RSS (row 6) is the
highest of every scenario's mounts, so it is judged only against a
baseline that ran the same scenarios; each scenario's own peak
(`peak_rss_by_scenario`) is judged where both runs have it. Times on a shared 2-core machine move by
±30% from run to run: a REGRESSION of a time is a reason to measure again
(bench/compare.py runs both binaries side by side); one of requests,
rounds or bytes is a change of behaviour.
"""
import argparse
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
BASELINE = os.path.join(HERE, "baseline.json")

LOWER = ("_s", "_ms", "_requests", "_bytes", "_kib", "_rss_mib", "_rounds", "_s_median", "_gets")
LOWER_NAMES = {"s", "ms", "requests", "bytes", "rounds", "gets"}
HIGHER = ("_mbps",)


# Figures of a whole run, whatever scenarios it ran.
WHOLE_RUN = ("rows/peak_rss_mib/mediafs",)


def direction(name):
    """+1 when higher is better, -1 when lower is, 0 when the name does not say."""
    if name in LOWER_NAMES or name.endswith(LOWER):
        return -1
    if name.endswith(HIGHER):
        return 1
    return 0


def figures(doc):
    """{path: (value, direction)} of the mediafs figures of a run's JSON."""
    out = {}

    def walk(node, path, mine):
        if isinstance(node, dict):
            for key, value in node.items():
                if key == "log":
                    continue  # a request list, not a figure
                walk(value, path + (str(key),), mine or "mediafs" in str(key))
        elif isinstance(node, list):
            for i, value in enumerate(node):
                walk(value, path + (str(i),), mine)
        elif isinstance(node, (int, float)) and not isinstance(node, bool) and mine:
            # The figure's name: the last key, or the one before a tool's
            # column ("cold_seq_mbps" / "mediafs").
            names = [p for p in reversed(path) if "mediafs" not in p and not p.isdigit()]
            sense = direction(names[0]) if names else 0
            if sense == 0 and len(names) > 1:
                sense = direction(names[1])
            if sense:
                out["/".join(path)] = (float(node), sense)

    for row in doc.get("rows") or []:
        value = (row.get("values") or {}).get("mediafs")
        if isinstance(value, (int, float)) and not isinstance(value, bool) and direction(row.get("key", "")):
            out[f"rows/{row['key']}/mediafs"] = (float(value), direction(row["key"]))
    for scenario, by_tool in (doc.get("peak_rss_by_scenario") or {}).items():
        if isinstance(by_tool.get("mediafs"), (int, float)):
            out[f"peak_rss_by_scenario/{scenario}/mediafs"] = (float(by_tool["mediafs"]), -1)
    for section in ("wan", "sources", "hls", "mediaserver"):
        if doc.get(section):
            walk(doc[section], (section,), False)
    return out


def compare(base, now, tolerance=0.10):
    """(regressions, improvements, missing): each regression and improvement
    a (path, baseline value, value now, change as a fraction, worse = +)."""
    old, new = figures(base), figures(now)
    # A whole run's peak: comparable only between runs of the same scenarios.
    if base.get("scenarios") is None or base.get("scenarios") != now.get("scenarios"):
        for path in WHOLE_RUN:
            old.pop(path, None)
            new.pop(path, None)
    regressions, improvements = [], []
    for path in sorted(set(old) & set(new)):
        (b, sense), (n, _) = old[path], new[path]
        if b == 0:
            if n != 0 and sense < 0:
                regressions.append((path, b, n, float("inf")))
            continue
        worse = (n - b) / b * (-sense)
        if worse > tolerance:
            regressions.append((path, b, n, worse))
        elif worse < -tolerance:
            improvements.append((path, b, n, worse))
    missing = sorted(set(old) ^ set(new))
    return regressions, improvements, missing


def report(base, now, tolerance=0.10, out=sys.stdout):
    regressions, improvements, missing = compare(base, now, tolerance)
    if base.get("scenarios") is None or base.get("scenarios") != now.get("scenarios"):
        print(f"\nnot judged: {', '.join(WHOLE_RUN)}, a whole run's figure: the baseline ran "
              f"{', '.join(base.get('scenarios') or ['scenarios it does not list'])}, this run "
              f"{', '.join(now.get('scenarios') or ['scenarios it does not list'])}", file=out)
    print(f"\nCompared with the baseline ({base.get('time', '?')}, {base.get('build', '?')}): "
          f"{len(regressions)} regressions, {len(improvements)} improvements beyond {tolerance:.0%}, "
          f"{len(missing)} figures in one run only", file=out)
    for path, b, n, worse in regressions:
        print(f"REGRESSION {path}: {b:g} -> {n:g} ({worse:+.0%} worse)", file=out)
    for path, b, n, worse in improvements:
        print(f"improved   {path}: {b:g} -> {n:g} ({-worse:.0%} better)", file=out)
    return regressions


# What a baseline keeps of a run: its figures, not its access logs (tens
# of MB at 100,000 entries).
KEPT = ("time", "build", "elapsed_s", "binary", "file_bytes", "mp4_bytes", "mkv_bytes", "tools", "rows",
        "scenarios", "peak_rss_by_scenario", "reader_demand", "ceilings", "wan", "sources", "hls", "mediaserver",
        "notes", "errors")


def take(doc):
    """A run's JSON as a baseline: its figures, without the access logs."""
    return {k: doc[k] for k in KEPT if k in doc}


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("results", nargs="?", default="/tmp/mediafs-bench/results.json")
    p.add_argument("--baseline", default=BASELINE)
    p.add_argument("--tolerance", type=float, default=0.10)
    p.add_argument("--take", action="store_true", help="make RESULTS the baseline (its figures only)")
    args = p.parse_args()
    with open(args.results) as f:
        now = json.load(f)
    if args.take:
        with open(args.baseline, "w") as f:
            json.dump(take(now), f, indent=1)
            f.write("\n")
        print(f"{args.baseline}: the figures of {args.results} ({now.get('time')}, {now.get('build')})")
        return
    with open(args.baseline) as f:
        base = json.load(f)
    report(base, now, args.tolerance)


if __name__ == "__main__":
    main()
