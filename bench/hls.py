"""The bench's HLS scenario (`--only hls`): issue 25's rows for a 2-minute
HLS VOD of 2-second segments, once with MPEG-TS segments and once with fMP4,
behind bench/linkem.py at 100 ms / 50 Mbit/s; each over plain http
(HTTP/1.1) and over https with HTTP/2 (nginx's ALPN, as CDNs serve HLS).

- hls: ffprobe/ffmpeg's own HLS client on the playlist URL through the link;
- mediafs: a mount of the playlist URL through the link, the command on its
  one file (NAME.ts / NAME.mp4), cold (fresh cache) and replayed (remounted
  on that cache);
- local: the same command on the segments concatenated into one file on
  local disk (the replay's reference).
Rows: probe (ffprobe), the first 3 s decoded, a seek to 90 s + 1 s decoded;
and the stat of a fresh mount and of a remount (time, requests at nginx).

Registered in bench/scenarios.py; uses bench/rig.py's nginx, Mount and
drop_caches, and the WAN scenario's link emulator, commands and RUNS.
"""
import os
import shutil
import subprocess
import time

import rig
import wan as W

RTT_MS, MBIT = 100, 50
SECONDS = 120
SEGMENT_S = 2
FPS = 25
PLAYLIST = "vod.m3u8"
# kind -> (segment extension, ffmpeg hls options, the mounted file's extension)
KINDS = {
    "ts": ("ts", [], "ts"),
    "fmp4": ("m4s", ["-hls_segment_type", "fmp4", "-hls_fmp4_init_filename", "init.mp4"], "mp4"),
}
ROWS = (("probe", "ffprobe -show_format -show_streams", W.ffprobe),
        ("first3s", "decode the first 3 s", W.first3s),
        ("seek", "seek to 90 s, decode 1 s", W.seek))
RUNS = W.RUNS
# Replay pairs (local file, then mediafs remounted) after each cold run: a
# replayed command takes 0.1-0.3 s, and on this shared machine the same
# command on the local file varies by ±30 ms run to run, so three samples
# could not tell 10% apart.
REPLAYS_PER_RUN = 3
# transport -> (scheme, label suffix): the same tree from nginx's two servers.
# ffmpeg's HLS client speaks HTTP/1.1 on both (it has no HTTP/2); mediafs
# (libcurl) negotiates HTTP/2 over TLS and multiplexes one connection.
TRANSPORTS = {"http": ("http", ""), "h2": ("https", " h2")}
# (tool, phase) cells of each row: the HLS client has no cache (every run of
# it is cold); the local file is the replay's reference.
CELLS = (("hls", "cold"), ("mediafs", "cold"), ("local", "replay"), ("mediafs", "replay"))


def run(b):
    b.parts["hls"] = HlsBench(b)
    b.parts["hls"].run()


def media_dir(kind):
    return os.path.join(rig.DATA, f"hls-{kind}")


def parts(kind):
    """The playlist's parts in order (the fMP4 init segment first), as local paths."""
    d = media_dir(kind)
    out = []
    with open(os.path.join(d, PLAYLIST)) as f:
        for line in f:
            line = line.strip()
            if line.startswith("#EXT-X-MAP:"):
                out.append(line.split('URI="', 1)[1].split('"', 1)[0])
            elif line.startswith("#EXT-X-BYTERANGE"):
                raise RuntimeError(f"{d}/{PLAYLIST}: byte ranges are not expected here")
            elif line and not line.startswith("#"):
                out.append(line)
    return [os.path.join(d, p) for p in out]


def concat_path(kind):
    return os.path.join(rig.DATA, f"hls-{kind}-concat.{KINDS[kind][2]}")


