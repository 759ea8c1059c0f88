#!/usr/bin/env python3
"""mediafs benchmark: mediafs vs curl vs rclone against a local nginx.

Run as root (drop_caches, FUSE mounts):  python3 bench/run.py [--only S] [--skip-rclone] [--size-mib N]

Everything printed is measured in this run; nothing is hard-coded except the
goals. See bench/README.md for what each scenario measures and why.
Python 3 standard library only.
"""
import argparse
import http.client
import json
import os
import random
import resource
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import baseline  # noqa: E402

ROOT = "/tmp/mediafs-bench"
# The generated data, shared by default; MEDIAFS_BENCH_DATA=DIR gives a run
# data of its own (a scenario whose data changes must not rewrite the files
# another engineer's run is serving).
DATA = os.environ.get("MEDIAFS_BENCH_DATA") or os.path.join(ROOT, "data")
# Engineers sharing a machine share the generated data but each needs a run
# directory of their own (a run starts by emptying it).
WORK = os.environ.get("MEDIAFS_BENCH_RUN") or os.path.join(ROOT, "run")
RESULTS = os.path.join(WORK if os.environ.get("MEDIAFS_BENCH_RUN") else ROOT, "results.json")
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MiB = 1 << 20
MB = 1_000_000
SCENARIOS = ("seq", "random", "ffprobe", "seek", "bwlimit", "wan", "scale", "sources", "hls", "mediaserver",
             "archives")
TOOLS = ("mediafs", "curl", "rclone")
BUF = 1 * MiB
RANDOM_READS = 200
RANDOM_SIZE = 4096
MOUNT_DEADLINE = 600  # seconds a single mount may live before the watchdog aborts it
SCALE_NOFILE = 1024  # the daemon's descriptor limit (soft and hard) in the scale scenario
SCALE_READS = 300    # random files read and checked per scale mount


def log(msg):
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def print_table(headers, table):
    """Rows of cells under their headers, each column as wide as its widest cell."""
    widths = [max(len(str(r[i])) for r in table + [headers]) for i in range(len(headers))]
    line = lambda cells: " | ".join(str(c).ljust(w) for c, w in zip(cells, widths))  # noqa: E731
    print(line(headers))
    print("-+-".join("-" * w for w in widths))
    for cells in table:
        print(line(cells))


def run_waited(argv, timeout=300, **kw):
    """subprocess.run(argv, check=True, timeout=timeout, **kw), for a timed
    command: a blocking wait for its exit. subprocess's own timeout waits by
    polling in sleeps that grow to 50 ms, which rounded every timed command
    up to the next 50 ms step (ffprobe's 0.115 s came out 0.115 or 0.165,
    the local file's too, and replay ratios moved by 45%). A timer kills it
    at `timeout`."""
    proc = subprocess.Popen(argv, **kw)
    timer = threading.Timer(timeout, proc.kill)
    timer.start()
    try:
        rc = proc.wait()
    finally:
        timer.cancel()
    if rc != 0:
        if rc == -signal.SIGKILL:
            raise subprocess.TimeoutExpired(argv, timeout)
        raise subprocess.CalledProcessError(rc, argv)


def human(n):
    if n is None:
        return "-"
    for unit, size in (("GiB", 1 << 30), ("MiB", MiB), ("KiB", 1024)):
        if abs(n) >= size:
            return f"{n / size:.2f} {unit}"
    return f"{n} B"


# ---------------------------------------------------------------- test data

def ensure_data(size_mib):
    os.makedirs(DATA, exist_ok=True)
    big = os.path.join(DATA, f"random-{size_mib}MiB.bin")
    if not (os.path.exists(big) and os.path.getsize(big) == size_mib * MiB):
        log(f"generating {big}")
        tmp = big + ".tmp"
        with open(tmp, "wb") as f:
            left = size_mib * MiB
            while left:
                n = min(left, 16 * MiB)
                f.write(os.urandom(n))
                left -= n
        os.rename(tmp, big)
    mp4 = os.path.join(DATA, "video-g60.mp4")
    if not (os.path.exists(mp4) and os.path.getsize(mp4) > 0):
        log("generating video.mp4 (2 min 1280x720, libx264 ultrafast, 2 s GOP, moov at end)")
        tmp = os.path.join(DATA, "video.tmp.mp4")
        subprocess.run(
            ["ffmpeg", "-y", "-v", "error",
             "-f", "lavfi", "-i", "testsrc2=size=1280x720:rate=30:duration=120",
             "-f", "lavfi", "-i", "sine=frequency=440:sample_rate=48000:duration=120",
             # A keyframe every 2 s, as streaming encoders use; with x264's
             # default (250 frames, 8.3 s) a seek must read up to 8 s of video.
             "-c:v", "libx264", "-preset", "ultrafast", "-g", "60", "-pix_fmt", "yuv420p",
             "-c:a", "aac", "-shortest", tmp], check=True)
        os.rename(tmp, mp4)
    mkv = os.path.join(DATA, "video-g60.mkv")
    if not (os.path.exists(mkv) and os.path.getsize(mkv) > 0):
        log("remuxing video.mkv")
        tmp = os.path.join(DATA, "video.tmp.mkv")
        subprocess.run(["ffmpeg", "-y", "-v", "error", "-i", mp4, "-map", "0", "-c", "copy", tmp], check=True)
        os.rename(tmp, mkv)
    return big, mp4, mkv


def read_local(path):
    """Read a local file with 1 MiB reads; returns (bytes, seconds)."""
    total = 0
    t0 = time.perf_counter()
    with open(path, "rb", buffering=0) as f:
        buf = bytearray(BUF)
        view = memoryview(buf)
        while True:
            n = f.readinto(view)
            if not n:
                break
            total += n
    return total, time.perf_counter() - t0


