#!/usr/bin/env python3
"""mediafs benchmark: mediafs vs curl vs rclone against a local nginx.

Run as root (drop_caches, FUSE mounts):  python3 bench/run.py [--only S] [--skip-rclone] [--size-mib N]

Everything printed is measured in this run; nothing is hard-coded except the
goals. See bench/README.md for what each scenario measures and why.
Python 3 standard library only.
"""
# This file parses the command line, runs the scenarios bench/scenarios.py
# registers (each in its own module) with the harness of bench/rig.py, and
# reports; no module imports it.
import argparse
import json
import os
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import baseline  # noqa: E402
import media  # noqa: E402
import randomreads  # noqa: E402
import scenarios  # noqa: E402
from rig import (DATA, MiB, REPO, RESULTS, TOOLS, WORK, Bench, Nginx, ensure_data, fuse_unmount,  # noqa: E402
                 human, is_mounted, log)

SCENARIOS = scenarios.NAMES


class Runner(Bench):
    """The run: the checks, nginx, every scenario asked for (in the order
    bench/scenarios.py lists them), then the report and the JSON."""

    # -- run + report
    def run(self):
        if os.geteuid() != 0:
            sys.exit("bench/run.py needs root (drop_caches, FUSE mounts)")
        if not os.access(self.binary, os.X_OK):
            sys.exit(f"mediafs binary not found at {self.binary}: run `swift build -c release` first")
        for tool in ("nginx", "curl", "ffmpeg", "ffprobe", "fusermount3"):
            if shutil.which(tool) is None:
                sys.exit(f"{tool} not found")
        for tool in TOOLS:
            mp = self.mountpoint(tool)
            if os.path.isdir(mp) and is_mounted(mp):
                fuse_unmount(mp, lazy=True)
        shutil.rmtree(WORK, ignore_errors=True)
        os.makedirs(WORK)
        self.big, self.mp4, self.mkv = ensure_data(self.args.size_mib)
        only = set(self.args.only.split(",")) if self.args.only else set(SCENARIOS)
        self.ran = only
        unknown = only - set(SCENARIOS)
        if unknown:
            sys.exit(f"unknown scenario(s) {sorted(unknown)}; choose from {', '.join(SCENARIOS)}")
        self.nginx = Nginx(DATA, WORK)
        started = time.time()
        try:
            self.nginx.start()
            log(f"nginx on 127.0.0.1:{self.nginx.port}, tools: {', '.join(self.tools)}")
            for name in SCENARIOS:
                if name in only:
                    log(f"scenario {name}")
                    self.scenario = name
                    scenarios.run(name, self)
        finally:
            self.nginx.stop()
        media.reader_demand(self, only)
        for tool in ("mediafs", "rclone"):
            hw = [s["vm_hwm_kib"] for s in self.rss_samples if s["tool"] == tool]
            if hw:
                self.put("peak_rss_mib", tool, max(hw) / 1024)
        self.report(time.time() - started)

    def rows(self):
        r = self.results
        def v(key, tool):
            return r.get(key, {}).get(tool)

        def ge(x, goal):
            return None if x is None else x >= goal

        def le(x, goal):
            return None if x is None else x <= goal

        curl_seq = v("cold_seq_mbps", "curl")
        rows = [
            ("1 cold seq read MB/s", "cold_seq_mbps", "{:.0f}", "curl",
             "≥0.8× curl", lambda x: None if x is None or curl_seq is None else x >= 0.8 * curl_seq),
            ("1 cold seq server bytes ÷ file", "cold_seq_server_ratio", "{:.3f}", "curl", "≤1.02",
             lambda x: le(x, 1.02)),
            ("2 warm same mount MB/s", "warm_same_mbps", "{:.0f}", "local page cache", "≥5000 (5 GB/s)",
             lambda x: ge(x, 5000)),
            ("2 warm remount, caches dropped MB/s", "warm_remount_mbps", "{:.0f}", "local disk, dropped",
             "≥2000 (2 GB/s)", lambda x: ge(x, 2000)),
            ("3 random 4K p50 ms", "random_p50_ms", "{:.3f}", "http.client keep-alive", "≤1 ms",
             lambda x: le(x, 1.0)),
            ("3 random 4K p99 ms", "random_p99_ms", "{:.3f}", "http.client keep-alive", "(info)", None),
            ("3 random 4K server bytes ÷ read", "random_server_ratio", "{:.2f}", "http.client keep-alive",
             "≤4", lambda x: le(x, 4)),
            ("4 ffprobe mp4 cold s", "ffprobe_mp4_s", "{:.3f}", "ffprobe over http", "(info)", None),
            ("4 ffprobe mp4 cold server bytes", "ffprobe_mp4_bytes", "B", "ffprobe over http", "≤1 MiB",
             lambda x: le(x, MiB)),
            ("4 ffprobe mkv cold s", "ffprobe_mkv_s", "{:.3f}", "ffprobe over http", "(info)", None),
            ("4 ffprobe mkv cold server bytes", "ffprobe_mkv_bytes", "B", "ffprobe over http", "≤1 MiB",
             lambda x: le(x, MiB)),
            ("5 seek 90s + 1s decode mp4 s", "seek_mp4_s", "{:.3f}", "ffmpeg over http", "(info)", None),
            ("5 seek 90s + 1s decode server bytes", "seek_mp4_bytes", "B", "ffmpeg over http", "≤4 MiB",
             lambda x: le(x, 4 * MiB)),
            ("5 seek 90s + 1s decode mkv s", "seek_mkv_s", "{:.3f}", "ffmpeg over http", "(info)", None),
            ("5 seek mkv server bytes", "seek_mkv_bytes", "B", "ffmpeg over http", "≤4 MiB",
             lambda x: le(x, 4 * MiB)),
            ("6 peak RSS MiB (VmHWM)", "peak_rss_mib", "{:.1f}", "-", "≤100 MiB", lambda x: le(x, 100)),
            ("7 --bwlimit 8M cold 32 MiB, MiB/s", "bwlimit_8m_mibps", "{:.2f}", "-", "8 ±10%",
             lambda x: None if x is None else 7.2 <= x <= 8.8),
        ]
        for n in self.scale_entries:
            rclone_time = v(f"scale_listing_{n}_mount_ls_s", "rclone")
            rows += [
                (f"8 list {n}: RSS MiB after ls -l", f"scale_list_{n}_rss_mib", "{:.1f}", "-",
                 "≤128 MiB (goal 100)" if n >= 100_000 else "(info)",
                 (lambda x: le(x, 128)) if n >= 100_000 else None),
                (f"8 list {n}: mount + cold ls -l s", f"scale_list_{n}_mount_ls_s", "{:.2f}",
                 "curl --parallel HEAD of each entry", "(info)", None),
                (f"8 list {n}: requests of ls -l after remount", f"scale_list_{n}_remount_requests", "{}", "-",
                 "0", lambda x: x == 0),
                # nginx's index gives each file's length: no HEAD per entry (rclone sends one).
                (f"8 listing {n}: mount + cold ls -l s", f"scale_listing_{n}_mount_ls_s", "{:.2f}", "-",
                 "≤ ½ rclone",
                 lambda x, r=rclone_time: None if x is None or r is None else x <= r / 2),
                (f"8 listing {n}: RSS MiB after ls -l", f"scale_listing_{n}_rss_mib", "{:.1f}", "-", "(info)", None),
                (f"8 listing {n}: requests of ls -l after remount", f"scale_listing_{n}_remount_requests", "{}",
                 "-", "≤1 (the listing)", lambda x: x <= 1),
            ]
        out = []
        for label, key, fmt, curl_label, goal, check in rows:
            vals = {t: v(key, t) for t in TOOLS}
            m, c = vals["mediafs"], vals["curl"]
            ratio = m / c if isinstance(m, (int, float)) and isinstance(c, (int, float)) and c else None
            if check is None:
                status = "-"
            elif m is None:
                status = "ERROR" if self.failed_for(key, "mediafs") else "n/a"
            else:
                status = "PASS" if check(m) else "MISS"
            out.append({"label": label, "key": key, "fmt": fmt, "curl_reference": curl_label,
                        "goal": goal, "status": status, "values": vals, "ratio_mediafs_curl": ratio})
        return out

    def peaks_by_scenario(self):
        """{scenario: {tool: peak RSS MiB}} of the mounts each scenario made."""
        peaks = {}
        for sample in self.rss_samples:
            by_tool = peaks.setdefault(sample.get("scenario") or "?", {})
            mib = sample["vm_hwm_kib"] / 1024
            by_tool[sample["tool"]] = max(by_tool.get(sample["tool"], 0), mib)
        return peaks

    def build_info(self):
        """Which build was measured: repo HEAD (+dirty) and the binary's mtime."""
        try:
            head = subprocess.run(["git", "-C", REPO, "describe", "--always", "--dirty"],
                                  capture_output=True, text=True, timeout=10).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            head = "?"
        mtime = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(os.path.getmtime(self.binary)))
        return f"{self.binary} (built {mtime}, tree {head or '?'})"

    def fmt(self, x, fmt):
        if x is None:
            return "-"
        if fmt == "B":
            return human(x)
        return fmt.format(x)

    def part_json(self, name):
        """The JSON of a scenario that keeps figures of its own; None when it did not run."""
        part = self.parts.get(name)
        return part.json() if part else None

    def report_ceilings(self):
        c, r = self.ceilings, self.results
        if not c:
            return
        def ratio(key, ref):
            m = r.get(key, {}).get("mediafs")
            return f"; mediafs = {m / ref:.2f}× of it" if m and ref else ""
        print()
        print("this machine's limits, measured in this run:")
        if "store_mbps" in c:
            print(f"  download and store (`curl -o FILE` on the cache's filesystem): {c['store_mbps']:.0f} MB/s"
                  + ratio("cold_seq_mbps", c["store_mbps"]))
        if "disk_direct_mbps" in c:
            d = c["disk_direct_mbps"]
            print(f"  disk, O_DIRECT 1 MiB reads × 4 in flight, caches dropped: {d:.0f} MB/s"
                  + ratio("warm_remount_mbps", d)
                  + ("; the 2 GB/s remount goal is above this disk" if d < 2000 else ""))
        for n in self.scale_entries:
            heads = c.get(f"scale_heads_{n}_s")
            if heads is None:
                continue
            print(f"  HEAD of each of {n} list-file entries (curl --parallel, 6 connections, nothing else): "
                  f"{heads:.2f} s" + ratio(f"scale_list_{n}_mount_ls_s", heads))
        if "warm_same_second_mbps" in c:
            print(f"  warm same mount, second re-read (no first-read costs; see bench/README.md): "
                  f"{c['warm_same_second_mbps']:.0f} MB/s")

    def report(self, elapsed):
        rows = self.rows()
        size = os.path.getsize(self.big)
        headers = ["scenario", "mediafs", "curl", "rclone", "mediafs/curl", "goal (mediafs)", "result"]
        table = []
        for row in rows:
            if all(x is None for x in row["values"].values()) and row["status"] in ("n/a", "-"):
                continue  # scenario not selected (--only)
            cells = [row["label"]]
            for t in TOOLS:
                val = row["values"][t]
                if val is None and self.failed_for(row["key"], t):
                    cells.append("ERROR")
                elif t == "rclone" and "rclone" not in self.tools:
                    cells.append("skipped")
                else:
                    cells.append(self.fmt(val, row["fmt"]))
            cells.append("-" if row["ratio_mediafs_curl"] is None else f"{row['ratio_mediafs_curl']:.2f}")
            cells += [row["goal"], row["status"]]
            table.append(cells)
        widths = [max(len(str(r[i])) for r in table + [headers]) for i in range(len(headers))]
        line = lambda cells: " | ".join(str(c).ljust(w) for c, w in zip(cells, widths))
        print()
        print(f"mediafs bench — file {human(size)}, mp4 {human(os.path.getsize(self.mp4))}, "
              f"mkv {human(os.path.getsize(self.mkv))}; MB = 10^6 bytes; took {elapsed:.0f} s")
        print(f"binary: {self.build_info()}")
        if table:
            print(line(headers))
            print("-+-".join("-" * w for w in widths))
            for cells in table:
                print(line(cells))
            print()
            print("curl column: rows 1 = `curl -o /dev/null`; 2 = the source file read locally "
                  "(page cache / after drop_caches); 3 = Python http.client keep-alive Range GETs; "
                  "4-5 = ffprobe/ffmpeg reading the http:// URL directly.")
        self.report_ceilings()
        for part in self.parts.values():
            part.report()
        print()
        print("server side (nginx access log) per scenario:")
        for key, s in self.server.items():
            kinds = ", ".join(f"{k}×{n}" for k, n in sorted(s["by_kind"].items()))
            gets = ""
            if s["get_bytes_median"] is not None:
                gets = (f"; GET body min/median/max {human(s['get_bytes_min'])}/"
                        f"{human(s['get_bytes_median'])}/{human(s['get_bytes_max'])}")
            print(f"  {key:<22} {s['requests']:>4} req on {s['connections']} conn, {human(s['bytes'])} "
                  f"[{kinds}]{gets}")
        if self.demand:
            print()
            print("reader demand (local files, no server; strace -y sums read() returns):")
            for key in ("ffprobe_mp4_app_read", "ffprobe_mkv_app_read", "seek_mp4_app_read", "seek_mkv_app_read"):
                if key in self.demand:
                    print(f"  {key:<22} {human(self.demand[key]) if self.demand[key] is not None else 'strace missing'}")
            for kind in ("mp4", "mkv"):
                fl = self.demand.get(f"seek_{kind}_floor")
                if not fl:
                    continue
                print(f"  seek_{kind} floor         {human(fl['bytes'])}: keyframe at {fl['keyframe_before_seek_s']:.2f} s "
                      f"(max keyframe interval {fl['keyframe_interval_s']:.2f} s), packets "
                      f"{fl['span_start']}-{fl['span_end']} + {human(fl['non_mdat_bytes'])} of container")
                got = self.results.get(f"seek_{kind}_bytes", {}).get("mediafs")
                if got is not None:
                    print(f"    mediafs fetched {human(got)}: floor + {human(got - fl['bytes'])} "
                          f"(issue 12 goal: ≤ floor + 1 MiB) {'PASS' if got <= fl['bytes'] + MiB else 'MISS'}")
                if fl["bytes"] > 4 * MiB:
                    print("  note: with this file no reader can meet the ≤4 MiB seek goal (GOP too long)")
        if self.args.requests:
            print()
            print(f"requests (first {self.args.requests} per scenario; all of them are in the JSON):")
            for key, s in self.server.items():
                if key.split("/")[1] not in ("mediafs", "rclone") and not key.startswith("seek_"):
                    continue
                print(f"  {key}:")
                for e in s["log"][:self.args.requests]:
                    if "raw" in e:
                        print(f"    {e['raw']}")
                    else:
                        print(f"    {e['method']:<4} {e['uri']:<22} {e['range'] or '-':<28} {e['status']} "
                              f"{e['bytes']:>11} B  conn {e['conn']}  {e['rtime']:.3f} s")
                if len(s["log"]) > self.args.requests:
                    print(f"    … {len(s['log']) - self.args.requests} more")
        for note in self.notes:
            print("note: " + note)
        for err in self.errors:
            print("ERROR: " + err)
        passed = sum(r["status"] == "PASS" for r in rows)
        judged = sum(r["status"] in ("PASS", "MISS", "ERROR") for r in rows)
        print(f"\n{passed}/{judged} goals met. JSON: {RESULTS}; logs: {WORK}")
        doc = {
            "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "build": self.build_info(),
            "elapsed_s": elapsed,
            "binary": self.binary,
            "file_bytes": size,
            "mp4_bytes": os.path.getsize(self.mp4),
            "mkv_bytes": os.path.getsize(self.mkv),
            "tools": self.tools,
            "rows": [{k: r[k] for k in ("label", "key", "curl_reference", "goal", "status", "values",
                                         "ratio_mediafs_curl")} for r in rows],
            "server": self.server,
            "rss_samples": self.rss_samples,
            # Which scenarios ran, and each one's peak: the whole run's peak
            # (row 6) is only comparable with a run of the same scenarios.
            "scenarios": [name for name in SCENARIOS if name in self.ran],
            "peak_rss_by_scenario": self.peaks_by_scenario(),
            "random_offsets": randomreads.random_offsets(size),
            "reader_demand": self.demand,
            "ceilings": self.ceilings,
            "wan": self.part_json("wan"),
            "sources": self.part_json("sources"),
            "hls": self.part_json("hls"),
            "mediaserver": self.part_json("mediaserver"),
            "background": self.part_json("background"),
            "archives": self.part_json("archives"),
            "notes": self.notes,
            "errors": self.errors,
        }
        with open(RESULTS, "w") as f:
            json.dump(doc, f, indent=1)
        # Row by row against the committed baseline: a figure 10% worse is a
        # REGRESSION line (bench/baseline.py says which figures, and why
        # a time's is a reason to measure again).
        if os.path.exists(baseline.BASELINE):
            with open(baseline.BASELINE) as f:
                baseline.report(json.load(f), doc)
        else:
            print(f"\nno {baseline.BASELINE}: nothing to compare with")



