"""The bench's media-server scenario (`--only mediaserver`): issue 26's rows.
A player streams a 2-minute film at real-time rate while a Jellyfin-style
library scan runs over 200 files, all through bench/linkem.py at
100 ms / 50 Mbit/s, under a 256 MiB cache.

- the player: `ffmpeg -re -i FILM -map 0 -c copy -f null -` (a remux, as
  Jellyfin's direct stream; no decoder, so its lag is its reads', not the
  CPU a shared 2-core machine leaves a decoder), its `-progress` read every
  0.1 s: behind = wall time since it started - media time it has read;
- the scan: `ls -l` of the library (Jellyfin's walk), then per file
  Jellyfin's probe command line and its first-video-frame extraction
  (`ffmpeg -ss <10% of the duration> ... -vframes 1 -vf ...,thumbnail=n=24
  -f image2`), two files at a time (Jellyfin's scan and image extraction
  run as many at once as there are cores: 2 here);
- then a rescan of the unchanged library on the same mount.

Variants, each on a fresh cache: the player alone (the baseline); with the
scan as Jellyfin runs it (ffprobe is a scanner by name; the frame
extraction, a plain ffmpeg like the player's, is one by its `-vframes 1`);
the same with a scan budget that holds every file's probe ranges
(`--cache-max-size 768M --scan-cache-size 384M`); with read classes off
(`--scanners =`); rclone alone and with the scan.

Server bytes per scanned file are nginx's, split between the probe and the
frame extraction by when each request reached nginx; the demand they are
held against is what the same commands read() from the local files (strace,
the union of the byte ranges, and that rounded out to 4 KiB pages: the
least the kernel can ask for).

Registered in bench/scenarios.py; uses bench/rig.py's nginx, Mount and
drop_caches, and the WAN scenarios' link emulator.
"""
import json
import os
import queue
import re
import shutil
import subprocess
import threading
import time

import rig
import wan as W

RTT_MS, MBIT = 100, 50
FILM_S = 120
SOURCE_S = 240           # one encode; the film and the clips are cut from it
FPS = 25
GOP = 2 * FPS            # a keyframe every 2 s, as streaming encoders use
BITRATE = "8M"           # constant (x264 nal-hrd=cbr): the film streams at 1 MB/s, a sixth of the link
CLIPS = 20               # distinct clips behind the library's names
LIBRARY = 200            # names in the library, each its own URL (symlinks to the clips at nginx)
WORKERS = 2              # files scanned at once
# The rescan is judged by its requests alone, which do not depend on how many run at once; 8 at a
# time keeps it short when its reads must fetch (2 at a time, one took 562 s here: see README).
RESCAN_WORKERS = 8
CACHE_MAX = "256M"
PAGE = 4096
PROGRESS_S = 0.1         # the player's -stats_period
GOAL_LAG_S = 0.5
GOAL_RATIO = 1.02
MOUNT_DEADLINE = 1500    # s a variant's mount may live before bench/rig.py's watchdog kills it
# The sized variant: a scan budget that holds what the 200 files keep once trimmed to their probe
# ranges: the probes' 137 MiB, and the frames' bytes that lie within a short clip's 2 MiB head (a 256M
# budget held 246 MiB and still evicted 16 files whole here); the default (an eighth of 256M: 32 MiB)
# holds a quarter of the probes alone. The cache twice the budget, for the film beside it.
SIZED_MAX, SIZED_SCAN = "768M", "384M"
DIR = "mediaserver"      # under DATA: film.mkv and library/ (what the mounts show)
CLIP_DIR = "mediaserver-clips"

JELLYFIN_PROBE = ["-analyzeduration", "200M", "-probesize", "1G"]


def probe_argv(path):
    """Jellyfin's probe command line (MediaEncoder.GetMediaInfo), on one file."""
    return ["ffprobe", *JELLYFIN_PROBE, "-i", path, "-threads", "0", "-v", "warning", "-print_format", "json",
            "-show_streams", "-show_chapters", "-show_format"]


def thumb_argv(path, duration, out, ffmpeg="ffmpeg"):
    """Jellyfin's first-video-frame extraction (MediaEncoder.ExtractImageInternal, I-frame pass,
    no tradeoff: the thumbnail filter picks the best of 24 frames), at 10% of the duration as its
    VideoImageProvider asks; without the `-f FORMAT` it puts first for some containers."""
    t = duration / 10
    ss = f"{int(t // 3600):02d}:{int(t % 3600 // 60):02d}:{t % 60:06.3f}"
    return [ffmpeg, "-nostdin", "-ss", ss, "-i", path, "-threads", "0", "-v", "quiet", "-vframes", "1",
            "-vf", "scale=round(iw*sar/2)*2:round(ih/2)*2,thumbnail=n=24", "-f", "image2", out]


def player_argv(path):
    return ["ffmpeg", "-nostdin", "-hide_banner", "-v", "error", "-progress", "pipe:1",
            "-stats_period", str(PROGRESS_S), "-re", "-i", path, "-map", "0", "-c", "copy", "-f", "null", "-"]


