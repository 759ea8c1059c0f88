"""The bench's WAN scenarios: the rows of issue 12 (probe, first frames, seek,
sequential, first 4 KiB) behind bench/linkem.py at a few (RTT, rate) links, for
the local file, the player's own HTTP, rclone and mediafs, cold then replayed.

Registered in bench/scenarios.py (`--only wan`); uses bench/rig.py's nginx,
mounts and drop_caches.
"""
import os
import shutil
import signal
import subprocess
import sys
import time

import linkem
import rig

LINKS = ((40, 200), (100, 50))   # (RTT ms, downstream Mbit/s)
QUICK_LINKS = ((100, 50),)
# The link models (bench/linkem.py): name -> (label suffix, emulator options).
# "paced" is a fixed delay and one shared rate; "slowstart" adds TCP's
# congestion window per connection (10 segments, doubling each round trip,
# back to 10 after an idle RTO), which charges a design for each fresh
# connection it opens. The paced rows keep their old keys ("100 ms /
# 50 Mbit/s"), so the baseline still compares them.
MODELS = {"paced": ("", ()), "slowstart": (", slow start", ("--slow-start",))}
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
# Every tool reads the scenario's files from this folder of the data dir,
# which holds them alone (symlinks): rclone's http remote lists the folder
# it is pointed at and sends a HEAD for each entry, and the data dir's root
# holds two dozen other files.
WAN_DIR = "wan"
SLOW_START_LIMIT = " + a round trip per window below the link's bytes per round trip (those bytes not at rate)"
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


def expected_seq_s(rtt, rate, model):
    """What one fresh connection needs for SEQ_BYTES: setup and request (2
    RTT), then, under slow start, a round trip a window while the window
    (10 segments, doubling) is below the link's bytes per round trip, then
    the rest at the link's rate."""
    t, left, window = 2 * rtt, SEQ_BYTES, linkem.INIT_WINDOW
    while model == "slowstart" and window < rate * rtt and left > window:
        t, left, window = t + rtt, left - window, 2 * window
    return t + left / rate


def ensure_wan_dir(files):
    """DATA/wan holding symlinks to `files` and nothing else; returns its name."""
    d = os.path.join(rig.DATA, WAN_DIR)
    os.makedirs(d, exist_ok=True)
    want = {os.path.basename(f): os.path.relpath(f, d) for f in files}
    for name in os.listdir(d):
        if name not in want:
            os.unlink(os.path.join(d, name))
    for name, target in want.items():
        path = os.path.join(d, name)
        if not (os.path.islink(path) and os.readlink(path) == target):
            tmp = path + f".tmp{os.getpid()}"
            os.symlink(target, tmp)
            os.replace(tmp, path)
    return WAN_DIR + "/"


def run(b):
    models = (b.args.wan_models or ",".join(MODELS)).split(",")
    b.parts["wan"] = WanBench(b, quick=b.args.wan_quick, models=models)
    b.parts["wan"].run()


