"""The bench's background-jobs scenario (`--only background`): issue 54's
goals. Through bench/linkem.py at 100 ms / 50 Mbit/s, a player streams the
media-server scenario's film at real-time rate (`ffmpeg -re -i FILM -map 0
-c copy -f null -`, its lag read from -progress) alone, then beside three
of Jellyfin's background jobs, each on its own copy of the film (its own
URL), started by a parent process named `jellyfin` as Jellyfin starts them:

- trickplay: `ffmpeg -loglevel error -skip_frame nokey -threads 1 -i X -an
  -sn -vf fps=0.1,scale=320:-2 -c:v mjpeg -f image2 DIR/%08d.jpg`;
- intro-skipper's fingerprint: `ffmpeg -hide_banner -ss 0 -i X -to 600 -ac 2
  -f chromaprint -fp_format raw -`;
- loudness: `ffmpeg -hide_banner -i X -af ebur128=framelog=verbose -f null -`.

Variants, each on a fresh cache: mediafs with the player alone; with the
jobs (defaults); with `--background-bwlimit 2M` (the jobs' rate at nginx);
with `--background-daily 20M` (the jobs' bytes at nginx, how soon each job
fails once the day's bytes are used, the count after a remount); rclone
alone and with the same jobs (it has no read classes: what a player gets
without them). Then, on loopback (no emulator; said in the report), a film
played whole with `cat` and background jobs reading 4× the cache's size
after it: how much of the film is still cached.

Registered in bench/scenarios.py; the film is bench/mediaserver.py's.
"""
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time

import mediaserver as MS
import rig
import wan as W

RTT_MS, MBIT = 100, 50
DIR = "background"            # under DATA: film.mkv and the jobs' copies (symlinks to the media server's film)
JOBS = ("trickplay", "chromaprint", "loudness")
CACHE_MAX = "2G"              # room for every byte: only the classes decide who waits
BWLIMIT = "2M"
BWLIMIT_BYTES = 2 * rig.MiB
DAILY = "20M"
DAILY_BYTES = 20 * rig.MiB
# One transfer window: what one connection can hold on its way at the emulator (its receive window,
# bench/linkem.py's IN_FLIGHT_CAP): sent by nginx, counted there, not yet charged by mediafs.
WINDOW = 4 * rig.MiB
EVICT_CACHE = "256M"
EVICT_CACHE_BYTES = 256 * rig.MiB
EVICT_FILES = 9               # copies of the film read by a background job after it: > 4 × 256 MiB
GOAL_PLAYER = 1.05
GOAL_RATE = 1.10
GOAL_EIO_S = 1.0
MOUNT_DEADLINE = 900

# (key, tool, label, jobs?, mediafs options)
VARIANTS = (
    ("mediafs-alone", "mediafs", "mediafs, player alone", False, ()),
    ("mediafs-jobs", "mediafs", "mediafs, 3 background jobs", True, ()),
    ("mediafs-bwlimit", "mediafs", f"mediafs, jobs, --background-bwlimit {BWLIMIT}", True,
     ("--background-bwlimit", BWLIMIT)),
    ("mediafs-daily", "mediafs", f"mediafs, jobs, --background-daily {DAILY}", True, ("--background-daily", DAILY)),
    ("rclone-alone", "rclone", "rclone, player alone", False, ()),
    ("rclone-jobs", "rclone", "rclone, 3 background jobs", True, ()),
)

# Runs each job (an argv, as JSON) at once as its child, then prints, as
# each ends, its pid, exit status and the wall time it ended.
PARENT = """
import json, os, subprocess, sys, time
jobs = [subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
        for argv in json.loads(sys.argv[1])]
print(" ".join(str(p.pid) for p in jobs), flush=True)
left = {p.pid for p in jobs}
while left:
    pid, status = os.wait()
    if pid in left:
        left.discard(pid)
        print(pid, os.waitstatus_to_exitcode(status), time.time(), flush=True)
"""


