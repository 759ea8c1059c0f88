"""The bench's WAN scenarios: the rows of issue 12 (probe, first frames, seek,
sequential, first 4 KiB) behind bench/linkem.py at a few (RTT, rate) links, for
the local file, the player's own HTTP, rclone and mediafs, cold then replayed.

Registered in bench/scenarios.py (`--only wan`); uses bench/rig.py's nginx,
mounts and drop_caches.
"""
import os
import shutil
import subprocess
import sys
import time

import rig

LINKS = ((40, 200), (100, 50))   # (RTT ms, downstream Mbit/s)
QUICK_LINKS = ((100, 50),)
TOOLS = ("local", "direct", "rclone", "mediafs")
PHASES = ("cold", "replay")
# Every cell is the median of this many runs. A replay reads from a disk,
# in 1-30 ms: one sample of it is mostly noise (the local file's own two
# reads differed by a quarter). ffprobe and ffmpeg end on 50 ms steps here
# (the local file: 0.32, 0.37, 0.42 s), so one cold sample of a row moved
# its ratio by a seventh. Each cold run of a mount gets a fresh cache; the
# replays use the last one.
RUNS = 3
SEQ_BYTES = 32 * rig.MiB
HEAD_BYTES = 4096
LINKEM = os.path.join(os.path.dirname(os.path.abspath(__file__)), "linkem.py")
MEDIA_ROWS = ("ffprobe_mp4", "ffprobe_mkv", "first3s", "seek_mp4", "seek_mkv")


def ffprobe(f):
    return ["ffprobe", "-v", "error", "-show_format", "-show_streams", f]


def first3s(f):
    return ["ffmpeg", "-nostdin", "-v", "error", "-i", f, "-t", "3", "-f", "null", "-"]


def seek(f):
    return ["ffmpeg", "-nostdin", "-v", "error", "-ss", "90", "-i", f, "-t", "1", "-f", "null", "-"]


def secs(x):
    return f"{x:.2f}" if x >= 0.1 else f"{x:.3f}"


def ensure_seq_file():
    path = os.path.join(rig.DATA, "random-32MiB.bin")
    if not (os.path.exists(path) and os.path.getsize(path) == SEQ_BYTES):
        tmp = path + ".tmp"
        with open(tmp, "wb") as f:
            f.write(os.urandom(SEQ_BYTES))
        os.rename(tmp, path)
    return path


def run(b):
    b.parts["wan"] = WanBench(b, quick=b.args.wan_quick)
    b.parts["wan"].run()


