#!/usr/bin/env python3
"""Two mediafs binaries side by side in one run: each scenario runs with the
baseline and then with the candidate, against the same nginx and data, so
both see the same machine at about the same time. Prints every figure of
both, and candidate/baseline.

Run as root:  python3 bench/compare.py BASELINE CANDIDATE [--only seq,random,wan,scale] [run.py options]

A refactor is "within noise" when the ratios stay near 1; run it twice to
see how far the noise itself reaches on this machine.
"""
import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import baseline  # noqa: E402
import rig  # noqa: E402
import scenarios  # noqa: E402

# The scenarios it can run, of those bench/scenarios.py registers.
CHOICES = ("seq", "random", "ffprobe", "seek", "wan", "scale")

# Figures where less is better (times, bytes, requests, memory).
LOWER_IS_BETTER = ("_s", "_ms", "_ratio", "_rss_mib", "_requests", "_bytes", "_kib", "/s", "/requests", "/bytes")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("baseline")
    p.add_argument("candidate")
    p.add_argument("--only", default="seq,random,ffprobe,wan,scale")
    p.add_argument("--wan-quick", action="store_true")
    p.add_argument("--wan-models", default="paced,slowstart", metavar="M,M")
    p.add_argument("--size-mib", type=int, default=1024)
    p.add_argument("--scale-entries", default="10000,100000")
    args = p.parse_args()
    args.skip_rclone = True
    args.requests = 0
    for binary in (args.baseline, args.candidate):
        if not os.access(binary, os.X_OK):
            sys.exit(f"{binary}: not an executable")
    bench = rig.Bench(args)
    bench.tools = ["mediafs"]
    os.makedirs(rig.WORK, exist_ok=True)
    bench.big, bench.mp4, bench.mkv = rig.ensure_data(args.size_mib)
    only = args.only.split(",")
    unknown = set(only) - set(CHOICES)
    if unknown:
        sys.exit(f"unknown scenario(s) {sorted(unknown)}; choose from {', '.join(CHOICES)}")
    results = {"baseline": {}, "candidate": {}}
    bench.nginx = rig.Nginx(rig.DATA, rig.WORK)
    started = time.time()
    try:
        bench.nginx.start()
        for name in only:
            for label, binary in (("baseline", args.baseline), ("candidate", args.candidate)):
                rig.log(f"scenario {name}: {label} {binary}")
                bench.binary = binary
                bench.results = {}
                bench.parts = {}
                scenarios.run(name, bench)
                for key, by_tool in bench.results.items():
                    if "mediafs" in by_tool:
                        results[label][key] = by_tool["mediafs"]
                # Scenarios that keep figures of their own (the WAN cells):
                # mediafs's, named as bench/baseline.py names them.
                for part, made in bench.parts.items():
                    for path, (value, _) in baseline.figures({part: made.json()}).items():
                        results[label][path] = value
    finally:
        bench.nginx.stop()
    print(f"\nmediafs side by side, {time.time() - started:.0f} s")
    print(f"baseline  {args.baseline}\ncandidate {args.candidate}\n")
    width = max([44] + [len(k) for k in set(results["baseline"]) | set(results["candidate"])])
    print(f"{'figure':{width}} {'baseline':>12} {'candidate':>12} {'cand/base':>10}")
    for key in sorted(set(results["baseline"]) | set(results["candidate"])):
        b, c = results["baseline"].get(key), results["candidate"].get(key)
        def fmt(x):
            return f"{x:12.3f}" if isinstance(x, (int, float)) else f"{str(x)[:12]:>12}"
        ratio = f"{c / b:10.3f}" if isinstance(b, (int, float)) and isinstance(c, (int, float)) and b else f"{'':10}"
        better = " (lower is better)" if key.endswith(LOWER_IS_BETTER) else ""
        print(f"{key:{width}} {fmt(b)} {fmt(c)} {ratio}{better}")


if __name__ == "__main__":
    main()