def job_argv(kind, path, out_dir):
    if kind == "trickplay":
        os.makedirs(out_dir, exist_ok=True)
        return ["ffmpeg", "-nostdin", "-loglevel", "error", "-skip_frame", "nokey", "-threads", "1", "-i", path,
                "-an", "-sn", "-vf", "fps=0.1,scale=320:-2", "-c:v", "mjpeg", "-f", "image2",
                os.path.join(out_dir, "%08d.jpg")]
    if kind == "chromaprint":
        return ["ffmpeg", "-nostdin", "-hide_banner", "-ss", "0", "-i", path, "-to", "600", "-ac", "2",
                "-f", "chromaprint", "-fp_format", "raw", "-"]
    return ["ffmpeg", "-nostdin", "-hide_banner", "-i", path, "-af", "ebur128=framelog=verbose", "-f", "null", "-"]


def data(*parts):
    return os.path.join(rig.DATA, *parts)


def ensure_media():
    """DATA/background/: film.mkv, job-*.mkv and fill-*.mkv, symlinks to the media server's film."""
    MS.ensure_media()
    names = ["film.mkv"] + [f"job-{k}.mkv" for k in JOBS] + [f"fill-{i}.mkv" for i in range(EVICT_FILES)]
    d = data(DIR)
    if os.path.isdir(d) and sorted(os.listdir(d)) == sorted(names):
        return
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    for name in names:
        os.symlink(os.path.join("..", MS.DIR, "film.mkv"), os.path.join(d, name))


class Jobs:
    """The three jobs under a parent named `jellyfin`; their pids and each one's end (rc, wall time)."""

    def __init__(self, work, argvs):
        self.link = os.path.join(work, "jellyfin")
        if not os.path.exists(self.link):
            os.symlink(os.path.realpath(sys.executable), self.link)
        self.script = os.path.join(work, "jellyfin-parent.py")
        with open(self.script, "w") as f:
            f.write(PARENT)
        self.argvs = argvs
        self.ends = {}

    def start(self):
        self.started = time.time()
        self.proc = subprocess.Popen([self.link, self.script, json.dumps(self.argvs)], stdout=subprocess.PIPE,
                                     stdin=subprocess.DEVNULL, text=True, start_new_session=True)
        self.pids = [int(p) for p in self.proc.stdout.readline().split()]
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self):
        for line in self.proc.stdout:
            pid, rc, at = line.split()
            self.ends[int(pid)] = (int(rc), float(at))

    def wait(self, timeout):
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            pass
        self.stop()

    def stop(self):
        """The parent's session (its jobs with it) killed, by the parent's pid; reaped."""
        self.stopped = time.time()
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except OSError:
                pass
        self.proc.wait()
        self.thread.join(10)


def run(b):
    b.parts["background"] = BackgroundBench(b)
    b.parts["background"].run()