def ensure_media():
    """DATA/hls-source.mp4 (encoded once), remuxed into DATA/hls-ts/ and
    DATA/hls-fmp4/ (vod.m3u8 + segments) and their concatenations; each made
    under a temporary name and renamed, a `.done` marker last."""
    os.makedirs(rig.DATA, exist_ok=True)
    src = os.path.join(rig.DATA, "hls-source.mp4")
    if not os.path.exists(src):
        rig.log(f"hls: encoding {src} ({SECONDS} s 1280x720 testsrc2 at {FPS} fps, x264 veryfast, "
                f"a keyframe every {SEGMENT_S} s, AAC)")
        tmp = os.path.join(rig.DATA, "hls-source.tmp.mp4")
        subprocess.run(["ffmpeg", "-y", "-nostdin", "-v", "error",
                        "-f", "lavfi", "-i", f"testsrc2=size=1280x720:rate={FPS}",
                        "-f", "lavfi", "-i", "sine=frequency=440:sample_rate=48000", "-t", str(SECONDS),
                        "-c:v", "libx264", "-preset", "veryfast", "-g", str(SEGMENT_S * FPS), "-sc_threshold", "0",
                        "-pix_fmt", "yuv420p", "-c:a", "aac", tmp], check=True, timeout=1800)
        os.rename(tmp, src)
    for kind, (seg_ext, opts, _) in KINDS.items():
        done = media_dir(kind) + ".done"
        if os.path.exists(done):
            continue
        rig.log(f"hls: segmenting {kind} ({SEGMENT_S} s segments, -c copy)")
        tmp = media_dir(kind) + ".tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        shutil.rmtree(media_dir(kind), ignore_errors=True)
        os.makedirs(tmp)
        subprocess.run(["ffmpeg", "-y", "-nostdin", "-v", "error", "-i", src, "-map", "0", "-c", "copy",
                        "-f", "hls", "-hls_time", str(SEGMENT_S), "-hls_playlist_type", "vod", *opts,
                        "-hls_segment_filename", f"seg%03d.{seg_ext}", PLAYLIST],
                       cwd=tmp, check=True, timeout=600)
        os.rename(tmp, media_dir(kind))
        with open(concat_path(kind) + ".tmp", "wb") as out:
            for p in parts(kind):
                with open(p, "rb") as f:
                    shutil.copyfileobj(f, out, rig.MiB)
        os.rename(concat_path(kind) + ".tmp", concat_path(kind))
        open(done, "w").close()