class LinkEmulator:
    """bench/linkem.py in front of nginx; stopped by its pid, and by itself if
    the bench dies (it exits when its stdin closes, or after an hour)."""

    def __init__(self, upstream_port, rtt_ms, mbit, scheme="http", extra=()):
        self.scheme = scheme
        self.argv = [sys.executable, LINKEM, "--upstream", f"127.0.0.1:{upstream_port}",
                     "--delay-ms", str(rtt_ms / 2), "--rate-mbit", str(mbit), "--lifetime", "3600",
                     "--stdin-watch", *extra]

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

    def close_connections(self):
        """Close every connection through the link (SIGUSR1), as a server's
        keep-alive timeout would; returns how many it closed."""
        self.proc.send_signal(signal.SIGUSR1)
        line = self.proc.stdout.readline()
        if not line.startswith("closed "):
            raise RuntimeError(f"linkem answered {line!r} to SIGUSR1")
        return int(line.split()[1])

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
    def __init__(self, bench, quick=False, models=tuple(MODELS)):
        self.b = bench
        self.links = QUICK_LINKS if quick else LINKS
        self.models = models
        self.model_of = {}  # "RTT/rate[, slow start]" -> (model, "RTT/rate")
        self.results = {}   # "RTT/rate[, slow start]" -> row -> tool -> phase -> {"s", "requests", "bytes"}
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

    def put(self, link, row, tool, phase, seconds, entries, setup=None):
        cell = {"s": seconds}
        if entries is not None:
            cell["requests"] = len(entries)
            cell["bytes"] = sum(e.get("bytes", 0) for e in entries)
            cell["log"] = entries
        if setup is not None:
            # Named so that bench/baseline.py does not take it for a figure.
            cell["setup"] = {"count": len(setup), "log": setup}
        self.results.setdefault(link, {}).setdefault(row, {}).setdefault(tool, {})[phase] = cell

    def run(self):
        b = self.b
        self.seq_file = ensure_seq_file()
        self.dir = ensure_wan_dir([b.mp4, b.mkv, self.seq_file])
        if "rclone" in b.tools:
            b.notes.append(f"wan: rclone is pointed at {self.dir} in the data dir, which holds only the scenario's "
                           "three files, and each mount lists it and stats the file before the timed part (a "
                           "GET of the folder and a HEAD per file, kept under the cell's setup in the JSON): mediafs, "
                           "given the file's URL, needs no listing")
        for model in self.models:
            suffix, extra = MODELS[model]
            for rtt, mbit in self.links:
                plain = f"{rtt} ms / {mbit} Mbit/s"
                link = plain + suffix
                self.model_of[link] = (model, plain)
                self.rtt_s[link] = rtt / 1000
                rig.log(f"wan: link {link}")
                settle = 0.3 + rtt / 1000
                with LinkEmulator(b.nginx.port, rtt, mbit, extra=extra) as em:
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
                                             "expected_s": expected_seq_s(rtt / 1000, mbit * 1e6 / 8, model)}

    def one(self, link, key, src, name, how, tool, em, settle):
        b = self.b
        cache = None
        for phase in PHASES:
            runs = []
            for _ in range(RUNS):
                # The media rows' programs stay loaded (rig.drop_caches_but_tools).
                drop = rig.drop_caches if how in ("seq", "head") else rig.drop_caches_but_tools
                if tool == "local":
                    drop()
                    runs.append((self.act(how, src), None, None))
                    continue
                drop()
                b.warm_source(src)
                m = b.nginx.mark()
                if tool == "direct":
                    dt = self.act(how, em.base() + self.dir + name)
                    runs.append((dt, b.nginx.since(m, settle=settle), None))
                    continue
                if phase == "cold":
                    if cache:
                        shutil.rmtree(cache, ignore_errors=True)
                    cache = b.fresh_dir(f"cache-wan-{tool}")
                # Replay: the last cold run's cache directory, a new mount, no page cache.
                setup = None
                with b.mount(tool, [src], cache, f"wan-{key}-{phase}", base=em.base() + self.dir) as mnt:
                    if tool == "rclone":
                        # Its listing before the timed part: mediafs, given
                        # the file's URL, has none to do. Then the link
                        # closes the connections the listing left open, as
                        # a server's keep-alive timeout would have by the
                        # time a player opens the file: mediafs opens its
                        # first connection in the timed part, so rclone does.
                        os.listdir(mnt.mp)
                        os.stat(os.path.join(mnt.mp, name))
                        setup = b.nginx.since(m, settle=0)
                        if em.close_connections():
                            time.sleep(0.05)  # rclone's pool sees each end of stream
                        m = b.nginx.mark()
                    dt = self.act(how, os.path.join(mnt.mp, name))
                    if how == "head" and phase == "replay" and tool == "mediafs":
                        # Again, all in memory: what FUSE's round trips alone cost.
                        self.fuse_floor.setdefault(link, []).append(self.act(how, os.path.join(mnt.mp, name)))
                runs.append((dt, b.nginx.since(m, settle=settle), setup))
            # The median run, with its requests.
            dt, entries, setup = sorted(runs, key=lambda run: run[0])[len(runs) // 2]
            self.put(link, key, tool, phase, dt, entries, setup)
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
        print("cold = fresh cache, page cache dropped; replayed = page cache dropped, disk cache kept (remount); "
              "the media rows' ffmpeg and ffprobe loaded back after each drop, for every tool.")
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
        self.report_models()

    def report_models(self):
        """The media rows cold under each link model side by side, peers of the same run beside mediafs."""
        plains = []
        for link, (model, plain) in self.model_of.items():
            if plain not in plains:
                plains.append(plain)
        models = [m for m in self.models if any(self.model_of.get(link, (None,))[0] == m for link in self.results)]
        if len(models) < 2:
            return
        tools = [t for t in ("mediafs", "rclone", "direct") if t != "rclone" or "rclone" in self.b.tools]
        print()
        print("WAN link models side by side, cold seconds: " + " / ".join(tools)
              + " (mediafs ÷ best peer); paced = delay + shared rate, slow start = the same + TCP's window per "
              "connection (bench/README.md)")
        for plain in plains:
            links = {m: plain + MODELS[m][0] for m in models}
            headers = ["row"] + [m for m in models]
            table = []
            sums = {m: [0.0, 0.0, 0.0] for m in models}  # mediafs, best peer, rclone
            complete = {m: True for m in models}
            for key, label, _, _ in self.rows():
                cells = [label]
                for m in models:
                    xs = [self.seconds(links[m], key, t, "cold") for t in tools]
                    best = self.best_peer(links[m], key, "cold")
                    ratio = f"{xs[0] / best:.2f}×" if xs[0] is not None and best else "-"
                    cells.append(" / ".join("-" if x is None else secs(x) for x in xs) + f" ({ratio})")
                    if key in MEDIA_ROWS:
                        if xs[0] is None or best is None:
                            complete[m] = False
                        else:
                            sums[m][0] += xs[0]
                            sums[m][1] += best
                            sums[m][2] += xs[1] if "rclone" in tools and xs[1] is not None else float("nan")
                table.append(cells)
            cells = ["five media rows"]
            for m in models:
                ms, best, rc = sums[m]
                if not complete[m]:
                    cells.append("-")
                    continue
                cells.append(f"{secs(ms)} vs best {secs(best)} ({ms / best:.2f}×)"
                             + (f"; vs rclone {secs(rc)} ({ms / rc:.2f}×)" if rc == rc and rc else ""))
            table.append(cells)
            print()
            print(f"link {plain}")
            rig.print_table(headers, table)

    def report_goals(self, link):
        lim = self.limits.get(link)
        if lim:
            print(f"  limits: curl of 32 MiB through the link {lim['measured_s']:.2f} s; expected "
                  f"size/rate + 2 RTT (setup + request){SLOW_START_LIMIT if ', slow start' in link else ''} "
                  f"= {lim['expected_s']:.2f} s "
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
        return {"links": self.results, "limits": self.limits, "fuse_floor_s": self.fuse_floor,
                "models": {link: model for link, (model, _) in self.model_of.items()}}