class BackgroundBench:
    def __init__(self, b):
        self.b = b
        self.link = f"{RTT_MS} ms / {MBIT} Mbit/s"
        self.settle = 0.3 + RTT_MS / 1000
        self.results = {}
        self.evict = None

    def run(self):
        ensure_media()
        self.film = data(DIR, "film.mkv")
        self.film_size = os.path.getsize(self.film)
        self.film_s = float(subprocess.run(["ffprobe", "-v", "error", "-show_entries", "format=duration", "-of",
                                            "csv=p=0", self.film], capture_output=True, text=True, check=True,
                                           timeout=60).stdout)
        rig.log(f"background: link {self.link}; film {rig.human(self.film_size)} {self.film_s:.1f} s; jobs "
                f"{', '.join(JOBS)} on copies of it")
        for key, tool, label, jobs, extra in VARIANTS:
            if tool == "rclone" and "rclone" not in self.b.tools:
                continue
            rig.log(f"background: {label}")
            self.b.guarded(f"background {key}", tool, lambda: self.variant(key, tool, jobs, extra))
        rig.log(f"background: a played film, then background reads of {EVICT_FILES} copies under "
                f"--cache-max-size {EVICT_CACHE} (loopback)")
        self.b.guarded("background evict", "mediafs", self.evict_variant)

    def cold_start(self):
        rig.drop_caches()
        subprocess.run(["ffmpeg", "-version"], check=True, stdout=subprocess.DEVNULL, timeout=60)
        rig.read_local(self.film)

    def mount(self, tool, cache, key, extra, base, cache_max=CACHE_MAX):
        mp = self.b.mountpoint(tool)
        if tool == "mediafs":
            argv = [self.b.binary, "mount", "-f", "--cache-dir", cache, "--timeout", "30",
                    "--cache-max-size", cache_max, *extra, base, mp]
        else:
            argv = ["rclone", "mount", ":http:", mp, "--http-url", base, "--vfs-cache-mode", "full",
                    "--cache-dir", cache, "--read-only", "--vfs-cache-max-size", cache_max]
        return rig.Mount(tool, argv, mp, f"{tool}-bg-{key}.log", self.b, exit_wait=60, deadline=MOUNT_DEADLINE)

    @staticmethod
    def stats(mp):
        return json.loads(os.getxattr(mp, "user.mediafs.stats"))

    def variant(self, key, tool, with_jobs, extra):
        fig = {"tool": tool}
        self.results[key] = fig
        cache = self.b.fresh_dir(f"cache-bg-{key}")
        out = self.b.fresh_dir(f"out-bg-{key}")
        job_uris = {f"/{DIR}/job-{k}.mkv" for k in JOBS}
        with W.LinkEmulator(self.b.nginx.port, RTT_MS, MBIT) as em:
            self.cold_start()
            base = em.base() + DIR + "/"
            with self.mount(tool, cache, key, extra, base) as mnt:
                names = set(os.listdir(mnt.mp))
                if "film.mkv" not in names or os.path.getsize(os.path.join(mnt.mp, "film.mkv")) != self.film_size:
                    raise RuntimeError(f"{mnt.mp}: no film of {self.film_size} B")
                for k in JOBS:
                    os.path.getsize(os.path.join(mnt.mp, f"job-{k}.mkv"))
                MS.MediaServerBench.wait_quiet(self)
                m1 = self.b.nginx.mark()
                player = MS.Player(os.path.join(mnt.mp, "film.mkv"))
                jobs = Jobs(rig.WORK, [job_argv(k, os.path.join(mnt.mp, f"job-{k}.mkv"), os.path.join(out, k))
                                       for k in JOBS]) if with_jobs else None
                exhausted = {}
                watcher = None
                if "--background-daily" in extra:
                    watcher = threading.Thread(target=self.watch_daily, args=(mnt.mp, exhausted), daemon=True)
                try:
                    player.start()
                    if jobs:
                        jobs.start()
                    if watcher:
                        watcher.start()
                    player.wait(timeout=self.film_s + 300)
                    if jobs:
                        # The jobs may go on after the film (they get what playback leaves) for a minute;
                        # a rate-limited job is stopped with the film: its rate is what is measured.
                        jobs.wait(0 if "--background-bwlimit" in extra else 60)
                finally:
                    player.stop()
                    if jobs:
                        jobs.stop()
                    exhausted["stop"] = True
                if player.error:
                    raise RuntimeError(player.error)
                fig["player"] = player.figures(self.film_s)
                MS.MediaServerBench.wait_quiet(self)
                entries = self.b.nginx.since(m1, settle=self.settle)
                film_e = [e for e in entries if e.get("uri") == f"/{DIR}/film.mkv"]
                job_e = [e for e in entries if e.get("uri") in job_uris]
                fig["film_server"] = {"requests": len(film_e), "bytes": sum(e["bytes"] for e in film_e)}
                fig["jobs_server"] = {"requests": len(job_e), "bytes": sum(e["bytes"] for e in job_e)}
                if jobs:
                    fig["jobs"] = {"pids": jobs.pids, "ends": {str(p): v for p, v in jobs.ends.items()},
                                   "started": jobs.started, "stopped": jobs.stopped}
                    if job_e:
                        first = min(MS.started_at(e) for e in job_e)
                        last = max(e["msec"] for e in job_e)
                        fig["jobs_window_s"] = last - first
                        fig["jobs_rate"] = fig["jobs_server"]["bytes"] / max(0.001, last - first)
                if tool == "mediafs":
                    fig["stats"] = self.stats(mnt.mp)
                    fig["readers"] = json.loads(os.getxattr(mnt.mp, "user.mediafs.readers"))
                if "t" in exhausted:
                    fig["exhausted_at"] = exhausted["t"]
                if jobs and "--background-daily" in extra:
                    # How soon each job ended after its last byte came: a read that no longer fits the
                    # day fails at once (EIO), so a job must not wait on one. Its last byte: when its
                    # reader's fetched bytes last grew (watch_daily: an upper bound, 0.1 s over). The end of nginx's last
                    # answer for its file is kept beside it: the link still held up to a window of it.
                    last = {}
                    for e in job_e:
                        last[e["uri"]] = max(last.get(e["uri"], 0), e["msec"])
                    came = exhausted.get("fetched", {})
                    fig["eio_s"] = [jobs.ends[pid][1] - came[pid][1]
                                    for pid in jobs.pids if pid in jobs.ends and pid in came]
                    fig["eio_after_nginx_s"] = [jobs.ends[pid][1] - last[f"/{DIR}/job-{k}.mkv"]
                                                for pid, k in zip(jobs.pids, JOBS)
                                                if pid in jobs.ends and f"/{DIR}/job-{k}.mkv" in last]
            if "--background-daily" in extra:
                # The count after a remount: the same cache, nothing read.
                with self.mount(tool, cache, key + "-again", extra, base) as again:
                    fig["daily_after_remount"] = self.stats(again.mp).get("background_daily_used")
        shutil.rmtree(cache, ignore_errors=True)
        shutil.rmtree(out, ignore_errors=True)

    def watch_daily(self, mp, found):
        """Every 0.1 s: when the stats first say the day's background bytes are used up, and when each
        reader's fetched bytes last grew (`found["fetched"]`: pid -> (bytes, the poll before it saw them):
        its last byte reached mediafs after then, so a job's end less it bounds its wait from above), which
        nginx's log cannot say: the link holds up to a window per connection after nginx has written it."""
        fetched = found.setdefault("fetched", {})
        before = time.time()
        while "stop" not in found:
            try:
                st = self.stats(mp)
                readers = json.loads(os.getxattr(mp, "user.mediafs.readers"))
            except OSError:
                return
            now = time.time()
            if "t" not in found and st.get("background_daily_used", 0) >= st.get("background_daily_limit", 1 << 62):
                found["t"] = now
            for r in readers:
                if r.get("class") == "background" and fetched.get(r["pid"], (None,))[0] != r["bytes_fetched"]:
                    fetched[r["pid"]] = (r["bytes_fetched"], before)
            before = now
            time.sleep(0.1)

    def evict_variant(self):
        """Loopback: `cat` plays the film whole (a player), then the loudness job reads EVICT_FILES copies
        (4× the cache's size) one after another; the film's cached bytes after."""
        fig = {}
        self.evict = fig
        cache = self.b.fresh_dir("cache-bg-evict")
        base = f"http://127.0.0.1:{self.b.nginx.port}/{DIR}/"
        with self.mount("mediafs", cache, "evict", (), base, cache_max=EVICT_CACHE) as mnt:
            film = os.path.join(mnt.mp, "film.mkv")
            subprocess.run(["cat", film], stdout=subprocess.DEVNULL, check=True, timeout=300)
            fig["film_cached_before"] = int(os.getxattr(film, "user.mediafs.cached_bytes"))
            paths = [os.path.join(mnt.mp, f"fill-{i}.mkv") for i in range(EVICT_FILES)]
            jobs = Jobs(rig.WORK, [job_argv("loudness", p, None) for p in paths[:1]])
            read = 0
            for p in paths:
                jobs.argvs = [job_argv("loudness", p, None)]
                jobs.start()
                jobs.wait(300)
                read += os.path.getsize(p)
            fig["background_read"] = read
            fig["film_cached_after"] = int(os.getxattr(film, "user.mediafs.cached_bytes"))
            fig["stats"] = self.stats(mnt.mp)
        shutil.rmtree(cache, ignore_errors=True)

    # -- report
    def behind(self, key):
        p = self.results.get(key, {}).get("player")
        return p["behind_max_s"] if p else None

    def report(self):
        if not self.results:
            return
        print()
        print(f"background jobs (bench/background.py) through bench/linkem.py at {self.link}: the media server's "
              f"film ({rig.human(self.film_size)}, {self.film_s:.0f} s) played by `ffmpeg -re ... -c copy -f null -`, "
              f"beside Jellyfin's trickplay, chromaprint and loudness jobs on three copies of it (their own URLs), "
              f"children of a process named `jellyfin`.")
        print("behind: the player's worst lag (wall time since start less media time read); jobs: nginx's bytes for "
              "the jobs' files and their rate over the span of their requests.")
        headers = ["variant", "behind s", "end s", "first media s", "film req", "jobs bytes", "jobs rate", "jobs ended"]
        table = []
        for key, tool, label, with_jobs, _ in VARIANTS:
            f = self.results.get(key)
            if f is None:
                continue
            if "player" not in f:
                table.append([label, "ERROR"] + ["-"] * (len(headers) - 2))
                continue
            p = f["player"]
            ends = f.get("jobs", {}).get("ends", {})
            table.append([label, W.secs(p["behind_max_s"]), W.secs(p["behind_end_s"]), W.secs(p["first_media_s"]),
                          str(f["film_server"]["requests"]),
                          rig.human(f["jobs_server"]["bytes"]) if with_jobs else "-",
                          f"{rig.human(f['jobs_rate'])}/s" if "jobs_rate" in f else "-",
                          f"{len(ends)} of {len(JOBS)} (rc {','.join(str(v[0]) for v in ends.values())})"
                          if with_jobs else "-"])
        rig.print_table(headers, table)
        for key in ("mediafs-jobs", "mediafs-daily"):
            f = self.results.get(key, {})
            if "readers" in f:
                classes = sorted({(r["process"], r["class"], os.path.basename(r["file"])) for r in f["readers"]})
                print(f"  {key}: readers " + "; ".join(f"{p} {c} {n}" for p, c, n in classes))
        if self.evict:
            e = self.evict
            print(f"  loopback: film played whole by cat, then {rig.human(e['background_read'])} read by background "
                  f"loudness jobs under --cache-max-size {EVICT_CACHE}: film cached {e['film_cached_before']} B "
                  f"before, {e['film_cached_after']} B after")
        print("  goals (mediafs):")
        for text, (fig, ok) in self.goals().items():
            print(f"    goal: {text}: {fig} {'PASS' if ok else 'MISS'}")

    def goals(self):
        out = {}
        a = self.behind("mediafs-alone")
        for key in ("mediafs-jobs", "mediafs-bwlimit", "mediafs-daily"):
            b = self.behind(key)
            if a is not None and b is not None:
                out[f"player beside the jobs ({key}) lags ≤ alone × {GOAL_PLAYER} + 0.1 s (the -progress period)"] = (
                    f"{b:.2f} s vs {a:.2f} s alone", b <= a * GOAL_PLAYER + 0.1)
        f = self.results.get("mediafs-bwlimit", {})
        if "jobs_rate" in f:
            out[f"--background-bwlimit {BWLIMIT}: the jobs' rate at nginx ≤ {BWLIMIT}/s + 10%"] = (
                f"{rig.human(f['jobs_rate'])}/s over {f['jobs_window_s']:.1f} s",
                f["jobs_rate"] <= BWLIMIT_BYTES * GOAL_RATE)
        f = self.results.get("mediafs-daily", {})
        if "jobs_server" in f:
            sent = f["jobs_server"]["bytes"]
            out[f"--background-daily {DAILY}: the jobs' bytes at nginx ≤ {DAILY} + one window ({rig.human(WINDOW)})"] = (
                f"{sent} B", sent <= DAILY_BYTES + WINDOW)
            eio = f.get("eio_s")
            out[f"--background-daily {DAILY}: each job ends ≤ {GOAL_EIO_S} s after its last byte reached mediafs (EIO, no wait)"] = (
                f"{', '.join(f'{x:.2f} s' for x in eio)} (after nginx's last byte: "
                f"{', '.join(f'{x:.2f} s' for x in f.get('eio_after_nginx_s', []))})" if eio
                else "no job ended on its own",
                bool(eio) and len(eio) == len(JOBS) and max(eio) <= GOAL_EIO_S)
            used = f.get("stats", {}).get("background_daily_used")
            again = f.get("daily_after_remount")
            out["--background-daily: the day's count the same after a remount"] = (
                f"{used} B before, {again} B after", used is not None and used == again)
        if self.evict:
            e = self.evict
            out[f"a played film stays 100% cached after background reads of {EVICT_FILES} × the film "
                f"(> 4 × {EVICT_CACHE})"] = (f"{e['film_cached_after']} of {self.film_size} B",
                                             e["film_cached_after"] == self.film_size)
        return out

    def json(self):
        return {"link": self.link, "film_bytes": self.film_size, "film_s": self.film_s, "variants": self.results,
                "evict": self.evict,
                "goals": {k: {"figure": v[0], "status": "PASS" if v[1] else "MISS"} for k, v in self.goals().items()}}