class LinkEmulator:
    """bench/linkem.py in front of nginx; stopped by its pid, and by itself if
    the bench dies (it exits when its stdin closes, or after an hour)."""

    def __init__(self, upstream_port, rtt_ms, mbit, scheme="http"):
        self.scheme = scheme
        self.argv = [sys.executable, LINKEM, "--upstream", f"127.0.0.1:{upstream_port}",
                     "--delay-ms", str(rtt_ms / 2), "--rate-mbit", str(mbit), "--lifetime", "3600",
                     "--stdin-watch"]

    def __enter__(self):
        self.proc = subprocess.Popen(self.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()
        if not line.strip().isdigit():
            self.__exit__()
            raise RuntimeError(f"linkem did not start (rc={self.proc.poll()})")
        self.port = int(line)
        return self

    def base(self):
        return f"{self.scheme}://127.0.0.1:{self.port}/"

    def __exit__(self, *exc):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return False


class WanBench:
    def __init__(self, bench, quick=False):
        self.b = bench
        self.links = QUICK_LINKS if quick else LINKS
        self.results = {}   # "RTT/rate" -> row -> tool -> phase -> {"s", "requests", "bytes"}
        self.limits = {}    # "RTT/rate" -> {"measured_s", "expected_s"}
        self.fuse_floor = {}  # "RTT/rate" -> [s]: head4k again on the replay mount, page cache warm
        self.rtt_s = {}       # "RTT/rate" -> the link's round trip in seconds

    def rows(self):
        b = self.b
        return [
            ("ffprobe_mp4", "ffprobe mp4 (moov at the end)", b.mp4, ffprobe),
            ("ffprobe_mkv", "ffprobe mkv", b.mkv, ffprobe),
            ("first3s", "decode the first 3 s (mp4)", b.mp4, first3s),
            ("seek_mp4", "seek to 90 s, decode 1 s (mp4)", b.mp4, seek),
            ("seek_mkv", "seek to 90 s, decode 1 s (mkv)", b.mkv, seek),
            ("seq32", "sequential 32 MiB", self.seq_file, "seq"),
            ("head4k", "first 4 KiB", self.seq_file, "head"),
        ]

    @staticmethod
    def act(how, target):
        """Run one row's reader on a path or URL; returns wall seconds."""
        url = target.startswith("http://")
        t0 = time.perf_counter()
        if how == "seq":
            if url:
                rig.run_waited(["curl", "-sf", "-o", "/dev/null", target])
            else:
                n, _ = rig.read_local(target)
                if n != SEQ_BYTES:
                    raise RuntimeError(f"read {n} bytes of {target}, expected {SEQ_BYTES}")
        elif how == "head":
            if url:
                rig.run_waited(["curl", "-sf", "-r", f"0-{HEAD_BYTES - 1}", "-o", "/dev/null", target])
            else:
                with open(target, "rb", buffering=0) as f:
                    if len(f.read(HEAD_BYTES)) != HEAD_BYTES:
                        raise RuntimeError(f"short read of {target}")
        else:
            rig.run_waited(how(target), stdout=subprocess.DEVNULL)
        return time.perf_counter() - t0

    def put(self, link, row, tool, phase, seconds, entries):
        cell = {"s": seconds}
        if entries is not None:
            cell["requests"] = len(entries)
            cell["bytes"] = sum(e.get("bytes", 0) for e in entries)
            cell["log"] = entries
        self.results.setdefault(link, {}).setdefault(row, {}).setdefault(tool, {})[phase] = cell

    def run(self):
        b = self.b
        self.seq_file = ensure_seq_file()
        for rtt, mbit in self.links:
            link = f"{rtt} ms / {mbit} Mbit/s"
            self.rtt_s[link] = rtt / 1000
            rig.log(f"wan: link {link}")
            settle = 0.3 + rtt / 1000
            with LinkEmulator(b.nginx.port, rtt, mbit) as em:
                for key, label, src, how in self.rows():
                    name = os.path.basename(src)
                    for tool in TOOLS:
                        if tool == "rclone" and "rclone" not in b.tools:
                            continue
                        b.guarded(f"wan {link} {key}", tool,
                                  lambda: self.one(link, key, src, name, how, tool, em, settle))
                direct = self.results.get(link, {}).get("seq32", {}).get("direct", {}).get("cold")
                if direct:
                    self.limits[link] = {"measured_s": direct["s"],
                                         "expected_s": SEQ_BYTES / (mbit * 1e6 / 8) + 2 * rtt / 1000}

    def one(self, link, key, src, name, how, tool, em, settle):
        b = self.b
        cache = None
        for phase in PHASES:
            runs = []
            for _ in range(RUNS):
                if tool == "local":
                    rig.drop_caches()
                    runs.append((self.act(how, src), None))
                    continue
                rig.drop_caches()
                b.warm_source(src)
                m = b.nginx.mark()
                if tool == "direct":
                    dt = self.act(how, em.base() + name)
                    runs.append((dt, b.nginx.since(m, settle=settle)))
                    continue
                if phase == "cold":
                    if cache:
                        shutil.rmtree(cache, ignore_errors=True)
                    cache = b.fresh_dir(f"cache-wan-{tool}")
                # Replay: the last cold run's cache directory, a new mount, no page cache.
                with b.mount(tool, [src], cache, f"wan-{key}-{phase}", base=em.base()) as mnt:
                    dt = self.act(how, os.path.join(mnt.mp, name))
                    if how == "head" and phase == "replay" and tool == "mediafs":
                        # Again, all in memory: what FUSE's round trips alone cost.
                        self.fuse_floor.setdefault(link, []).append(self.act(how, os.path.join(mnt.mp, name)))
                runs.append((dt, b.nginx.since(m, settle=settle)))
            # The median run, with its requests.
            dt, entries = sorted(runs, key=lambda run: run[0])[len(runs) // 2]
            self.put(link, key, tool, phase, dt, entries)
        if cache:
            shutil.rmtree(cache, ignore_errors=True)

    # -- report
    def cell(self, link, row, tool):
        c = self.results.get(link, {}).get(row, {}).get(tool, {})
        parts = []
        for phase in PHASES:
            x = c.get(phase)
            if x is None:
                parts.append("ERROR" if tool in self.b.results.get(f"error:wan {link} {row}", {}) else "-")
            elif "requests" in x:
                parts.append(f"{secs(x['s'])} ({x['requests']})")
            else:
                parts.append(secs(x["s"]))
        return " / ".join(parts)

    def seconds(self, link, row, tool, phase):
        return self.results.get(link, {}).get(row, {}).get(tool, {}).get(phase, {}).get("s")

    def best_peer(self, link, row, phase):
        xs = [self.seconds(link, row, t, phase) for t in ("direct", "rclone")]
        xs = [x for x in xs if x is not None]
        return min(xs) if xs else None

    def report(self):
        if not self.results:
            return
        print()
        print("WAN (bench/linkem.py in front of nginx): seconds (requests at nginx), cold / replayed.")
        print("cold = fresh cache, page cache dropped; replayed = page cache dropped, disk cache kept (remount).")
        print("direct = ffprobe/ffmpeg/curl on the URL through the link; ratio = mediafs ÷ best of direct and rclone.")
        tools = [t for t in TOOLS if t != "rclone" or "rclone" in self.b.tools]
        for link in self.results:
            headers = ["row"] + tools + ["mediafs ÷ best"]
            table = []
            for key, label, _, _ in self.rows():
                cells = [label] + [self.cell(link, key, t) for t in tools]
                ratios = []
                for phase in PHASES:
                    m, best = self.seconds(link, key, "mediafs", phase), self.best_peer(link, key, phase)
                    ratios.append(f"{m / best:.2f}" if m is not None and best else "-")
                table.append(cells + [" / ".join(ratios)])
            widths = [max(len(r[i]) for r in table + [headers]) for i in range(len(headers))]
            line = lambda cells: " | ".join(c.ljust(w) for c, w in zip(cells, widths))
            print()
            print(f"link {link}")
            print(line(headers))
            print("-+-".join("-" * w for w in widths))
            for cells in table:
                print(line(cells))
            self.report_goals(link)

    def report_goals(self, link):
        lim = self.limits.get(link)
        if lim:
            print(f"  limits: curl of 32 MiB through the link {lim['measured_s']:.2f} s; expected "
                  f"size/rate + 2 RTT (setup + request) = {lim['expected_s']:.2f} s "
                  f"({lim['measured_s'] / lim['expected_s']:.2f}×)")
        m = [self.seconds(link, r, "mediafs", "cold") for r in MEDIA_ROWS]
        best = [self.best_peer(link, r, "cold") for r in MEDIA_ROWS]
        if None not in m and None not in best:
            ratio = sum(m) / sum(best)
            worst = max((x / y, r) for x, y, r in zip(m, best, MEDIA_ROWS))
            print(f"  goal: five media rows cold {sum(m):.2f} s vs {sum(best):.2f} s (sum of each row's best peer) "
                  f"= {ratio:.2f}× (≤0.80) {'PASS' if ratio <= 0.80 else 'MISS'}; slowest row vs its best: "
                  f"{worst[1]} {worst[0]:.2f}× (≤1.00) {'PASS' if worst[0] <= 1.0 else 'MISS'}")
        mkv, rclone = self.seconds(link, "ffprobe_mkv", "mediafs", "cold"), self.seconds(link, "ffprobe_mkv", "rclone", "cold")
        if mkv and rclone:
            print(f"  goal: ffprobe mkv cold ≤ ½ rclone's: {mkv:.2f} s vs {rclone:.2f} s = {mkv / rclone:.2f}× "
                  f"{'PASS' if mkv <= rclone / 2 else 'MISS'}")
        local, rtt = self.seconds(link, "ffprobe_mkv", "local", "cold"), self.rtt_s.get(link)
        if local and rtt and rclone:
            # Any client of a cold link connects (1 RTT) and asks (1 RTT) before its first
            # byte; ffprobe's own start (its libraries read from a dropped page cache) is
            # in every tool's time. Bytes' time on the link is left out: a lower bound.
            floor = local + 2 * rtt
            print(f"  limits: ffprobe mkv cold floor: the local file's cold run {local:.2f} s + connection setup and "
                  f"one request (2 RTT) {2 * rtt:.2f} s = {floor:.2f} s; half of rclone's is {rclone / 2:.2f} s"
                  + (": below this floor" if rclone / 2 < floor else ""))
        ms, cs = self.seconds(link, "seq32", "mediafs", "cold"), self.seconds(link, "seq32", "direct", "cold")
        if ms and cs:
            print(f"  goal: sequential 32 MiB cold, mediafs ÷ curl = {ms / cs:.2f} (≤1.05) "
                  f"{'PASS' if ms <= 1.05 * cs else 'MISS'}")
        rep = [(self.seconds(link, r, "mediafs", "replay"), self.seconds(link, r, "local", "replay"), r)
               for r, *_ in self.rows()]
        rep = [(x / y, r) for x, y, r in rep if x is not None and y]
        if rep:
            worst = max(rep)
            print(f"  goal: replay within 10% of the local file; worst row {worst[1]} {worst[0]:.2f}× "
                  f"{'PASS' if worst[0] <= 1.10 else 'MISS'}")
        floor, local = self.fuse_floor.get(link), self.seconds(link, "head4k", "local", "replay")
        if floor and local:
            floor = sorted(floor)[len(floor) // 2]
            print(f"  limits: first 4 KiB through the mount again, page cache warm (FUSE's lookup, open, "
                  f"flush and release; no disk) {floor * 1e3:.3f} ms = {floor / local:.2f}× of the local "
                  f"file's cold {local * 1e3:.3f} ms; 10% of it is {local * 0.1e3:.3f} ms"
                  + (": head4k's 10% is below what any FUSE mount adds" if floor > 0.1 * local else ""))

    def json(self):
        return {"links": self.results, "limits": self.limits, "fuse_floor_s": self.fuse_floor}