def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--only", help=f"comma-separated subset of: {', '.join(SCENARIOS)}")
    p.add_argument("--wan-quick", action="store_true",
                   help="WAN scenarios at 100 ms / 50 Mbit/s only (default: also 40 ms / 200 Mbit/s)")
    p.add_argument("--wan-models", default="paced,slowstart", metavar="M,M",
                   help="WAN scenarios: link models, of paced (delay + shared rate) and slowstart (the same + "
                        "TCP's window per connection) (default: both)")
    p.add_argument("--mediaserver-quick", action="store_true",
                   help="media-server scenario: mediafs alone, with the scan and with read classes off only "
                        "(default: also the frame extraction named as a scanner, and rclone alone and with the scan)")
    p.add_argument("--hls-transports", default="http,h2", metavar="T,T",
                   help="HLS scenario: transports to measure, of http (HTTP/1.1) and h2 (https, HTTP/2) "
                        "(default: both)")
    p.add_argument("--skip-rclone", action="store_true", help="do not run the rclone column")
    p.add_argument("--size-mib", type=int, default=1024, help="size of the random file (default 1024)")
    p.add_argument("--scale-entries", default="10000,100000", metavar="N,N",
                   help="entry counts of the scale scenario (default 10000,100000)")
    p.add_argument("--requests", type=int, default=0, metavar="N",
                   help="also print the first N access-log lines of each mediafs/rclone scenario")
    args = p.parse_args()
    if args.size_mib < 1:
        p.error("--size-mib must be ≥ 1")
    if not args.wan_models or set(args.wan_models.split(",")) - {"paced", "slowstart"}:
        p.error("--wan-models takes paced, slowstart or both")
    if not args.hls_transports or set(args.hls_transports.split(",")) - {"http", "h2"}:
        p.error("--hls-transports takes http, h2 or both")
    Runner(args).run()


if __name__ == "__main__":
    main()