def read_direct(path, depth=4):
    """The disk's ceiling: O_DIRECT 1 MiB reads with `depth` in flight, no
    page cache; returns (bytes, seconds). Threads release the GIL in preadv."""
    import mmap
    size = os.path.getsize(path)
    blocks = (size + BUF - 1) // BUF
    fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
    counts = [0] * depth

    def worker(k):
        buf = mmap.mmap(-1, BUF)  # page-aligned, as O_DIRECT needs
        for b in range(k, blocks, depth):
            counts[k] += os.preadv(fd, [buf], b * BUF)
        buf.close()
    try:
        threads = [threading.Thread(target=worker, args=(k,)) for k in range(depth)]
        t0 = time.perf_counter()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return sum(counts), time.perf_counter() - t0
    finally:
        os.close(fd)


def drop_caches():
    subprocess.run(["sync"], check=True)
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3\n")


# -------------------------------------------------------------------- nginx

def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Nginx:
    FIELDS = ("msec", "method", "uri", "range", "status", "bytes", "conn", "rtime", "proto")

    def __init__(self, root, work):
        self.root, self.work = root, work
        self.proc = None
        self.log_path = os.path.join(work, "access.log")

    def start(self):
        self.port, self.tls_port = free_port(), free_port()
        w = self.work
        # The same tree over https with HTTP/2 (ALPN), as CDNs serve media:
        # a self-signed certificate for 127.0.0.1, made per run; clients
        # trust it with `--cacert` (mediafs, curl) or do not verify (ffmpeg).
        self.cert, key = os.path.join(w, "tls-cert.pem"), os.path.join(w, "tls-key.pem")
        subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                        "-nodes", "-days", "2", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
                        "-keyout", key, "-out", self.cert], check=True, timeout=60,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for d in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"):
            os.makedirs(os.path.join(w, "tmp", d), exist_ok=True)
        conf = f"""
daemon off;
master_process off;
user root;
worker_processes 1;
pid {w}/nginx.pid;
error_log {w}/nginx-error.log warn;
events {{ worker_connections 1024; }}
http {{
    log_format bench '$msec $request_method $uri "$http_range" $status $body_bytes_sent $connection $request_time $server_protocol';
    access_log {self.log_path} bench;
    client_body_temp_path {w}/tmp/client_body;
    proxy_temp_path {w}/tmp/proxy;
    fastcgi_temp_path {w}/tmp/fastcgi;
    uwsgi_temp_path {w}/tmp/uwsgi;
    scgi_temp_path {w}/tmp/scgi;
    sendfile on;
    tcp_nopush on;
    keepalive_requests 100000;
    keepalive_timeout 300s;
    types {{ video/mp4 mp4; video/x-matroska mkv; application/vnd.apple.mpegurl m3u8; video/mp2t ts;
             video/iso.segment m4s; }}
    default_type application/octet-stream;
    server {{
        listen 127.0.0.1:{self.port};
        root {self.root};
        autoindex on;
    }}
    server {{
        listen 127.0.0.1:{self.tls_port} ssl http2;
        ssl_certificate {self.cert};
        ssl_certificate_key {key};
        root {self.root};
        autoindex on;
    }}
}}
"""
        conf_path = os.path.join(w, "nginx.conf")
        with open(conf_path, "w") as f:
            f.write(conf)
        open(self.log_path, "w").close()
        self.proc = subprocess.Popen(["nginx", "-p", w, "-e", os.path.join(w, "nginx-error.log"),
                                      "-c", conf_path],
                                     stdout=subprocess.DEVNULL, stderr=open(os.path.join(w, "nginx.stderr"), "w"))
        deadline = time.time() + 10
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"nginx exited rc={self.proc.returncode}: "
                                   + open(os.path.join(w, "nginx.stderr")).read()[-2000:])
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                    return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError("nginx did not start listening")

    def url(self, path):
        return f"http://127.0.0.1:{self.port}/{os.path.basename(path)}"

    def mark(self):
        return os.path.getsize(self.log_path)

    def since(self, mark, settle=0.3):
        """Access-log entries written after `mark` (waits `settle` s for late lines)."""
        time.sleep(settle)
        with open(self.log_path, "rb") as f:
            f.seek(mark)
            data = f.read().decode(errors="replace")
        out = []
        for line in data.splitlines():
            # msec method uri "range" status bytes conn rtime proto
            try:
                head, rng, tail = line.split('"', 2)
                msec, method, uri = head.split()
                status, nbytes, conn, rtime, proto = tail.split()
                out.append({"msec": float(msec), "method": method, "uri": uri,
                            "range": None if rng in ("", "-") else rng,
                            "status": int(status), "bytes": int(nbytes),
                            "conn": int(conn), "rtime": float(rtime), "proto": proto})
            except ValueError:
                out.append({"raw": line, "bytes": 0})
        return out

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def summarize(entries):
    total = sum(e.get("bytes", 0) for e in entries)
    kinds = {}
    for e in entries:
        k = f"{e.get('method', '?')} {e.get('status', '?')}"
        kinds[k] = kinds.get(k, 0) + 1
    sizes = [e["bytes"] for e in entries if e.get("method") == "GET"]
    return {
        "requests": len(entries),
        "bytes": total,
        "by_kind": kinds,
        "connections": len({e.get("conn") for e in entries}),
        "get_bytes_min": min(sizes) if sizes else None,
        "get_bytes_median": int(statistics.median(sizes)) if sizes else None,
        "get_bytes_max": max(sizes) if sizes else None,
    }


# ------------------------------------------------------------------- mounts

def is_mounted(mp):
    mp = os.path.realpath(mp)
    with open("/proc/self/mountinfo") as f:
        for line in f:
            fields = line.split()
            target = fields[4].replace("\\040", " ").replace("\\011", "\t").replace("\\134", "\\")
            if target == mp:
                return True
    return False


