"""The bench's harness, shared by its scenarios: where data and runs live,
the generated data, nginx and its access log, FUSE mounts that always
unmount, timing, memory, and the Bench, the run's state every scenario
reports into (figures, server logs, errors, notes).

What a scenario measures lives in its own module (bench/scenarios.py lists
them); bench/run.py parses the command line, runs them and reports. Nothing
here imports either. Python 3 standard library only (nginx is started by
integration/nginxprocess.py, which is too).
"""
import os
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

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# The integration suite's helpers (nginx's process, moto, WebDAV servers,
# the RAR writer), shared with the bench.
sys.path.insert(0, os.path.join(REPO, "integration"))
from nginxprocess import NginxProcess  # noqa: E402

ROOT = "/tmp/mediafs-bench"
# The generated data, shared by default; MEDIAFS_BENCH_DATA=DIR gives a run
# data of its own (a scenario whose data changes must not rewrite the files
# another engineer's run is serving).
DATA = os.environ.get("MEDIAFS_BENCH_DATA") or os.path.join(ROOT, "data")
# Engineers sharing a machine share the generated data but each needs a run
# directory of their own (a run starts by emptying it).
WORK = os.environ.get("MEDIAFS_BENCH_RUN") or os.path.join(ROOT, "run")
RESULTS = os.path.join(WORK if os.environ.get("MEDIAFS_BENCH_RUN") else ROOT, "results.json")
MiB = 1 << 20
MB = 1_000_000
TOOLS = ("mediafs", "curl", "rclone")
BUF = 1 * MiB
MOUNT_DEADLINE = 600  # seconds a single mount may live before the watchdog aborts it


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


def drop_caches_but_tools():
    """The page cache dropped, then ffmpeg's and ffprobe's own binaries and
    libraries loaded back (`-version`): dropping them too cost the first
    command after a drop about 0.2-0.3 s here (measured: a cold first 3 s
    through mediafs 0.81 s with them loaded, 1.02 s without), which would
    time the program's loading from this disk, the same for every tool,
    not the reads of the file. A media server's ffmpeg is loaded already."""
    drop_caches()
    for tool in ("ffmpeg", "ffprobe"):
        subprocess.run([tool, "-version"], check=True, stdout=subprocess.DEVNULL, timeout=60)


# -------------------------------------------------------------------- nginx

def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Nginx(NginxProcess):
    FIELDS = ("msec", "method", "uri", "range", "status", "bytes", "conn", "rtime", "proto")

    def __init__(self, root, work):
        # The ports are chosen at start.
        super().__init__(work, os.path.join(work, "nginx.conf"), os.path.join(work, "nginx-error.log"), None)
        self.root, self.work = root, work
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
        super().start(stderr_path=os.path.join(w, "nginx.stderr"))

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


def memory_kib(pid):
    """VmRSS and VmHWM of `pid` in KiB, from /proc (empty once it has exited)."""
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
                                               "scenario": getattr(self.bench, "scenario", None),
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
    """The run's state, handed to every scenario: its options, nginx, the
    tools measured, and what the scenarios found. A scenario that keeps
    figures of its own (and reports them itself) files its object in
    `parts` under its name."""

    def __init__(self, args):
        self.args = args
        self.nginx = None
        self.rss_samples = []
        self.results = {}   # key -> {tool: value}
        self.server = {}    # "scenario/tool" -> summary + entries
        self.errors = []
        self.notes = []
        self.demand = {}
        self.parts = {}     # scenario -> its object with report() (and json()), in the order they ran
        self.ceilings = {}  # machine limits measured in this run (seq scenario)
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