# (key, tool, label, scan?, mediafs options)
VARIANTS = (
    ("mediafs-alone", "mediafs", "mediafs, player alone", False, ()),
    ("mediafs", "mediafs", "mediafs, Jellyfin's scan", True, ()),
    ("mediafs-sized", "mediafs", "mediafs, scan budget for the library's probes (*)", True,
     ("--cache-max-size", SIZED_MAX, "--scan-cache-size", SIZED_SCAN)),
    ("mediafs-noclasses", "mediafs", "mediafs, read classes off (--scanners =)", True, ("--scanners", "=")),
    ("rclone-alone", "rclone", "rclone, player alone", False, ()),
    ("rclone", "rclone", "rclone, Jellyfin's scan", True, ()),
)
# --mediaserver-quick: mediafs's variants only (about 14 minutes instead of 26).
QUICK = ("mediafs-alone", "mediafs", "mediafs-sized", "mediafs-noclasses")


# ------------------------------------------------------------------ media

def data(*parts):
    return os.path.join(rig.DATA, *parts)


def clip_spec(i):
    """Clip i: its duration (10-48 s), where it starts in the source, and its container (mkv and
    mp4 in turn; the mp4s keep ffmpeg's default moov at the end, so a probe reads head and tail)."""
    dur = 10 + 2 * i
    start = (34 * i) % (SOURCE_S - dur - GOP // FPS)
    return dur, start - start % 2, "mkv" if i % 2 == 0 else "mp4"


def clip_name(i):
    return f"clip{i:02d}.{clip_spec(i)[2]}"


def library_names():
    """ep001.mkv, ep002.mp4, ...: name k is clip k % CLIPS, under its own URL."""
    return [f"ep{k + 1:03d}.{clip_spec(k % CLIPS)[2]}" for k in range(LIBRARY)]


def ensure_media():
    """DATA/mediaserver-source.mkv (one encode), cut (-c copy) into DATA/mediaserver/film.mkv and
    CLIPS clips in DATA/mediaserver-clips/; DATA/mediaserver/library/ holds LIBRARY symlinks to the
    clips. Made under temporary names and renamed, a `.done` marker last."""
    done = data(DIR + ".done")
    if os.path.exists(done):
        return
    os.makedirs(rig.DATA, exist_ok=True)
    src = data("mediaserver-source.mkv")
    if not os.path.exists(src):
        rig.log(f"mediaserver: encoding {src} ({SOURCE_S} s 1280x720 testsrc2 at {FPS} fps, x264 ultrafast "
                f"CBR {BITRATE}, a keyframe every {GOP // FPS} s, AAC)")
        tmp = data("mediaserver-source.tmp.mkv")
        subprocess.run(["ffmpeg", "-y", "-nostdin", "-v", "error",
                        "-f", "lavfi", "-i", f"testsrc2=size=1280x720:rate={FPS}",
                        "-f", "lavfi", "-i", "sine=frequency=440:sample_rate=48000", "-t", str(SOURCE_S),
                        "-c:v", "libx264", "-preset", "ultrafast", "-g", str(GOP), "-sc_threshold", "0",
                        "-b:v", BITRATE, "-minrate", BITRATE, "-maxrate", BITRATE, "-bufsize", "4M",
                        "-x264-params", "nal-hrd=cbr", "-pix_fmt", "yuv420p", "-c:a", "aac", "-b:a", "128k", tmp],
                       check=True, timeout=1800)
        os.rename(tmp, src)
    rig.log("mediaserver: cutting the film and the clips (-c copy), linking the library")
    for d in (DIR, CLIP_DIR):
        shutil.rmtree(data(d), ignore_errors=True)
        shutil.rmtree(data(d + ".tmp"), ignore_errors=True)
    os.makedirs(data(CLIP_DIR + ".tmp"))
    os.makedirs(data(DIR + ".tmp", "library"))
    subprocess.run(["ffmpeg", "-y", "-nostdin", "-v", "error", "-i", src, "-t", str(FILM_S), "-map", "0",
                    "-c", "copy", data(DIR + ".tmp", "film.mkv")], check=True, timeout=600)
    for i in range(CLIPS):
        dur, start, _ = clip_spec(i)
        subprocess.run(["ffmpeg", "-y", "-nostdin", "-v", "error", "-ss", str(start), "-i", src, "-t", str(dur),
                        "-map", "0", "-c", "copy", data(CLIP_DIR + ".tmp", clip_name(i))], check=True, timeout=600)
    for k, name in enumerate(library_names()):
        os.symlink(os.path.join("..", "..", CLIP_DIR, clip_name(k % CLIPS)), data(DIR + ".tmp", "library", name))
    os.rename(data(CLIP_DIR + ".tmp"), data(CLIP_DIR))
    os.rename(data(DIR + ".tmp"), data(DIR))
    open(done, "w").close()


# ----------------------------------------------------------------- demand

SYSCALL = re.compile(r"^(\d+)\s+(openat|read|pread64|lseek)\((.*)\)\s+=\s+(-?\d+)")


def read_spans(trace, path):
    """The byte ranges a traced program read() from `path`, merged: strace -f -y lines of openat, read,
    pread64 and lseek, each fd's position followed (lseek returns it), split calls joined."""
    pos, pending, spans = {}, {}, []
    with open(trace, errors="replace") as f:
        for line in f:
            line = line.rstrip("\n")
            m = re.match(r"^(\d+)\s+(\w+)\((.*)<unfinished \.\.\.>$", line)
            if m:
                pending[m.group(1)] = (m.group(2), m.group(3))
                continue
            m = re.match(r"^(\d+)\s+<\.\.\. (\w+) resumed>(.*)$", line)
            if m and m.group(1) in pending:
                name, head = pending.pop(m.group(1))
                line = f"{m.group(1)} {name}({head}{m.group(3)}"
            m = SYSCALL.match(line)
            if not m:
                continue
            name, args, ret = m.group(2), m.group(3), int(m.group(4))
            if name == "openat":
                r = re.search(r"= (\d+)<([^>]*)>$", line)
                if r and r.group(2) == path:
                    pos[int(r.group(1))] = 0
                continue
            r = re.match(r"(\d+)<([^>]*)>", args)
            if not r or r.group(2) != path or ret < 0:
                continue
            fd = int(r.group(1))
            if name == "lseek":
                pos[fd] = ret
            elif name == "pread64" and ret > 0:
                off = int(args.rsplit(",", 1)[1])
                spans.append((off, off + ret))
            elif ret > 0:
                at = pos.get(fd, 0)
                spans.append((at, at + ret))
                pos[fd] = at + ret
    return merge(spans)


def merge(spans):
    out = []
    for a, b in sorted(spans):
        if out and a <= out[-1][1]:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return out


def span_bytes(spans):
    return sum(b - a for a, b in spans)


def paged(spans, size):
    """Spans rounded out to whole pages (the kernel reads a file's page cache in pages), within the file."""
    return merge([(a - a % PAGE, min(size, -(-b // PAGE) * PAGE)) for a, b in spans])


def traced(argv, path, trace):
    """Run argv under strace; returns (stdout, the spans it read from path)."""
    done = subprocess.run(["strace", "-f", "-qq", "-y", "-e", "trace=openat,read,pread64,lseek", "-e", "signal=none",
                           "-o", trace] + argv, capture_output=True, text=True, timeout=300)
    if done.returncode != 0:
        raise RuntimeError(f"{argv[0]} on {path} under strace: rc={done.returncode} {done.stderr[-300:]}")
    return done.stdout, read_spans(trace, path)


def clip_demand(work):
    """Per distinct clip: what the probe and the frame extraction read() from the local file (spans),
    its duration as the probe reported it, and its size. Kept in DATA/mediaserver-demand.json, keyed
    by each clip's size and mtime and the commands, so a rerun only checks."""
    cache_path = data("mediaserver-demand.json")
    try:
        with open(cache_path) as f:
            saved = json.load(f)
    except (OSError, ValueError):
        saved = {}
    out, changed = {}, False
    for i in range(CLIPS):
        path = os.path.realpath(data(CLIP_DIR, clip_name(i)))
        st = os.stat(path)
        key = json.dumps([st.st_size, int(st.st_mtime), probe_argv("F"), thumb_argv("F", 10.0, "O")])
        if saved.get(clip_name(i), {}).get("key") == key:
            out[clip_name(i)] = saved[clip_name(i)]
            continue
        if shutil.which("strace") is None:
            raise RuntimeError("strace is needed for the scan's demand (apt-get install -y strace)")
        trace = os.path.join(work, "strace-ms.txt")
        text, probe = traced(probe_argv(path), path, trace)
        duration = float(json.loads(text)["format"]["duration"])
        out_jpg = os.path.join(work, "thumb-demand.jpg")
        if os.path.exists(out_jpg):
            os.unlink(out_jpg)  # as Jellyfin's new name each time: the command has no -y
        _, thumb = traced(thumb_argv(path, duration, out_jpg), path, trace)
        out[clip_name(i)] = {"key": key, "size": st.st_size, "duration": duration, "probe": probe, "thumb": thumb}
        changed = True
    if changed:
        with open(cache_path + ".tmp", "w") as f:
            json.dump(out, f)
        os.rename(cache_path + ".tmp", cache_path)
    return out


# ---------------------------------------------------------------- the run

class Player:
    """The film at real-time rate; samples (seconds since start, media seconds read) from -progress."""

    def __init__(self, path):
        self.path = path
        self.samples = []
        self.error = None

    def start(self):
        self.t0 = time.monotonic()
        self.proc = subprocess.Popen(player_argv(self.path), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     stdin=subprocess.DEVNULL, text=True)
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self):
        out_us = None
        for line in self.proc.stdout:
            key, _, value = line.strip().partition("=")
            if key == "out_time_us" and value.lstrip("-").isdigit():
                out_us = int(value)
            elif key == "progress":
                if out_us is not None and out_us > 0:
                    self.samples.append((time.monotonic() - self.t0, out_us / 1e6))

    def wait(self, timeout):
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            self.error = f"the player did not end within {timeout} s"
        self.wall = time.monotonic() - self.t0
        self.thread.join(10)
        err = self.proc.stderr.read()
        if self.proc.returncode != 0 and not self.error:
            self.error = f"the player exited rc={self.proc.returncode}: {err[-300:]}"
        self.ended = time.time()

    def stop(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def figures(self, duration):
        lags = [t - m for t, m in self.samples]
        return {"wall_s": self.wall, "behind_max_s": max(lags) if lags else None,
                "first_media_s": self.samples[0][0] if self.samples else None,
                "behind_end_s": self.wall - duration, "samples": len(self.samples),
                "media_read_s": self.samples[-1][1] if self.samples else None,
                "behind": [(round(t, 2), round(t - m, 3)) for t, m in self.samples]}


class Scan:
    """Jellyfin's walk, probe and frame extraction of every library file, WORKERS at a time; per file
    the wall-clock times its probe and its extraction began and ended (nginx's $msec clock)."""

    def __init__(self, lib_dir, names, thumbs_dir, ffmpeg="ffmpeg", thumbs=True, workers=WORKERS):
        self.lib_dir, self.names, self.thumbs_dir, self.ffmpeg = lib_dir, names, thumbs_dir, ffmpeg
        self.thumbs = thumbs  # False: the probe alone (a refresh of items that have their images)
        self.workers = workers
        self.times = {}
        self.failures = []
        self.running = {}   # worker -> its command's Popen, so a stop ends each by its pid
        self.stopped = False
        self.lock = threading.Lock()

    def run(self):
        t0 = time.time()
        walked = subprocess.run(["ls", "-l", self.lib_dir], capture_output=True, text=True, timeout=300)
        if walked.returncode != 0 or len(walked.stdout.splitlines()) != len(self.names) + 1:
            raise RuntimeError(f"ls -l {self.lib_dir}: rc={walked.returncode}, "
                               f"{len(walked.stdout.splitlines()) - 1} entries of {len(self.names)}")
        self.walk_s = time.time() - t0
        todo = queue.Queue()
        for name in self.names:
            todo.put(name)
        threads = [threading.Thread(target=self.worker, args=(k, todo)) for k in range(self.workers)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.started, self.s = t0, time.time() - t0

    def command(self, k, argv):
        """Runs argv as worker k's command; (rc, stdout, stderr). Killed by stop()."""
        with self.lock:
            if self.stopped:
                return -1, "", "stopped"
            proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                                    text=True)
            self.running[k] = proc
        try:
            out, err = proc.communicate(timeout=300)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
            err += " (killed after 300 s)"
        finally:
            with self.lock:
                self.running.pop(k, None)
        return proc.returncode, out, err

    def stop(self):
        with self.lock:
            self.stopped = True
            procs = list(self.running.values())
        for proc in procs:
            if proc.poll() is None:
                proc.kill()

    def worker(self, k, todo):
        while not self.stopped:
            try:
                name = todo.get_nowait()
            except queue.Empty:
                return
            path = os.path.join(self.lib_dir, name)
            t = {"probe_start": time.time()}
            rc, out, err = self.command(k, probe_argv(path))
            t["probe_end"] = time.time()
            self.times[name] = t
            try:
                duration = float(json.loads(out)["format"]["duration"])
            except (ValueError, KeyError, TypeError):
                self.failures.append(f"probe {name}: rc={rc} {err[-200:]}")
                continue
            if not self.thumbs:
                continue
            jpg = os.path.join(self.thumbs_dir, name + f".{t['probe_end']:.6f}.jpg")
            rc, _, _ = self.command(k, thumb_argv(path, duration, jpg, self.ffmpeg))
            t["thumb_end"] = time.time()
            if rc != 0 or not os.path.exists(jpg):
                self.failures.append(f"frame {name}: rc={rc}")


def started_at(entry):
    """When nginx had the request: its log time less its request time."""
    return entry["msec"] - entry["rtime"]


def run(b):
    b.parts["mediaserver"] = MediaServerBench(b, quick=b.args.mediaserver_quick)
    b.parts["mediaserver"].run()


class MediaServerBench:
    def __init__(self, b, quick=False):
        self.b = b
        self.variants = [v for v in VARIANTS if not quick or v[0] in QUICK]
        self.link = f"{RTT_MS} ms / {MBIT} Mbit/s"
        self.settle = 0.3 + RTT_MS / 1000
        self.results = {}   # variant key -> figures
        self.media = {}

    def run(self):
        ensure_media()
        self.names = library_names()
        self.film = data(DIR, "film.mkv")
        self.film_size = os.path.getsize(self.film)
        self.film_s = float(subprocess.run(["ffprobe", "-v", "error", "-show_entries", "format=duration", "-of",
                                            "csv=p=0", self.film], capture_output=True, text=True, check=True,
                                           timeout=60).stdout)
        self.demand = clip_demand(rig.WORK)
        self.per_name = {n: clip_name(k % CLIPS) for k, n in enumerate(self.names)}
        lib_bytes = sum(self.demand[c]["size"] for c in self.per_name.values())
        self.media = {"film_bytes": self.film_size, "film_s": self.film_s, "library_files": LIBRARY,
                      "distinct_clips": CLIPS, "library_bytes": lib_bytes}
        rig.log(f"mediaserver: link {self.link}; film {rig.human(self.film_size)} {self.film_s:.1f} s, library "
                f"{LIBRARY} files ({CLIPS} distinct), {rig.human(lib_bytes)}")
        for key, tool, label, scan, extra in self.variants:
            if tool == "rclone" and "rclone" not in self.b.tools:
                continue
            rig.log(f"mediaserver: {label}")
            self.b.guarded(f"mediaserver {key}", tool, lambda: self.variant(key, tool, scan, extra))

    # -- helpers
    def wait_quiet(self, quiet=1.0, limit=60):
        """Until nginx has logged nothing for `quiet` s (the listing's background probes, say)."""
        deadline = time.time() + limit
        size, since = self.b.nginx.mark(), time.time()
        while time.time() < deadline:
            time.sleep(0.2)
            now = self.b.nginx.mark()
            if now != size:
                size, since = now, time.time()
            elif time.time() - since >= quiet:
                return

    def cold_start(self):
        """No page cache anywhere; then the film and the clips read back, so nginx serves them from RAM,
        and ffmpeg's and ffprobe's own binaries loaded back (-version)."""
        rig.drop_caches()
        for tool in ("ffmpeg", "ffprobe"):
            subprocess.run([tool, "-version"], check=True, stdout=subprocess.DEVNULL, timeout=60)
        rig.read_local(self.film)
        for i in range(CLIPS):
            rig.read_local(data(CLIP_DIR, clip_name(i)))

    def mount(self, tool, cache, key, extra, em):
        mp = self.b.mountpoint(tool)
        base = em.base() + DIR + "/"
        if tool == "mediafs":
            argv = [self.b.binary, "mount", "-f", "--cache-dir", cache, "--timeout", "30",
                    "--cache-max-size", CACHE_MAX, *extra, base, mp]
        else:
            argv = ["rclone", "mount", ":http:", mp, "--http-url", base, "--vfs-cache-mode", "full",
                    "--cache-dir", cache, "--read-only", "--vfs-cache-max-size", CACHE_MAX]
        # One index is the mount's root, for both.
        root = mp
        # A variant's mount lives through the film, the scan and the rescan: rclone's took 8 minutes here.
        return rig.Mount(tool, argv, mp, f"{tool}-ms-{key}.log", self.b, exit_wait=60, deadline=MOUNT_DEADLINE), root

    def mediafs_stats(self, mp):
        try:
            return json.loads(os.getxattr(mp, "user.mediafs.stats"))
        except OSError:
            return None

    def film_cached(self, tool, root, cache):
        """The film's cached bytes: mediafs's user.mediafs.cached_bytes; for rclone, the ranges its
        vfsMeta file records for the film (its data file is sparse), else the data file's allocated
        blocks."""
        if tool == "mediafs":
            return int(os.getxattr(os.path.join(root, "film.mkv"), "user.mediafs.cached_bytes"))
        for sub, parse in (("vfsMeta", "meta"), ("vfs", "blocks")):
            for dirpath, _, files in os.walk(os.path.join(cache, sub)):
                if "film.mkv" not in files:
                    continue
                path = os.path.join(dirpath, "film.mkv")
                if parse == "meta":
                    try:
                        with open(path) as f:
                            meta = json.load(f)
                        return sum(r["Size"] for r in meta.get("Rs") or [])
                    except (OSError, ValueError, KeyError):
                        continue
                return min(os.stat(path).st_blocks * 512, self.film_size)
        return 0

    def split(self, entries, times, film_uri):
        """nginx entries → per library file: probe and frame-extraction (requests, bytes), by when each
        request reached nginx against when the file's probe ended; plus the film's and the rest."""
        per = {}
        film = {"requests": 0, "bytes": 0}
        other = {"requests": 0, "bytes": 0}
        by_uri = {f"/{DIR}/library/{n}": n for n in self.names}
        for e in entries:
            uri = e.get("uri")
            if uri == film_uri:
                film["requests"] += 1
                film["bytes"] += e["bytes"]
                continue
            name = by_uri.get(uri)
            if name is None or name not in times:
                other["requests"] += 1
                other["bytes"] += e.get("bytes", 0)
                continue
            # A request of the probe reached nginx a half round trip after the probe sent it, before it ended.
            phase = "probe" if started_at(e) <= times[name]["probe_end"] + RTT_MS / 2000 else "thumb"
            cell = per.setdefault(name, {}).setdefault(phase, {"requests": 0, "bytes": 0, "gets": 0})
            cell["requests"] += 1
            cell["bytes"] += e["bytes"]
            cell["gets"] += e.get("method") == "GET"
        return per, film, other

    def per_file(self, per):
        """Per library file: server bytes of the probe ÷ what the probe read (exact, and in pages); the
        frame extraction's bytes ÷ what it read that the probe had not (pages)."""
        rows = []
        for name in self.names:
            d = self.demand[self.per_name[name]]
            size = d["size"]
            probe_pages = paged(d["probe"], size)
            both_pages = paged(merge(d["probe"] + d["thumb"]), size)
            p = per.get(name, {}).get("probe", {"requests": 0, "bytes": 0})
            t = per.get(name, {}).get("thumb", {"requests": 0, "bytes": 0})
            new_thumb = span_bytes(both_pages) - span_bytes(probe_pages)
            rows.append({"name": name, "probe_bytes": p["bytes"], "probe_requests": p["requests"],
                         "thumb_bytes": t["bytes"], "thumb_requests": t["requests"],
                         "probe_read": span_bytes(d["probe"]), "probe_pages": span_bytes(probe_pages),
                         "thumb_new_pages": new_thumb, "both_pages": span_bytes(both_pages)})
        return rows

    # -- one variant on a fresh cache
    def variant(self, key, tool, scan, extra):
        fig = {"tool": tool}
        self.results[key] = fig
        cache = self.b.fresh_dir(f"cache-ms-{key}")
        thumbs = self.b.fresh_dir(f"thumbs-ms-{key}")
        film_uri = f"/{DIR}/film.mkv"
        with W.LinkEmulator(self.b.nginx.port, RTT_MS, MBIT) as em:
            self.cold_start()
            m0 = self.b.nginx.mark()
            mount, root = self.mount(tool, cache, key, extra, em)
            with mount as mnt:
                lib = os.path.join(root, "library")
                film = os.path.join(root, "film.mkv")
                # The library known before anything plays: its listing and each file's size (the
                # background probes a listing starts), as a server that has scanned it before.
                if len(os.listdir(lib)) != LIBRARY or os.path.getsize(film) != self.film_size:
                    raise RuntimeError(f"{lib}: {len(os.listdir(lib))} files of {LIBRARY}, or a wrong film size")
                self.wait_quiet()
                fig["setup"] = self.count(self.b.nginx.since(m0, settle=self.settle))
                m1 = self.b.nginx.mark()
                player = Player(film)
                sc = Scan(lib, self.names, thumbs) if scan else None
                runner = None
                try:
                    player.start()
                    if sc:
                        runner = threading.Thread(target=self.guard_scan, args=(sc, fig))
                        runner.start()
                    player.wait(timeout=FILM_S + 300)
                    if runner:
                        runner.join()
                finally:
                    player.stop()
                    if sc:
                        sc.stop()   # a no-op when it ended; else its commands killed by pid
                    if runner:
                        runner.join()
                if player.error:
                    raise RuntimeError(player.error)
                fig["player"] = player.figures(self.film_s)
                if sc and "scan_error" in fig:
                    raise RuntimeError(fig["scan_error"])
                self.wait_quiet()
                entries = self.b.nginx.since(m1, settle=self.settle)
                fig["film_cached"] = self.film_cached(tool, root, cache)
                if tool == "mediafs":
                    fig["stats"] = self.mediafs_stats(mnt.mp)
                if sc:
                    fig["scan_s"], fig["walk_s"] = sc.s, sc.walk_s
                    fig["failures"] = sc.failures
                    fig["scan_after_film_s"] = sc.started + sc.s - player.ended
                    per, film_cell, other = self.split(entries, sc.times, film_uri)
                    fig["film_server"], fig["other_server"] = film_cell, other
                    fig["files"] = self.per_file(per)
                    # Bytes the scan fetched after the film's last byte was read: what could push it out.
                    fig["scan_bytes_after_film"] = sum(e["bytes"] for e in entries if e.get("uri") != film_uri
                                                       and started_at(e) >= player.ended)
                    # The rescan: same mount, unchanged library, the page cache dropped (a rescan comes
                    # hours later; the kernel's copy of the first scan's pages would answer it otherwise).
                    # The probe alone: Jellyfin extracts a frame only for an item without an image.
                    self.cold_start()
                    m2 = self.b.nginx.mark()
                    again = Scan(lib, self.names, thumbs, thumbs=False, workers=RESCAN_WORKERS)
                    try:
                        again.run()
                    finally:
                        again.stop()
                    self.wait_quiet()
                    rentries = self.b.nginx.since(m2, settle=self.settle)
                    rper, rfilm, rother = self.split(rentries, again.times, film_uri)
                    cells = [c for per_file in rper.values() for c in per_file.values()]
                    fig["rescan"] = {"s": again.s, "failures": again.failures, "film": rfilm, "other": rother,
                                     "requests": sum(c["requests"] for c in cells),
                                     "bytes": sum(c["bytes"] for c in cells), "files": len(rper),
                                     # Those that carried no body: a HEAD or a check of the
                                     # validators (mediafs revalidates an open after 60 s).
                                     "empty": sum(1 for e in rentries if "/library/" in e.get("uri", "")
                                                  and e.get("bytes", 0) == 0),
                                     "log": rentries}
                    fig["film_cached_after_rescan"] = self.film_cached(tool, root, cache)
                    if tool == "mediafs":
                        fig["stats_after_rescan"] = self.mediafs_stats(mnt.mp)
                else:
                    fig["film_server"] = self.count([e for e in entries if e.get("uri") == film_uri])
            fig["all"] = self.count(self.b.nginx.since(m0, settle=self.settle))
        shutil.rmtree(cache, ignore_errors=True)
        shutil.rmtree(thumbs, ignore_errors=True)

    def guard_scan(self, sc, fig):
        try:
            sc.run()
        except Exception as e:  # noqa: BLE001 - reported by the variant once the player is done
            fig["scan_error"] = f"scan: {type(e).__name__}: {e}"

    @staticmethod
    def count(entries):
        return {"requests": len(entries), "bytes": sum(e.get("bytes", 0) for e in entries)}

    # -- report
    def behind(self, key):
        p = self.results.get(key, {}).get("player")
        return p["behind_max_s"] if p else None

    def report(self):
        if not self.results:
            return
        m = self.media
        print()
        print(f"media server (bench/mediaserver.py) through bench/linkem.py at {self.link}, --cache-max-size "
              f"{CACHE_MAX} (rclone: --vfs-cache-max-size {CACHE_MAX}): film {rig.human(m['film_bytes'])}, "
              f"{m['film_s']:.1f} s ({m['film_bytes'] * 8 / m['film_s'] / 1e6:.1f} Mbit/s mkv), played by "
              f"`ffmpeg -re -i FILM -map 0 -c copy -f null -`; library {m['library_files']} files "
              f"({m['distinct_clips']} distinct 10-48 s clips, mkv and mp4, {rig.human(m['library_bytes'])}) scanned "
              f"{WORKERS} at a time: `ls -l`, then per file Jellyfin's ffprobe and its frame extraction (ffmpeg).")
        print(f"behind: the player's wall time since it started less the media time it had read, at its worst "
              f"(its start included; -progress every {PROGRESS_S} s); end: its wall time less the film's duration "
              f"(-re catches up after a stall, so this is mostly the start). probe, frame: nginx's bytes per library "
              f"file; ÷ read: ÷ what the same command read() from the local file, in 4 KiB pages (frame: the pages "
              f"the probe had not read). rescan: the probe again on the same mount, page cache dropped: requests "
              f"(files). after film: the scan's time and bytes after the film's last read.")
        headers = ["variant", "behind s", "end s", "scan s", "probe/file", "probe ÷ read med/max", "frame/file",
                   "frame ÷ read", "rescan req", "film cached", "after film"]
        table = []
        for key, tool, label, scan, _ in self.variants:
            f = self.results.get(key)
            if f is None:
                continue
            if "player" not in f:
                table.append([label, "ERROR"] + ["-"] * (len(headers) - 2))
                continue
            p = f["player"]
            cells = [label, W.secs(p["behind_max_s"]) if p["behind_max_s"] is not None else "-",
                     W.secs(p["behind_end_s"])]
            if scan and "files" in f:
                files, rs = f["files"], f["rescan"]
                ratios = sorted(r["probe_bytes"] / r["probe_pages"] for r in files if r["probe_pages"])
                new = sum(r["thumb_new_pages"] for r in files)
                cells += [f"{f['scan_s']:.0f}", rig.human(sum(r["probe_bytes"] for r in files) // len(files)),
                          f"{ratios[len(ratios) // 2]:.2f} / {ratios[-1]:.2f}",
                          rig.human(sum(r["thumb_bytes"] for r in files) // len(files)),
                          f"{sum(r['thumb_bytes'] for r in files) / new:.2f}" if new else "-",
                          f"{rs['requests']} ({rs['files']})", f"{f['film_cached'] / self.film_size:.1%}",
                          f"{f['scan_after_film_s']:.0f} s, {rig.human(f['scan_bytes_after_film'])}"]
            else:
                cells += ["-"] * 6 + [f"{f['film_cached'] / self.film_size:.1%}", "-"]
            table.append(cells)
        rig.print_table(headers, table)
        if "mediafs-sized" in self.results:
            print(f"(*) --cache-max-size {SIZED_MAX} --scan-cache-size {SIZED_SCAN}: room for the 200 files' probe "
                  f"ranges (the default scan budget, an eighth of {CACHE_MAX}, holds a quarter of them).")
        self.report_notes()
        self.report_goals()

    def report_notes(self):
        for key, tool, label, scan, _ in self.variants:
            f = self.results.get(key)
            if not f or "player" not in f:
                continue
            p = f["player"]
            bits = [f"setup (listings, sizes) {f['setup']['requests']} req {rig.human(f['setup']['bytes'])}",
                    f"player's first media at {p['first_media_s']:.2f} s",
                    f"film {f['film_server']['requests']} req {rig.human(f['film_server']['bytes'])}"]
            if scan and "files" in f:
                files, rs = f["files"], f["rescan"]
                bits.append(f"scan: walk {f['walk_s']:.2f} s; probe {sum(r['probe_requests'] for r in files)} req "
                            f"{rig.human(sum(r['probe_bytes'] for r in files))} for "
                            f"{rig.human(sum(r['probe_read'] for r in files))} read "
                            f"({rig.human(sum(r['probe_pages'] for r in files))} in pages); frame "
                            f"{sum(r['thumb_requests'] for r in files)} req {rig.human(sum(r['thumb_bytes'] for r in files))}"
                            f" for {rig.human(sum(r['thumb_new_pages'] for r in files))} of new pages read; other "
                            f"{f['other_server']['requests']} req")
                bits.append(f"rescan {rs['s']:.0f} s: {rs['requests']} req ({rs.get('empty', '?')} without a body) "
                            f"on {rs['files']} files "
                            f"{rig.human(rs['bytes'])} (other {rs['other']['requests']} req); film cached after it "
                            f"{f['film_cached_after_rescan'] / self.film_size:.1%}")
                if f["failures"] or rs["failures"]:
                    bits.append(f"FAILED commands: {len(f['failures'])} + {len(rs['failures'])} "
                                f"(first: {(f['failures'] + rs['failures'])[0]})")
            st = f.get("stats")
            if st:
                bits.append(f"stats after the scan: play fetched {rig.human(st.get('play_bytes_fetched'))}, scan fetched "
                            f"{rig.human(st.get('scan_bytes_fetched'))} for {rig.human(st.get('scan_bytes_served'))} "
                            f"the kernel asked for on scans' behalf, cached {rig.human(st.get('cached_bytes'))}")
            print(f"  {label}: " + "; ".join(bits))

    def goals(self):
        """goal -> (figure, met) for mediafs with Jellyfin's scan."""
        out = {}
        f = self.results.get("mediafs", {})
        a, b = self.behind("mediafs-alone"), self.behind("mediafs")
        if a is not None and b is not None:
            out["player"] = (f"{b:.2f} s behind vs {a:.2f} s alone ({b - a:+.2f} s; ≤ +{GOAL_LAG_S} s)",
                             b - a <= GOAL_LAG_S)
        if "files" in f:
            worst = max(f["files"], key=lambda r: r["probe_bytes"] / max(1, r["probe_pages"]))
            ratio = worst["probe_bytes"] / max(1, worst["probe_pages"])
            out["probe_bytes"] = (f"worst {worst['name']}: {worst['probe_bytes']} B fetched for {worst['probe_pages']} B "
                                  f"read in pages ({worst['probe_read']} B exact) = {ratio:.3f}× (≤ {GOAL_RATIO}×)",
                                  ratio <= GOAL_RATIO)
            rs = f["rescan"]
            out["rescan"] = (f"{rs['requests']} requests ({rs.get('empty', '?')} without a body: HEADs, validator "
                             f"checks) on {rs['files']} files, {rig.human(rs['bytes'])} (0)",
                             rs["requests"] == 0)
            out["film"] = (f"{f['film_cached']} of {self.film_size} B = {f['film_cached'] / self.film_size:.1%}",
                           f["film_cached"] == self.film_size)
        return out

    def report_goals(self):
        g = self.goals()
        labels = {"player": "while the scan runs, the player falls behind real time no more than alone + 0.5 s",
                  "probe_bytes": "the scan's probe fetches ≤ 1.02× what ffprobe read, per file",
                  "rescan": "a rescan of the unchanged library sends no request for its files",
                  "film": "after the scan the film is 100% cached"}
        print("  goals (mediafs, Jellyfin's scan):")
        for key, text in labels.items():
            if key in g:
                fig, ok = g[key]
                print(f"    goal: {text}: {fig} {'PASS' if ok else 'MISS'}")
        for key, alone, what in (("mediafs-sized", "mediafs-alone", f"scan budget {SIZED_SCAN} of {SIZED_MAX}"),
                                 ("mediafs-noclasses", "mediafs-alone", "read classes off"),
                                 ("rclone", "rclone-alone", "rclone")):
            f = self.results.get(key, {})
            if "player" not in f:
                continue
            a, b = self.behind(alone), self.behind(key)
            bits = []
            if b is not None:
                bits.append(f"player {b:.2f} s behind" + (f" vs {a:.2f} s alone ({b - a:+.2f} s)" if a is not None
                                                          else ""))
            if "files" in f:
                worst = max(r["probe_bytes"] / max(1, r["probe_pages"]) for r in f["files"])
                bits.append(f"probe worst {worst:.2f}× of ffprobe's read")
                bits.append(f"rescan {f['rescan']['requests']} requests")
            bits.append(f"film {f['film_cached'] / self.film_size:.1%} cached")
            print(f"    shown: {what}: " + ", ".join(bits))

    def json(self):
        return {"link": self.link, "cache_max": CACHE_MAX, "workers": WORKERS, "media": self.media,
                "variants": self.results,
                "goals": {k: {"figure": v[0], "status": "PASS" if v[1] else "MISS"} for k, v in self.goals().items()}}