def fuse_unmount(mp, lazy=False):
    return subprocess.run(["fusermount3", "-uz" if lazy else "-u", mp],
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def vm_hwm_kib(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


class Mount:
    """A FUSE daemon started in the foreground; context manager that always unmounts."""

    def __init__(self, tool, argv, mountpoint, logname, bench, nofile=None, exit_wait=15, env=None,
                 deadline=MOUNT_DEADLINE):
        self.tool, self.argv, self.mp, self.bench = tool, argv, mountpoint, bench
        self.deadline = deadline  # seconds the mount may live before the watchdog kills the daemon
        self.env = env  # the daemon's environment (None: this process's)
        self.log_path = os.path.join(WORK, logname)
        self.proc = None
        self.hwm_kib = None
        self.watchdog = None
        self.nofile = nofile
        self.exit_wait = exit_wait  # seconds the daemon may take to exit after unmount
        self.mount_s = None      # from start to the mountpoint in mountinfo
        self.unmount_s = None    # from fusermount3 -u to the daemon's exit

    def __enter__(self):
        if is_mounted(self.mp):
            fuse_unmount(self.mp, lazy=True)
        os.makedirs(self.mp, exist_ok=True)
        self.logf = open(self.log_path, "w")
        limit = None
        if self.nofile:
            limit = lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (self.nofile, self.nofile))  # noqa: E731
        t0 = time.perf_counter()
        self.proc = subprocess.Popen(self.argv, stdout=self.logf, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, start_new_session=True, preexec_fn=limit,
                                     env=self.env)
        deadline = time.time() + 30
        while not is_mounted(self.mp):
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.tool} exited rc={self.proc.returncode} before mounting: "
                                   + self.log_tail())
            if time.time() > deadline:
                self._stop()
                raise RuntimeError(f"{self.tool} did not mount within 30 s: " + self.log_tail())
            time.sleep(0.005)
        self.mount_s = time.perf_counter() - t0
        # A FUSE read can block forever if the daemon hangs; killing the daemon
        # aborts the connection and the blocked read returns ENOTCONN.
        self.watchdog = threading.Timer(self.deadline, self._abort)
        self.watchdog.daemon = True
        self.watchdog.start()
        return self

    def _abort(self):
        log(f"watchdog: {self.tool} mount alive > {self.deadline}s, killing pid {self.proc.pid}")
        try:
            os.kill(self.proc.pid, signal.SIGKILL)
        except OSError:
            pass

    def log_tail(self):
        try:
            self.logf.flush()
            with open(self.log_path, errors="replace") as f:
                return f.read()[-1500:].strip()
        except OSError:
            return ""

    def _stop(self):
        if self.proc.poll() is None:
            self.hwm_kib = vm_hwm_kib(self.proc.pid)
            if self.hwm_kib is not None:
                self.bench.rss_samples.append({"tool": self.tool, "mount": os.path.basename(self.log_path),
                                               "vm_hwm_kib": self.hwm_kib})
        t0 = time.perf_counter()
        for attempt in range(20):
            if not is_mounted(self.mp):
                break
            r = fuse_unmount(self.mp)
            if r.returncode == 0:
                break
            time.sleep(0.25)
        else:
            fuse_unmount(self.mp, lazy=True)
        try:
            self.proc.wait(self.exit_wait)
        except subprocess.TimeoutExpired:
            log(f"{self.tool} pid {self.proc.pid} did not exit {self.exit_wait} s after unmount; terminating")
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.unmount_s = time.perf_counter() - t0
        if is_mounted(self.mp):
            fuse_unmount(self.mp, lazy=True)
        self.logf.close()

    def __exit__(self, *exc):
        if self.watchdog:
            self.watchdog.cancel()
        self._stop()
        return False


# --------------------------------------------------------------- the bench