def median_run(runs):
    """The median run by time (an odd count), with everything measured in it."""
    return sorted(runs, key=lambda r: r["s"])[len(runs) // 2]


class HlsBench:
    def __init__(self, b):
        self.b = b
        self.link = f"{RTT_MS} ms / {MBIT} Mbit/s"
        self.settle = 0.3 + RTT_MS / 1000
        self.media = {}    # kind -> {"segments", "parts", "bytes", "name"}
        # Below, keyed by variant: the kind and its transport's suffix ("ts", "ts h2", ...).
        self.results = {}  # variant -> row -> "tool/phase" -> median run {"s", "requests", "bytes", "log", ...}
        self.stat = {}     # variant -> {"fresh": run, "remount": run}
        self.floor = {}    # variant -> {"s": median, "runs_s": [...]}: every part's length (curl)
        self.ems = {}      # transport -> its LinkEmulator
        self.transport = "http"

    def run(self):
        ensure_media()
        for kind in KINDS:
            ps = parts(kind)
            size = sum(os.path.getsize(p) for p in ps)
            if os.path.getsize(concat_path(kind)) != size:
                raise RuntimeError(f"{concat_path(kind)} is not the sum of its segments")
            self.media[kind] = {"parts": len(ps), "segments": sum(not p.endswith("init.mp4") for p in ps),
                                "bytes": size, "name": PLAYLIST[:-len(".m3u8")] + "." + KINDS[kind][2]}
        rig.log(f"hls: link {self.link}")
        with W.LinkEmulator(self.b.nginx.port, RTT_MS, MBIT) as plain, \
                W.LinkEmulator(self.b.nginx.tls_port, RTT_MS, MBIT, scheme="https") as tls:
            self.ems = {"http": plain, "h2": tls}
            for transport in TRANSPORTS:
                if transport not in self.b.args.hls_transports.split(","):
                    continue
                self.transport = transport
                for kind in KINDS:
                    v = self.variant(kind)
                    self.b.guarded(f"hls {v} stat", "mediafs", lambda: self.stat_rows(kind))
                    self.b.guarded(f"hls {v} sizing floor", "curl", lambda: self.sizing_floor(kind))
                    for key, _, argv in ROWS:
                        self.b.guarded(f"hls {v} {key}", "mediafs", lambda: self.row(kind, key, argv))

    # -- helpers
    def variant(self, kind, transport=None):
        return kind + TRANSPORTS[transport or self.transport][1]

    @property
    def em(self):
        return self.ems[self.transport]

    def url(self, kind):
        return self.em.base() + f"hls-{kind}/{PLAYLIST}"

    @staticmethod
    def drop():
        rig.drop_caches_but_tools()

    def cold_start(self, kind):
        """No page cache anywhere, then the segments read back so nginx serves them from RAM."""
        self.drop()
        for p in [os.path.join(media_dir(kind), PLAYLIST), *parts(kind)]:
            rig.read_local(p)

    def mount(self, kind, cache, tag):
        mp = self.b.mountpoint("mediafs")
        argv = [self.b.binary, "mount", "-f", "--cache-dir", cache, "--timeout", "30", self.url(kind), mp]
        if self.transport == "h2":
            argv[3:3] = ["--cacert", self.b.nginx.cert]
        return rig.Mount("mediafs", argv, mp, f"mediafs-hls-{kind}-{tag}.log", self.b)

    def counted(self, run, entries):
        """Requests and bytes at nginx, the playlist's apart from the segments'."""
        seg = [e for e in entries if not e.get("uri", "").endswith(".m3u8")]
        by_method = {}
        for e in seg:
            n, nbytes = by_method.get(e.get("method", "?"), (0, 0))
            by_method[e.get("method", "?")] = (n + 1, nbytes + e.get("bytes", 0))
        run.update(requests=len(entries), bytes=sum(e.get("bytes", 0) for e in entries),
                   playlist_requests=len(entries) - len(seg), segment_requests=len(seg), by_method=by_method,
                   segments_read=len({e.get("uri") for e in seg if e.get("method") == "GET"}), log=entries)
        return run

    @staticmethod
    def methods(run):
        return ", ".join(f"{m}×{n} {rig.human(nb)}" for m, (n, nb) in sorted(run["by_method"].items())) or "none"

    def timed(self, argv, target):
        t0 = time.perf_counter()
        rig.run_waited(argv(target), stdout=subprocess.DEVNULL)
        return time.perf_counter() - t0

    # -- the stat of a fresh mount, then of a remount on its cache
    def stat_rows(self, kind):
        name = self.media[kind]["name"]
        fresh, again = [], []
        def stat_once(cache, tag):
            m = self.b.nginx.mark()
            with self.mount(kind, cache, tag) as mnt:
                t0 = time.perf_counter()
                size = os.stat(os.path.join(mnt.mp, name)).st_size
                dt = time.perf_counter() - t0
            return self.counted({"s": dt, "size": size, "mount_s": mnt.mount_s},
                                self.b.nginx.since(m, settle=self.settle))

        for i in range(RUNS):
            cache = self.b.fresh_dir(f"cache-hls-{kind}-stat")
            self.cold_start(kind)
            fresh.append(stat_once(cache, f"stat{i}"))
            self.drop()
            again.append(stat_once(cache, f"restat{i}"))
            shutil.rmtree(cache, ignore_errors=True)
        self.stat[self.variant(kind)] = {"fresh": median_run(fresh), "remount": median_run(again),
                           "fresh_segment_requests_max": max(r["segment_requests"] for r in fresh),
                           "remount_segment_requests_max": max(r["segment_requests"] for r in again),
                           "sizes": sorted({r["size"] for r in fresh + again})}

    # -- the limit: what learning every part's length costs through the link
    def sizing_floor(self, kind):
        """`curl --parallel -I` on every part, fresh connections: the least time a client that gives
        the file its exact size before the first read needs, for a playlist without byte ranges:
        over HTTP/1.1 8 at a time (an origin's 8 connections, mediafs's bound); over HTTP/2 64 at a
        time on one connection (mediafs's bound for an origin that multiplexes)."""
        base = self.em.base() + f"hls-{kind}/"
        width = "64" if self.transport == "h2" else "8"
        argv = ["curl", "-s", "-f", "--no-progress-meter", "--parallel", "--parallel-max", width, "-I"]
        if self.transport == "h2":
            argv += ["--http2", "--cacert", self.b.nginx.cert]
        for p in parts(kind):
            argv += ["-o", "/dev/null", base + os.path.basename(p)]
        runs = []
        for _ in range(RUNS):
            self.cold_start(kind)
            t0 = time.perf_counter()
            rig.run_waited(argv, timeout=120)
            runs.append(time.perf_counter() - t0)
        self.floor[self.variant(kind)] = {"s": sorted(runs)[len(runs) // 2], "runs_s": runs,
                                          "parts": len(parts(kind)), "width": int(width)}

    # -- one row: each cell RUNS times (the replay pair REPLAYS_PER_RUN times
    # after each cold run), interleaved so drift hits every cell alike
    def row(self, kind, key, argv):
        name = self.media[kind]["name"]
        runs = {cell: [] for cell in CELLS}
        for i in range(RUNS):
            self.cold_start(kind)
            m = self.b.nginx.mark()
            dt = self.timed(argv, self.url(kind))
            runs[("hls", "cold")].append(self.counted({"s": dt}, self.b.nginx.since(m, settle=self.settle)))

            cache = self.b.fresh_dir(f"cache-hls-{kind}")
            self.cold_start(kind)
            m = self.b.nginx.mark()
            with self.mount(kind, cache, f"{key}-cold{i}") as mnt:
                dt = self.timed(argv, os.path.join(mnt.mp, name))
            runs[("mediafs", "cold")].append(
                self.counted({"s": dt, "mount_s": mnt.mount_s}, self.b.nginx.since(m, settle=self.settle)))
            for j in range(REPLAYS_PER_RUN):
                self.drop()
                runs[("local", "replay")].append({"s": self.timed(argv, concat_path(kind))})
                self.drop()   # the disk cache stays: a new mount on it
                m = self.b.nginx.mark()
                with self.mount(kind, cache, f"{key}-replay{i}.{j}") as mnt:
                    dt = self.timed(argv, os.path.join(mnt.mp, name))
                runs[("mediafs", "replay")].append(
                    self.counted({"s": dt, "mount_s": mnt.mount_s}, self.b.nginx.since(m, settle=self.settle)))
            shutil.rmtree(cache, ignore_errors=True)
        for (tool, phase), rs in runs.items():
            cell = median_run(rs)
            cell["runs_s"] = [r["s"] for r in rs]
            if tool == "mediafs":
                cell["mount_s_median"] = sorted(r["mount_s"] for r in rs)[len(rs) // 2]
            self.results.setdefault(self.variant(kind), {}).setdefault(key, {})[f"{tool}/{phase}"] = cell

    # -- report
    def variants(self):
        """(variant, kind) of each kind and transport measured, http first."""
        return [(self.variant(k, t), k) for t in TRANSPORTS for k in self.media
                if self.variant(k, t) in self.results or self.variant(k, t) in self.stat]

    def seconds(self, kind, key, cell):
        return self.results.get(kind, {}).get(key, {}).get(cell, {}).get("s")

    def cell(self, kind, key, cell):
        c = self.results.get(kind, {}).get(key, {}).get(cell)
        if c is None:
            return "ERROR" if self.b.results.get(f"error:hls {kind} {key}") else "-"
        s = W.secs(c["s"])
        return f"{s} ({c['requests']}, {rig.human(c['bytes'])})" if "requests" in c else s

    @staticmethod
    def verdict(ok):
        return "PASS" if ok else "MISS"

    def report(self):
        if not self.media:
            return
        print()
        print(f"HLS VOD (bench/hls.py) through bench/linkem.py at {self.link}: {SECONDS} s of 1280x720 "
              f"testsrc2 at {FPS} fps + AAC, {SEGMENT_S} s segments; "
              + ", ".join(f"{k} {m['segments']} segments{' + init' if m['parts'] > m['segments'] else ''} "
                          f"= {rig.human(m['bytes'])}" for k, m in self.media.items()) + ".")
        print("hls = ffprobe/ffmpeg's own HLS client on the playlist URL through the link (no cache: every run "
              "cold); local = the same command on the segments concatenated into one file on local disk.")
        print("cold = page cache dropped (ffmpeg's own libraries loaded back), nginx serving from RAM, mediafs on "
              "a fresh cache; replayed = the same drop, mediafs remounted on the cold run's cache.")
        print(f"cells: median seconds of {RUNS} runs cold, {RUNS * REPLAYS_PER_RUN} replayed (each replayed pair, "
              "local then mediafs, right after the other) (requests, bytes at nginx in that run, the playlist "
              "included); mediafs's time is the command's alone: its mount (the playlist fetch) is not timed "
              "but its requests are counted, and its median is the column 'mount'.")
        headers = ["format", "row", "hls cold", "mediafs cold", "÷ hls", "mount", "local", "mediafs replay",
                   "÷ local"]
        table = []
        for kind, _ in self.variants():
            for key, label, _ in ROWS:
                h, mc = self.seconds(kind, key, "hls/cold"), self.seconds(kind, key, "mediafs/cold")
                lo, mr = self.seconds(kind, key, "local/replay"), self.seconds(kind, key, "mediafs/replay")
                mount = self.results.get(kind, {}).get(key, {}).get("mediafs/cold", {}).get("mount_s_median")
                table.append([kind, label, self.cell(kind, key, "hls/cold"), self.cell(kind, key, "mediafs/cold"),
                              f"{mc / h:.2f}" if h and mc is not None else "-",
                              W.secs(mount) if mount is not None else "-",
                              self.cell(kind, key, "local/replay"), self.cell(kind, key, "mediafs/replay"),
                              f"{mr / lo:.2f}" if lo and mr is not None else "-"])
        rig.print_table(headers, table)
        for variant, kind in self.variants():
            self.report_goals(variant, kind)

    def report_goals(self, kind, media_kind):
        m = self.media[media_kind]
        print(f"  {kind}:")
        st = self.stat.get(kind)
        if st:
            f, r = st["fresh"], st["remount"]
            exact = st["sizes"] == [m["bytes"]]
            ok = exact and st["fresh_segment_requests_max"] <= m["parts"]
            print(f"    goal: stat of a fresh mount: {W.secs(f['s'])} s, {f['segment_requests']} segment requests "
                  f"({self.methods(f)}; most of {RUNS} runs {st['fresh_segment_requests_max']}) for "
                  f"{m['parts']} parts (≤ 1 each), size {'exact' if exact else 'WRONG ' + str(st['sizes'])} "
                  f"({m['bytes']} B) {self.verdict(ok)}; the mount before it {W.secs(f['mount_s'])} s, "
                  f"{f['playlist_requests']} playlist request(s)")
            print(f"    goal: stat after a remount: {W.secs(r['s'])} s, {r['segment_requests']} segment requests "
                  f"(most of {RUNS} runs {st['remount_segment_requests_max']}; the playlist "
                  f"{r['playlist_requests']}× at mount) (0) {self.verdict(st['remount_segment_requests_max'] == 0)}")
        keys = [k for k, _, _ in ROWS]
        for k in keys:
            cells = self.results.get(kind, {}).get(k, {})
            if "mediafs/cold" in cells and "hls/cold" in cells:
                mf, hc = cells["mediafs/cold"], cells["hls/cold"]
                print(f"    {k} cold, segment requests: mediafs {self.methods(mf)}, GETs on {mf['segments_read']} "
                      f"segments; hls {self.methods(hc)} on {hc['segments_read']} segments")
        mc = [self.seconds(kind, k, "mediafs/cold") for k in keys]
        h = [self.seconds(kind, k, "hls/cold") for k in keys]
        if None not in mc and None not in h:
            worst = max((x / y, k) for x, y, k in zip(mc, h, keys))
            total = sum(mc) / sum(h)
            mounts = sum(self.results[kind][k]["mediafs/cold"]["mount_s_median"] for k in keys)
            print(f"    goal: cold, each row no slower than the HLS client: slowest {worst[1]} {worst[0]:.2f}× "
                  f"(≤1.00) {self.verdict(worst[0] <= 1.0)}")
            print(f"    goal: cold, three rows together {sum(mc):.2f} s vs {sum(h):.2f} s = {total:.2f}× (≤0.85) "
                  f"{self.verdict(total <= 0.85)}; with each run's mount added (not a goal: a mount serves many "
                  f"commands) {(sum(mc) + mounts) / sum(h):.2f}×")
        fl = self.floor.get(kind)
        if fl:
            probe = self.seconds(kind, "probe", "hls/cold")
            versus = f"; the HLS client's whole probe took {probe:.2f} s" if probe else ""
            print(f"    limits: the lengths of all {fl['parts']} parts, {fl['width']} at a time "
                  f"(curl --parallel-max {fl['width']} -I): "
                  f"{fl['s']:.2f} s (median of {RUNS}){versus}: a cold command through mediafs waits for them "
                  f"before its first read (the file's exact size), the HLS client never asks")
        rep = [(self.seconds(kind, k, "mediafs/replay"), self.seconds(kind, k, "local/replay"), k) for k in keys]
        rep = [(x / y, k, x - y) for x, y, k in rep if x is not None and y]
        if rep:
            worst = max(rep)
            print(f"    goal: replayed within 10% of the local concatenated file: worst {worst[1]} {worst[0]:.2f}× "
                  f"({worst[2] * 1e3:+.0f} ms) {self.verdict(worst[0] <= 1.10)}")

    def goals(self):
        """kind -> goal -> PASS/MISS, for the JSON."""
        out = {}
        keys = [k for k, _, _ in ROWS]
        for kind, media_kind in self.variants():
            m = self.media[media_kind]
            g = out.setdefault(kind, {})
            st = self.stat.get(kind)
            if st:
                g["stat_fresh"] = self.verdict(st["sizes"] == [m["bytes"]]
                                               and st["fresh_segment_requests_max"] <= m["parts"])
                g["stat_remount"] = self.verdict(st["remount_segment_requests_max"] == 0)
            mc = [self.seconds(kind, k, "mediafs/cold") for k in keys]
            h = [self.seconds(kind, k, "hls/cold") for k in keys]
            if None not in mc and None not in h:
                g["cold_each_row"] = self.verdict(all(x <= y for x, y in zip(mc, h)))
                g["cold_total"] = self.verdict(sum(mc) <= 0.85 * sum(h))
            rep = [(self.seconds(kind, k, "mediafs/replay"), self.seconds(kind, k, "local/replay")) for k in keys]
            if all(x is not None and y for x, y in rep):
                g["replay"] = self.verdict(all(x <= 1.10 * y for x, y in rep))
        return out

    def json(self):
        return {"link": self.link, "runs": RUNS, "media": self.media, "rows": self.results, "stat": self.stat,
                "sizing_floor": self.floor, "goals": self.goals()}