class Bench:
    def __init__(self, args):
        self.args = args
        self.nginx = None
        self.rss_samples = []
        self.results = {}   # key -> {tool: value}
        self.server = {}    # "scenario/tool" -> summary + entries
        self.errors = []
        self.notes = []
        self.demand = {}
        self.wan_bench = None
        self.sources_bench = None
        self.hls_bench = None
        self.archives_bench = None
        self.mediaserver_bench = None
        self.ceilings = {}  # machine limits measured in this run (seq scenario)
        self.scale_figures = {}  # "scale_<kind>_<n>" -> {tool: figures}
        self.scale_entries = [int(x) for x in args.scale_entries.split(",")]
        self.binary = os.environ.get("MEDIAFS_BIN") or os.path.join(REPO, ".build", "release", "mediafs")
        self.tools = ["mediafs", "curl"]
        if args.skip_rclone:
            self.notes.append("rclone skipped (--skip-rclone)")
        elif shutil.which("rclone") is None:
            self.notes.append("rclone not installed: rclone column skipped (apt-get install -y rclone)")
        else:
            self.tools.append("rclone")

    # -- helpers
    def put(self, key, tool, value):
        self.results.setdefault(key, {})[tool] = value

    def record_server(self, scenario, tool, entries):
        s = summarize(entries)
        s["log"] = entries
        self.server[f"{scenario}/{tool}"] = s
        return s

    def fresh_dir(self, name):
        path = os.path.join(WORK, name)
        shutil.rmtree(path, ignore_errors=True)
        os.makedirs(path)
        return path

    def mountpoint(self, tool):
        return os.path.join(WORK, f"mnt-{tool}")

    def mount(self, tool, sources, cache, tag, extra=(), base=None):
        """`base` ("http://host:port/") points the mount elsewhere than nginx, e.g. at a link emulator."""
        mp = self.mountpoint(tool)
        base = base or f"http://127.0.0.1:{self.nginx.port}/"
        if tool == "mediafs":
            argv = [self.binary, "mount", "-f", "--cache-dir", cache, "--timeout", "30", *extra]
            argv += [base + os.path.basename(s) for s in sources] + [mp]
        else:
            argv = ["rclone", "mount", ":http:", mp, "--http-url", base,
                    "--vfs-cache-mode", "full", "--cache-dir", cache, "--read-only"]
        return Mount(tool, argv, mp, f"{tool}-{tag}.log", self)

    def guarded(self, scenario, tool, fn):
        try:
            fn()
        except Exception as e:  # noqa: BLE001 - a failed scenario must not stop the run
            msg = f"{scenario}/{tool}: {type(e).__name__}: {e}"
            log("ERROR " + msg)
            if os.environ.get("BENCH_TRACE"):
                traceback.print_exc()
            self.errors.append(msg)
            self.put("error:" + scenario, tool, str(e))

    def warm_source(self, path):
        """Make sure nginx serves from the page cache, not the disk, for cold client scenarios."""
        read_local(path)

    # -- scenario 1 + 2: sequential
    def seq(self):
        big = self.big
        size = os.path.getsize(big)
        url = self.nginx.url(big)

        def curl():
            self.warm_source(big)
            m = self.nginx.mark()
            t0 = time.perf_counter()
            subprocess.run(["curl", "-sf", "-o", "/dev/null", url], check=True, timeout=600)
            dt = time.perf_counter() - t0
            s = self.record_server("cold_seq", "curl", self.nginx.since(m))
            self.put("cold_seq_mbps", "curl", size / dt / MB)
            self.put("cold_seq_server_ratio", "curl", s["bytes"] / size)
            # What downloading and keeping the bytes costs here: curl writing
            # the file on the filesystem mediafs caches on.
            # Best of two: writeback of earlier runs' dirty pages slows either.
            stored = os.path.join(self.fresh_dir("curl-store"), "file")
            for _ in range(2):
                subprocess.run(["sync"], check=True)
                t0 = time.perf_counter()
                subprocess.run(["curl", "-sf", "-o", stored, url], check=True, timeout=600)
                mbps = size / (time.perf_counter() - t0) / MB
                self.ceilings["store_mbps"] = max(mbps, self.ceilings.get("store_mbps", 0))
                os.unlink(stored)
            # local references for the warm rows
            _, dt = read_local(big)
            self.put("warm_same_mbps", "curl", size / dt / MB)
            drop_caches()
            _, dt = read_local(big)
            self.put("warm_remount_mbps", "curl", size / dt / MB)
            drop_caches()
            n, dt = read_direct(big)
            self.ceilings["disk_direct_mbps"] = n / dt / MB

        def fs(tool):
            def run():
                self.warm_source(big)
                cache = self.fresh_dir(f"cache-seq-{tool}")
                name = os.path.basename(big)
                m = self.nginx.mark()  # before mounting: mount-time requests count too
                with self.mount(tool, [big], cache, "seq-cold") as mnt:
                    path = os.path.join(mnt.mp, name)
                    n, dt = read_local(path)
                    if n != size:
                        raise RuntimeError(f"cold read returned {n} bytes, expected {size}")
                    s = self.record_server("cold_seq", tool, self.nginx.since(m, settle=0.5))
                    self.put("cold_seq_mbps", tool, size / dt / MB)
                    self.put("cold_seq_server_ratio", tool, s["bytes"] / size)
                    m = self.nginx.mark()
                    n, dt = read_local(path)
                    if n != size:
                        raise RuntimeError(f"warm read returned {n} bytes, expected {size}")
                    self.put("warm_same_mbps", tool, size / dt / MB)
                    if tool == "mediafs":
                        # The first re-read pays one-time costs (dropping the FUSE
                        # page cache for passthrough, or LRU activation); a
                        # second one shows the steady state.
                        _, dt = read_local(path)
                        self.ceilings["warm_same_second_mbps"] = size / dt / MB
                    self.record_server("warm_same", tool, self.nginx.since(m, settle=0))
                drop_caches()
                m = self.nginx.mark()
                with self.mount(tool, [big], cache, "seq-remount") as mnt:
                    n, dt = read_local(os.path.join(mnt.mp, name))
                    if n != size:
                        raise RuntimeError(f"remount read returned {n} bytes, expected {size}")
                    self.put("warm_remount_mbps", tool, size / dt / MB)
                self.record_server("warm_remount", tool, self.nginx.since(m))
                shutil.rmtree(cache, ignore_errors=True)
            return run

        self.guarded("seq", "curl", curl)
        for tool in self.tools:
            if tool != "curl":
                self.guarded("seq", tool, fs(tool))

    # -- scenario 3: random 4 KiB
    def offsets(self, size):
        rng = random.Random(42)
        return [rng.randrange(0, size - RANDOM_SIZE) for _ in range(RANDOM_READS)]

    def random_reads(self):
        big = self.big
        size = os.path.getsize(big)
        offsets = self.offsets(size)
        read_bytes = RANDOM_READS * RANDOM_SIZE

        def store(tool, lat, entries):
            lat_ms = sorted(x * 1000 for x in lat)
            s = self.record_server("random", tool, entries)
            self.put("random_p50_ms", tool, statistics.median(lat_ms))
            self.put("random_p99_ms", tool, lat_ms[min(len(lat_ms) - 1, int(round(0.99 * len(lat_ms))) - 1)])
            self.put("random_server_ratio", tool, s["bytes"] / read_bytes)

        def curl():
            self.warm_source(big)
            m = self.nginx.mark()
            conn = http.client.HTTPConnection("127.0.0.1", self.nginx.port, timeout=30)
            path = "/" + os.path.basename(big)
            lat = []
            try:
                for off in offsets:
                    t0 = time.perf_counter()
                    conn.request("GET", path, headers={"Range": f"bytes={off}-{off + RANDOM_SIZE - 1}"})
                    r = conn.getresponse()
                    body = r.read()
                    lat.append(time.perf_counter() - t0)
                    if r.status != 206 or len(body) != RANDOM_SIZE:
                        raise RuntimeError(f"range GET got {r.status}, {len(body)} bytes")
            finally:
                conn.close()
            store("curl", lat, self.nginx.since(m))

        def fs(tool):
            def run():
                self.warm_source(big)
                cache = self.fresh_dir(f"cache-random-{tool}")
                m = self.nginx.mark()
                with self.mount(tool, [big], cache, "random") as mnt:
                    fd = os.open(os.path.join(mnt.mp, os.path.basename(big)), os.O_RDONLY)
                    lat = []
                    try:
                        for off in offsets:
                            t0 = time.perf_counter()
                            data = os.pread(fd, RANDOM_SIZE, off)
                            lat.append(time.perf_counter() - t0)
                            if len(data) != RANDOM_SIZE:
                                raise RuntimeError(f"pread at {off} returned {len(data)} bytes")
                    finally:
                        os.close(fd)
                store(tool, lat, self.nginx.since(m))
                shutil.rmtree(cache, ignore_errors=True)
            return run

        self.guarded("random", "curl", curl)
        for tool in self.tools:
            if tool != "curl":
                self.guarded("random", tool, fs(tool))

    # -- scenarios 4 + 5: ffprobe / seek, via mount or ffmpeg's own http client
    def media(self, scenario, key, files, argv_for):
        for src in files:
            kind = os.path.splitext(src)[1][1:]
            skey = f"{scenario}_{kind}"

            def curl(src=src, skey=skey):
                self.warm_source(src)
                m = self.nginx.mark()
                t0 = time.perf_counter()
                run_waited(argv_for(self.nginx.url(src)), stdout=subprocess.DEVNULL)
                dt = time.perf_counter() - t0
                s = self.record_server(skey, "curl", self.nginx.since(m))
                self.put(f"{skey}_s", "curl", dt)
                self.put(f"{skey}_bytes", "curl", s["bytes"])

            def fs(tool, src=src, skey=skey):
                def run():
                    self.warm_source(src)
                    cache = self.fresh_dir(f"cache-{skey}-{tool}")
                    m = self.nginx.mark()
                    with self.mount(tool, [src], cache, skey) as mnt:
                        t0 = time.perf_counter()
                        run_waited(argv_for(os.path.join(mnt.mp, os.path.basename(src))),
                                   stdout=subprocess.DEVNULL)
                        dt = time.perf_counter() - t0
                    s = self.record_server(skey, tool, self.nginx.since(m))
                    self.put(f"{skey}_s", tool, dt)
                    self.put(f"{skey}_bytes", tool, s["bytes"])
                    shutil.rmtree(cache, ignore_errors=True)
                return run

            self.guarded(skey, "curl", curl)
            for tool in self.tools:
                if tool != "curl":
                    self.guarded(skey, tool, fs(tool))

    # -- what the readers themselves need, from the local files (no server involved)
    def app_read_bytes(self, argv, path):
        """Bytes the program read() from `path` (strace -y over the local file), or None."""
        if shutil.which("strace") is None:
            return None
        out = os.path.join(WORK, "strace.txt")
        subprocess.run(["strace", "-f", "-qq", "-y", "-e", "trace=read,pread64,preadv", "-e", "signal=none",
                        "-o", out] + argv, check=True, timeout=300,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        total = 0
        with open(out, errors="replace") as f:
            for line in f:
                if f"<{path}>" in line and "=" in line:
                    ret = line.rsplit("=", 1)[1].split()[0]
                    if ret.lstrip("-").isdigit() and int(ret) > 0:
                        total += int(ret)
        return total

    def seek_floor(self, path, seek_s=90.0, dur_s=1.0):
        """Least bytes any reader needs for `-ss 90 -t 1`: the container's own bytes (an mp4's non-mdat
        boxes; an mkv's bytes before the first and after the last packet: header, SeekHead, Cues) + the
        packet span from the last video keyframe at or before 90 s to the last packet before 91 s."""
        import struct
        boxes, off, n = 0, 0, os.path.getsize(path)
        with open(path, "rb") as f:
            while path.endswith(".mp4") and off < n:
                f.seek(off)
                head = f.read(16)
                size, kind = struct.unpack(">I4s", head[:8])
                if size == 1:
                    size = struct.unpack(">Q", head[8:16])[0]
                elif size == 0:
                    size = n - off
                if kind != b"mdat":
                    boxes += size
                off += size
        out = subprocess.run(["ffprobe", "-v", "error", "-show_entries",
                              "packet=stream_index,pts_time,pos,size,flags", "-of", "json", path],
                             check=True, capture_output=True, text=True, timeout=300).stdout
        packets = [p for p in json.loads(out)["packets"] if "pos" in p and "pts_time" in p]
        if not path.endswith(".mp4"):
            boxes = min(int(p["pos"]) for p in packets) + n - max(int(p["pos"]) + int(p["size"]) for p in packets)
        vstream = min(int(p["stream_index"]) for p in packets if "K" in p.get("flags", "")
                      and float(p["pts_time"]) > 0)  # the video stream has keyframes after t=0
        keys = [float(p["pts_time"]) for p in packets if int(p["stream_index"]) == vstream
                and "K" in p.get("flags", "")]
        start_key = max(p for p in keys if p <= seek_s)
        start = min(int(p["pos"]) for p in packets if int(p["stream_index"]) == vstream
                    and float(p["pts_time"]) == start_key)
        end = max(int(p["pos"]) + int(p["size"]) for p in packets
                  if start_key <= float(p["pts_time"]) < seek_s + dur_s)
        gaps = [b - a for a, b in zip(keys, keys[1:])]
        return {"bytes": boxes + (end - start), "non_mdat_bytes": boxes, "span_start": start, "span_end": end,
                "keyframe_before_seek_s": start_key, "keyframe_interval_s": max(gaps) if gaps else None}

    def reader_demand(self, only):
        d = {}
        try:
            if "ffprobe" in only:
                for src in (self.mp4, self.mkv):
                    d[f"ffprobe_{os.path.splitext(src)[1][1:]}_app_read"] = self.app_read_bytes(
                        ["ffprobe", "-v", "error", "-show_format", "-show_streams", src], src)
            if "seek" in only:
                for src in (self.mp4, self.mkv):
                    kind = os.path.splitext(src)[1][1:]
                    d[f"seek_{kind}_app_read"] = self.app_read_bytes(
                        ["ffmpeg", "-nostdin", "-v", "error", "-ss", "90", "-i", src, "-t", "1", "-f", "null", "-"],
                        src)
                    d[f"seek_{kind}_floor"] = self.seek_floor(src)
        except Exception as e:  # noqa: BLE001 - informational only
            self.notes.append(f"reader-demand measurement failed: {type(e).__name__}: {e}")
        self.demand = d

    def ffprobe(self):
        self.media("ffprobe", "ffprobe", [self.mp4, self.mkv],
                   lambda f: ["ffprobe", "-v", "error", "-show_format", "-show_streams", f])

    def seek(self):
        self.media("seek", "seek", [self.mp4, self.mkv],
                   lambda f: ["ffmpeg", "-nostdin", "-v", "error", "-ss", "90", "-i", f, "-t", "1", "-f", "null", "-"])

    # -- scenario 7: --bwlimit (mediafs only)
    def bwlimit(self):
        """The first 32 MiB of the big file, cold, under --bwlimit 8M: the
        rate the reader sees (readahead beyond 32 MiB shares the limit)."""
        want = 32 * MiB

        def run():
            self.warm_source(self.big)
            cache = self.fresh_dir("cache-bwlimit")
            with self.mount("mediafs", [self.big], cache, "bwlimit", extra=["--bwlimit", "8M"]) as mnt:
                path = os.path.join(mnt.mp, os.path.basename(self.big))
                total = 0
                t0 = time.perf_counter()
                with open(path, "rb", buffering=0) as f:
                    while total < want:
                        chunk = f.read(min(BUF, want - total))
                        if not chunk:
                            raise RuntimeError(f"short read at {total}")
                        total += len(chunk)
                self.put("bwlimit_8m_mibps", "mediafs", total / (time.perf_counter() - t0) / MiB)
            shutil.rmtree(cache, ignore_errors=True)

        if os.path.getsize(self.big) < want:
            self.notes.append("bwlimit: the file is under 32 MiB; scenario skipped")
            return
        self.guarded("bwlimit", "mediafs", run)

    # -- WAN rows behind a link emulator (bench/wan.py)
    def wan(self):
        import wan
        self.wan_bench = wan.WanBench(self, quick=self.args.wan_quick)
        self.wan_bench.run()

    def sources(self):
        import sources
        self.sources_bench = sources.SourcesBench(self)
        self.sources_bench.run()

    # -- an HLS VOD through the link emulator (bench/hls.py)
    def hls(self):
        import hls
        self.hls_bench = hls.HlsBench(self)
        self.hls_bench.run()

    # -- a film stored in a ZIP beside the same film plain, through the link emulator (bench/archives.py)
    def archives(self):
        import archives
        self.archives_bench = archives.ArchivesBench(self)
        self.archives_bench.run()

    # -- a player beside a Jellyfin-style library scan through the link emulator (bench/mediaserver.py)
    def mediaserver(self):
        import mediaserver
        self.mediaserver_bench = mediaserver.MediaServerBench(self, quick=self.args.mediaserver_quick)
        self.mediaserver_bench.run()

    # -- scenario 8: many entries (list file and directory listing)
    @staticmethod
    def scale_size(i):
        return 64 + (i * 37) % 2000

    @staticmethod
    def scale_content(i):
        name = f"f{i:06d}.bin\n".encode()
        size = Bench.scale_size(i)
        return (name * (size // len(name) + 1))[:size]

    def scale_data(self, n):
        """`n` small files of distinct sizes and contents in DATA/scale-N/ (kept between runs)."""
        d = os.path.join(DATA, f"scale-{n}")
        done = d + ".done"
        if not os.path.exists(done):
            log(f"generating {n} small files in {d}")
            shutil.rmtree(d, ignore_errors=True)
            os.makedirs(d)
            for i in range(n):
                with open(os.path.join(d, f"f{i:06d}.bin"), "wb") as f:
                    f.write(self.scale_content(i))
            open(done, "w").close()
        return d

    def ls_l(self, path, n, expected_dir=True):
        """`ls -l` of `path`: seconds, and a check that every one of the `n` entries is there with its size."""
        t0 = time.perf_counter()
        done = subprocess.run(["ls", "-l", "--time-style=+%s", path], capture_output=True, text=True,
                              timeout=MOUNT_DEADLINE)
        dt = time.perf_counter() - t0
        errors = done.stderr.splitlines()
        if done.returncode != 0:
            raise RuntimeError(f"ls -l {path} failed after {dt:.0f} s, {len(errors)} errors, first: "
                               + "; ".join(errors[:3]))
        out = done.stdout
        sizes = {}
        for line in out.splitlines()[1:]:
            fields = line.split(None, 6)
            if len(fields) == 7:
                sizes[fields[6]] = int(fields[4])
        wrong = [i for i in range(n) if sizes.get(f"f{i:06d}.bin") != self.scale_size(i)]
        if wrong or len(sizes) != n:
            first = f" (first: f{wrong[0]:06d}.bin)" if wrong else ""
            raise RuntimeError(f"ls -l {path}: {len(sizes)} entries of {n}, {len(wrong)} missing or with a "
                               f"wrong size{first}")
        return dt

    def scale_reads(self, path, n):
        rng = random.Random(n)
        for i in rng.sample(range(n), min(SCALE_READS, n)):
            with open(os.path.join(path, f"f{i:06d}.bin"), "rb") as f:
                if f.read() != self.scale_content(i):
                    raise RuntimeError(f"{path}/f{i:06d}.bin: wrong bytes")

    @staticmethod
    def memory_kib(pid):
        out = {}
        try:
            with open(f"/proc/{pid}/status") as f:
                for line in f:
                    key = line.split(":")[0]
                    if key in ("VmRSS", "VmHWM"):
                        out[key] = int(line.split()[1])
        except OSError:
            pass
        return out

    def scale(self):
        for n in self.scale_entries:
            d = self.scale_data(n)
            for kind in ("list", "listing"):
                key = f"scale_{kind}_{n}"
                self.guarded(key, "mediafs", lambda n=n, d=d, kind=kind, key=key: self.scale_mediafs(n, d, kind, key))
                if kind == "listing" and "rclone" in self.tools:
                    self.guarded(key, "rclone", lambda n=n, d=d, key=key: self.scale_rclone(n, d, key))
            self.guarded(f"scale_list_{n}", "curl", lambda n=n, d=d: self.scale_heads(n, d))

    def scale_heads(self, n, d):
        """The floor under a cold `ls -l` of entries whose sizes nothing gives (a list file; an
        HTML index other than nginx's, which writes each file's length): curl's own multi
        interface sending a HEAD for every entry, 6 at a time on reused connections (as many as
        mediafs's background probes), with nothing else running."""
        name = os.path.basename(d)
        cfg = os.path.join(WORK, f"heads-{n}.cfg")
        with open(cfg, "w") as f:
            for i in range(n):
                f.write(f'url = "http://127.0.0.1:{self.nginx.port}/{name}/f{i:06d}.bin"\noutput = "/dev/null"\n')
        m = self.nginx.mark()
        t0 = time.perf_counter()
        subprocess.run(["curl", "-sf", "--no-progress-meter", "-I", "--parallel", "--parallel-max", "6", "-K", cfg],
                       check=True, timeout=MOUNT_DEADLINE, capture_output=True)
        dt = time.perf_counter() - t0
        heads = len(self.nginx.since(m))
        os.unlink(cfg)
        if heads != n:
            raise RuntimeError(f"curl --parallel sent {heads} HEADs for {n} entries")
        self.put(f"scale_list_{n}_mount_ls_s", "curl", dt)
        self.ceilings[f"scale_heads_{n}_s"] = dt

    def scale_mediafs(self, n, d, kind, key):
        name = os.path.basename(d)
        cache = self.fresh_dir(f"cache-{key}")
        mp = self.mountpoint("mediafs")
        if kind == "list":
            source = os.path.join(WORK, f"{key}.list")
            with open(source, "w") as f:
                for i in range(n):
                    f.write(f"f{i:06d}.bin\thttp://127.0.0.1:{self.nginx.port}/{name}/f{i:06d}.bin\n")
        else:
            source = f"http://127.0.0.1:{self.nginx.port}/{name}/"
        # A list file's entries are the root's names; so are one index's.
        listed = mp
        argv = [self.binary, "mount", "-f", "--cache-dir", cache, "--timeout", "30", source, mp]
        fig = {}

        def requests(since):
            entries = self.nginx.since(since)
            return len(entries), entries

        m = self.nginx.mark()
        with Mount("mediafs", argv, mp, f"mediafs-{key}.log", self, nofile=SCALE_NOFILE, exit_wait=300) as mnt:
            fig["mount_s"] = mnt.mount_s
            fig["mount_requests"], _ = requests(m)
            fig["rss_mounted_kib"] = self.memory_kib(mnt.proc.pid).get("VmRSS")
            m = self.nginx.mark()
            fig["ls_cold_s"] = self.ls_l(listed, n)
            fig["ls_cold_requests"], entries = requests(m)
            self.record_server(key + "_cold_ls", "mediafs", entries)
            mem = self.memory_kib(mnt.proc.pid)
            fig["rss_kib"], fig["hwm_kib"] = mem.get("VmRSS"), mem.get("VmHWM")
            fig["ls_warm_s"] = self.ls_l(listed, n)
            self.scale_reads(listed, n)
            fig["reads_right"] = min(SCALE_READS, n)
            fig["descriptors"] = len(os.listdir(f"/proc/{mnt.proc.pid}/fd"))
        fig["unmount_s"] = mnt.unmount_s
        # Right after the unmount: everything must come from the cache's metadata.
        m = self.nginx.mark()
        with Mount("mediafs", argv, mp, f"mediafs-{key}-remount.log", self, nofile=SCALE_NOFILE,
                   exit_wait=300) as mnt:
            fig["remount_s"] = mnt.mount_s
            fig["ls_remount_s"] = self.ls_l(listed, n)
            fig["ls_remount_requests"], entries = requests(m)
            self.record_server(key + "_remount_ls", "mediafs", entries)
            fig["rss_remount_kib"] = self.memory_kib(mnt.proc.pid).get("VmRSS")
        log_text = open(os.path.join(WORK, f"mediafs-{key}.log"), errors="replace").read()
        if "Too many open files" in log_text or "without caching" in log_text:
            self.notes.append(f"{key}: the daemon log mentions running out of descriptors or caching")
        self.scale_figures.setdefault(key, {})["mediafs"] = fig
        self.put(f"{key}_rss_mib", "mediafs", fig["rss_kib"] / 1024 if fig["rss_kib"] else None)
        self.put(f"{key}_mount_ls_s", "mediafs", fig["mount_s"] + fig["ls_cold_s"])
        self.put(f"{key}_remount_requests", "mediafs", fig["ls_remount_requests"])
        shutil.rmtree(cache, ignore_errors=True)

    def scale_rclone(self, n, d, key):
        name = os.path.basename(d)
        cache = self.fresh_dir(f"cache-{key}-rclone")
        mp = self.mountpoint("rclone")
        argv = ["rclone", "mount", ":http:", mp, "--http-url", f"http://127.0.0.1:{self.nginx.port}/{name}/",
                "--vfs-cache-mode", "full", "--cache-dir", cache, "--read-only"]
        fig = {}
        for phase in ("", "_remount"):
            m = self.nginx.mark()
            with Mount("rclone", argv, mp, f"rclone-{key}{phase}.log", self, exit_wait=60) as mnt:
                if not phase:
                    fig["mount_s"] = mnt.mount_s
                fig[f"ls{phase or '_cold'}_s"] = self.ls_l(mp, n)
                count = len(self.nginx.since(m))
                fig[f"ls{phase or '_cold'}_requests"] = count
                mem = self.memory_kib(mnt.proc.pid)
                if not phase:
                    fig["rss_kib"], fig["hwm_kib"] = mem.get("VmRSS"), mem.get("VmHWM")
                    self.scale_reads(mp, n)
                    fig["reads_right"] = min(SCALE_READS, n)
        self.scale_figures.setdefault(key, {})["rclone"] = fig
        self.put(f"{key}_rss_mib", "rclone", fig["rss_kib"] / 1024 if fig["rss_kib"] else None)
        self.put(f"{key}_mount_ls_s", "rclone", fig["mount_s"] + fig["ls_cold_s"])
        self.put(f"{key}_remount_requests", "rclone", fig["ls_remount_requests"])
        shutil.rmtree(cache, ignore_errors=True)

    def report_scale(self):
        if not self.scale_figures:
            return
        cols = [("mount s", "mount_s", "{:.2f}"), ("mount req", "mount_requests", "{}"),
                ("ls -l cold s", "ls_cold_s", "{:.2f}"), ("cold req", "ls_cold_requests", "{}"),
                ("RSS MiB", "rss_kib", "mib"), ("HWM MiB", "hwm_kib", "mib"),
                ("RSS mounted MiB", "rss_mounted_kib", "mib"), ("ls -l warm s", "ls_warm_s", "{:.2f}"),
                ("unmount s", "unmount_s", "{:.2f}"), ("ls -l remount s", "ls_remount_s", "{:.2f}"),
                ("remount req", "ls_remount_requests", "{}"), ("reads right", "reads_right", "{}"),
                ("fds", "descriptors", "{}")]
        headers = ["scale", "tool"] + [c[0] for c in cols]
        table = []
        for key, tools in self.scale_figures.items():
            for tool, fig in tools.items():
                cells = [key, tool]
                for _, k, fmt in cols:
                    x = fig.get(k)
                    cells.append("-" if x is None else f"{x / 1024:.1f}" if fmt == "mib" else fmt.format(x))
                table.append(cells)
        widths = [max(len(str(r[i])) for r in table + [headers]) for i in range(len(headers))]
        line = lambda cells: " | ".join(str(c).ljust(w) for c, w in zip(cells, widths))  # noqa: E731
        print()
        print(f"scale (daemon under ulimit -n {SCALE_NOFILE} for mediafs; RSS = VmRSS after the cold ls -l; "
              f"remount = mounted again right after the unmount, same cache):")
        print(line(headers))
        print("-+-".join("-" * w for w in widths))
        for cells in table:
            print(line(cells))
        for key, tools in self.scale_figures.items():
            mf, rc = tools.get("mediafs"), tools.get("rclone")
            if mf and mf.get("rss_kib") and mf.get("rss_mounted_kib"):
                n = int(key.rsplit("_", 1)[1])
                print(f"  {key}: {mf['rss_kib'] * 1024 / n:.0f} B of RSS per entry after ls -l, "
                      f"{mf['rss_mounted_kib'] * 1024 / n:.0f} B mounted")
            if mf and rc:
                a, b = mf["mount_s"] + mf["ls_cold_s"], rc["mount_s"] + rc["ls_cold_s"]
                print(f"  {key}: mount + cold ls -l, mediafs/rclone = {a:.2f}/{b:.2f} s = {a / b:.2f}×")

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
        unknown = only - set(SCENARIOS)
        if unknown:
            sys.exit(f"unknown scenario(s) {sorted(unknown)}; choose from {', '.join(SCENARIOS)}")
        self.nginx = Nginx(DATA, WORK)
        started = time.time()
        try:
            self.nginx.start()
            log(f"nginx on 127.0.0.1:{self.nginx.port}, tools: {', '.join(self.tools)}")
            for name, fn in (("seq", self.seq), ("random", self.random_reads),
                             ("ffprobe", self.ffprobe), ("seek", self.seek), ("bwlimit", self.bwlimit),
                             ("wan", self.wan), ("scale", self.scale), ("sources", self.sources),
                             ("hls", self.hls), ("mediaserver", self.mediaserver), ("archives", self.archives)):
                if name in only:
                    log(f"scenario {name}")
                    fn()
        finally:
            self.nginx.stop()
        self.reader_demand(only)
        for tool in ("mediafs", "rclone"):
            hw = [s["vm_hwm_kib"] for s in self.rss_samples if s["tool"] == tool]
            if hw:
                self.put("peak_rss_mib", tool, max(hw) / 1024)
        self.report(time.time() - started)

    def rows(self):
        size = os.path.getsize(self.big)
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

    def build_info(self):
        """Which build was measured: repo HEAD (+dirty) and the binary's mtime."""
        try:
            head = subprocess.run(["git", "-C", REPO, "describe", "--always", "--dirty"],
                                  capture_output=True, text=True, timeout=10).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            head = "?"
        mtime = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(os.path.getmtime(self.binary)))
        return f"{self.binary} (built {mtime}, tree {head or '?'})"

    def failed_for(self, key, tool):
        """Did the scenario behind this row raise for this tool?"""
        if key.startswith(("cold_seq", "warm_")):
            scen = "seq"
        elif key.startswith("random"):
            scen = "random"
        elif key.startswith(("ffprobe_", "seek_")):
            scen = "_".join(key.split("_")[:2])
        elif key.startswith("bwlimit"):
            scen = "bwlimit"
        elif key.startswith("scale_"):
            scen = "_".join(key.split("_")[:3])
        else:
            return False
        return tool in self.results.get("error:" + scen, {})

    def fmt(self, x, fmt):
        if x is None:
            return "-"
        if fmt == "B":
            return human(x)
        return fmt.format(x)

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
        if self.wan_bench:
            self.wan_bench.report()
        self.report_scale()
        if self.sources_bench:
            self.sources_bench.report()
        if self.hls_bench:
            self.hls_bench.report()
        if self.mediaserver_bench:
            self.mediaserver_bench.report()
        if self.archives_bench:
            self.archives_bench.report()
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
                    print(f"  note: with this file no reader can meet the ≤4 MiB seek goal (GOP too long)")
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
            "random_offsets": self.offsets(size),
            "reader_demand": self.demand,
            "ceilings": self.ceilings,
            "wan": self.wan_bench.json() if self.wan_bench else None,
            "sources": self.sources_bench.json() if self.sources_bench else None,
            "hls": self.hls_bench.json() if self.hls_bench else None,
            "mediaserver": self.mediaserver_bench.json() if self.mediaserver_bench else None,
            "archives": self.archives_bench.json() if self.archives_bench else None,
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
    if not args.hls_transports or set(args.hls_transports.split(",")) - {"http", "h2"}:
        p.error("--hls-transports takes http, h2 or both")
    Bench(args).run()


if __name__ == "__main__":
    main()
