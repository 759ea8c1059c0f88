"""Fixtures for the mediafs integration suite.

- `served`: generated test data (cached in /tmp/mediafs-testdata) behind an
  nginx on 127.0.0.1 whose access log records each request's method, path,
  Range header, status and body bytes sent, so tests can count requests.
- `mount`: a factory that runs `mediafs mount -f` and unmounts everything it
  mounted, and stops every process it started by pid, whatever happens.
- `srv`: an in-process FaultServer (faultserver.py) of the test's own.

Mount tests skip loudly when /dev/fuse or fusermount3 is unusable.
"""

import fcntl
import hashlib
import inspect
import os
import pwd
import random
import shutil
import stat
import struct
import subprocess
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pytest

import harness
from faultserver import FaultServer
from nginxprocess import NginxProcess

DATA_ROOT = Path(os.environ.get("MEDIAFS_TESTDATA", "/tmp/mediafs-testdata"))
DATA_VERSION = "v1"
BIG_SIZE = 256 * 1024 * 1024
SMALL_SIZE = 123_457
MP4_SECONDS = 12
SEED = 20240601

FUSE_PROBLEM = harness.fuse_unusable_reason()
BANNER = "!" * 78


def pytest_configure(config):
    config.addinivalue_line("markers", "stress: a stress or soak test; `make test` runs it for seconds, "
                            "`make stress` for minutes (its length from the environment)")
    config.addinivalue_line("markers", "alone(reason): cannot run beside other tests (the reason says why); "
                            "`make test` runs it after the others, one at a time")


# Tests that change a machine-wide setting share one xdist worker: the owner
# tests open /dev/fuse to all and add user_allow_other to /etc/fuse.conf
# for as long as a worker's session lasts (unprivileged_fuse), so a second
# worker would wait on their lock until the first one's session ended; the
# fstab tests put a mediafs link in /usr/local/bin and take it away after
# (mediafs_in_path), which would pull it from under another's mount.
GROUPS = {"unprivileged_fuse": "owners", "actor": "owners", "other_user": "owners",
          "mediafs_in_path": "usr-local-bin"}


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook reads the groups
def pytest_collection_modifyitems(config, items):
    for item in items:
        group = next((GROUPS[name] for name in item.fixturenames if name in GROUPS), None)
        if group is not None:
            item.add_marker(pytest.mark.xdist_group(group))


def pytest_report_header(config):
    lines = [f"mediafs binary: {harness.MEDIAFS_BIN}"
             + ("" if harness.MEDIAFS_BIN.exists() else "  (MISSING: run `make build`)")]
    if FUSE_PROBLEM:
        lines += [BANNER, f"FUSE UNUSABLE: {FUSE_PROBLEM}", "ALL MOUNT TESTS WILL BE SKIPPED", BANNER]
    return lines


def pytest_terminal_summary(terminalreporter):
    if FUSE_PROBLEM:
        terminalreporter.write_line(BANNER)
        terminalreporter.write_line(f"MOUNT TESTS WERE SKIPPED: {FUSE_PROBLEM}")
        terminalreporter.write_line(BANNER)


# ---------------------------------------------------------------- test data

@dataclass(frozen=True)
class DataFile:
    rel: str       # path under the served root, unencoded
    kind: str      # "random", "mp4" or "empty"
    size: int = 0  # for "random"
    mtime: int = 0


DATA_FILES = [
    DataFile("big.bin", "random", BIG_SIZE, 1_600_000_000),
    DataFile("small.bin", "random", SMALL_SIZE, 1_500_000_000),
    DataFile("sample.mp4", "mp4", 0, 1_400_000_000),
    DataFile("empty.bin", "empty", 0, 1_300_000_000),
    DataFile("hello world.bin", "random", 4_000, 1_200_000_000),
    DataFile("café.bin", "random", 5_000, 1_200_000_000),
    DataFile("a/dup.bin", "random", 6_000, 1_200_000_000),
    DataFile("b/dup.bin", "random", 7_000, 1_200_000_000),
]


def _write_random(path, size, seed):
    rng = random.Random(seed)
    chunk = 16 * 1024 * 1024
    with open(path, "wb") as f:
        left = size
        while left:
            n = min(chunk, left)
            f.write(rng.randbytes(n))
            left -= n


def _mp4_top_level_boxes(path):
    boxes = []
    with open(path, "rb") as f:
        while True:
            header = f.read(8)
            if len(header) < 8:
                return boxes
            size, kind = struct.unpack(">I4s", header)
            if size == 1:
                size = struct.unpack(">Q", f.read(8))[0]
                f.seek(size - 16, 1)
            else:
                f.seek(size - 8, 1)
            boxes.append(kind.decode("latin-1"))
            if size == 0:
                return boxes


def _video_codec():
    encoders = subprocess.run(["ffmpeg", "-hide_banner", "-encoders"], capture_output=True, text=True).stdout
    return ["libx264", "-preset", "ultrafast", "-pix_fmt", "yuv420p"] if " libx264 " in encoders else ["mpeg4"]


def _write_mp4(path):
    # ffmpeg's default mp4 layout writes moov after mdat: the case a player
    # must seek to the end for, which is what the cache has to get right.
    subprocess.run(
        ["ffmpeg", "-hide_banner", "-loglevel", "error", "-y",
         "-f", "lavfi", "-i", f"testsrc=duration={MP4_SECONDS}:size=320x240:rate=25",
         "-f", "lavfi", "-i", f"sine=frequency=440:duration={MP4_SECONDS}",
         "-c:v", *_video_codec(), "-c:a", "aac", "-shortest", "-f", "mp4", str(path)],
        check=True)
    boxes = _mp4_top_level_boxes(path)
    assert boxes.index("mdat") < boxes.index("moov"), f"expected moov at the end, got {boxes}"


def _generate(root):
    for i, df in enumerate(DATA_FILES):
        dest = root / df.rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        tmp = dest.with_name(dest.name + ".part")
        if df.kind == "random":
            _write_random(tmp, df.size, SEED + i)
        elif df.kind == "mp4":
            _write_mp4(tmp)
        else:
            tmp.write_bytes(b"")
        os.utime(tmp, (df.mtime, df.mtime))
        os.replace(tmp, dest)


def _made(base, make):
    """base/files, filled by make() unless base/complete says it was.
    Workers running at once (pytest-xdist) take a lock: one makes, the
    others wait for its stamp."""
    root, stamp = base / "files", base / "complete"
    DATA_ROOT.mkdir(parents=True, exist_ok=True)
    with open(DATA_ROOT / f"{base.name}.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not stamp.exists():
            if base.exists():
                shutil.rmtree(base)
            root.mkdir(parents=True)
            make(root)
            stamp.write_text("ok\n")
    return root


@pytest.fixture(scope="session")
def data_root():
    """The served directory; generated once, reused while the stamp is there."""
    return _made(DATA_ROOT / DATA_VERSION, _generate)


def made_once(name, make):
    """A directory `make(path)` fills, made once for every worker and every
    run of the suite and kept under DATA_ROOT: media ffmpeg takes seconds
    to encode is not encoded again by each of make test's workers. Keyed
    by the source of the module that defines `make`, so a change to it
    makes the media anew."""
    source = Path(inspect.getsourcefile(make)).read_bytes()
    return _made(DATA_ROOT / f"{name}-{hashlib.sha256(source).hexdigest()[:16]}", make)


# ---------------------------------------------------------------- nginx

@dataclass(frozen=True)
class LogEntry:
    method: str
    uri: str
    range: str   # "" when the request had no Range header
    status: int
    sent: int

    def span(self):
        """(start, end) of the body bytes sent, end exclusive."""
        start = 0
        if self.range.startswith("bytes=") and "," not in self.range:
            first = self.range[len("bytes="):].split("-", 1)[0]
            start = int(first) if first else 0
        return start, start + self.sent


class Nginx(NginxProcess):
    """nginx in the foreground (daemon off, no master), stopped by pid
    (nginxprocess.py starts and stops it)."""

    def __init__(self, workdir, root, autoindex=False):
        workdir = Path(workdir)
        super().__init__(workdir, workdir / "nginx.conf", workdir / "error.log", harness.free_port())
        self.root = Path(root)
        self.autoindex = autoindex
        self.access_log = self.workdir / "access.log"
        self._write_config()

    @property
    def base_url(self):
        return f"http://127.0.0.1:{self.port}"

    def url(self, rel):
        return f"{self.base_url}/{urllib.parse.quote(rel)}"

    def _write_config(self):
        built = subprocess.run(["nginx", "-V"], capture_output=True, text=True).stderr
        temp_paths = "\n".join(
            f"    {name}_temp_path {self.workdir}/temp/{name};"
            for name, module in (("client_body", None), ("proxy", "proxy"), ("fastcgi", "fastcgi"),
                                 ("uwsgi", "uwsgi"), ("scgi", "scgi"))
            if module is None or f"--without-http_{module}_module" not in built)
        (self.workdir / "temp").mkdir(parents=True, exist_ok=True)
        user = "user root;" if os.geteuid() == 0 else ""
        self.conf.write_text(f"""\
{user}
daemon off;
master_process off;
worker_processes 1;
pid {self.workdir}/nginx.pid;
error_log {self.error_log} info;
events {{ worker_connections 512; }}
http {{
    default_type application/octet-stream;
    log_format mediafs "$request_method\\t$uri\\t$http_range\\t$status\\t$body_bytes_sent";
    access_log {self.access_log} mediafs;
{temp_paths}
    sendfile on;
    keepalive_timeout 120s;
    keepalive_requests 100000;
    server {{
        listen 127.0.0.1:{self.port};
        root {self.root};
        location / {{ {"autoindex on; " if self.autoindex else ""}}}
    }}
}}
""")

    # A request of the log's own, left out of what log() returns.
    SYNC_URI = "/.mediafs-log-sync"

    def log(self):
        """Requests logged since the last clear_log(), every request answered
        before the call among them. nginx writes a request's line after its
        last byte went out, so a client can be done before the line is (a
        test read an empty log so, 1 run in 20): log() first asks a request
        of its own and waits for its line. nginx's one worker handles events
        in turn, and a request whose last byte a client already has is
        logged in the same turn, so every such line comes before it."""
        self._sync()
        if not self.access_log.exists():
            return []
        entries = []
        for line in self.access_log.read_text(errors="replace").splitlines():
            method, uri, rng, status, sent = line.split("\t")
            if not uri.startswith(self.SYNC_URI):
                entries.append(LogEntry(method, uri, "" if rng == "-" else rng, int(status), int(sent)))
        return entries

    def _sync(self):
        """A request of its own, and its line in the log (bounded); nothing
        when nginx does not answer (stopped by the test)."""
        if not self.running:
            return
        self._syncs = getattr(self, "_syncs", 0) + 1
        uri = f"{self.SYNC_URI}/{self._syncs}"
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        try:
            opener.open(self.base_url + uri, timeout=5).close()
        except urllib.error.HTTPError:
            pass  # the 404 is the answer
        except OSError:
            return
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            if self.access_log.exists() and f"\t{uri}\t" in self.access_log.read_text(errors="replace"):
                return
            time.sleep(0.005)

    def wait_log(self, predicate, what, timeout=harness.WAIT):
        """The requests logged, once predicate(entries) holds: nginx writes
        a request's line after its last byte went out, so a client can be
        done (a read answered, a process exited) before the line is."""
        return harness.wait_until(lambda: es if predicate(es := self.log()) else None,
                                  f"nginx's log to show {what}", timeout=timeout)

    def clear_log(self):
        # nginx appends (O_APPEND), so truncating in place is safe.
        if self.access_log.exists():
            os.truncate(self.access_log, 0)

    def ready(self):
        """Running again if a test stopped it, with an empty log."""
        if not self.running:
            self.stop()
            self.start()
        self.clear_log()
        return self

    @classmethod
    def serving(cls, workdir, root, autoindex=False):
        """A started nginx for a fixture to yield; stopped whatever happens."""
        server = cls(workdir, root, autoindex)
        server.start()
        try:
            yield server
        finally:
            server.stop()

    def wait_quiet(self, quiet=1.0, timeout=30.0):
        """Wait until the access log stops growing (transfers cut by an
        unmount are logged when nginx notices the closed connection)."""
        deadline = time.monotonic() + timeout
        last, since = None, time.monotonic()
        while time.monotonic() < deadline:
            size = self.access_log.stat().st_size if self.access_log.exists() else 0
            if size != last:
                last, since = size, time.monotonic()
            elif time.monotonic() - since >= quiet:
                return
            time.sleep(0.1)

    def bytes_sent(self, uri=None):
        return sum(e.sent for e in self.log() if uri is None or e.uri == uri)


@pytest.fixture(scope="session")
def nginx(tmp_path_factory, data_root):
    if shutil.which("nginx") is None:
        pytest.fail("nginx not found: run scripts/install-deps.sh")
    yield from Nginx.serving(tmp_path_factory.mktemp("nginx"), data_root)


@pytest.fixture
def server(nginx):
    """The session nginx, running (a test may have stopped it), with an empty log."""
    yield nginx.ready()
    if not nginx.running:
        nginx.stop()
        nginx.start()


@pytest.fixture
def srv():
    """An in-process FaultServer of this test's own, stopped at teardown."""
    server = FaultServer().start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def source(data_root):
    """Path of a served file's original, by its served path."""
    return lambda rel: data_root / rel


# ---------------------------------------------------------------- mediafs

def unmount_all(mounts):
    """Unmounts every mount a fixture made, newest first, whatever fails."""
    problems = []
    for m in reversed(mounts):
        try:
            m.unmount()
        except Exception as e:  # keep unmounting the others
            problems.append(f"{m.mountpoint}: {e!r}")
        if harness.is_mounted(m.mountpoint):
            problems.append(f"{m.mountpoint} still mounted after teardown")
    if problems:
        pytest.fail("teardown: " + "; ".join(problems))


@pytest.fixture(scope="session")
def mediafs_bin():
    if not harness.MEDIAFS_BIN.exists():
        pytest.fail(f"{harness.MEDIAFS_BIN} does not exist: run `make build` (or set MEDIAFS_BIN)")
    return harness.MEDIAFS_BIN


@pytest.fixture(scope="session")
def fuse():
    if FUSE_PROBLEM:
        print(f"\n{BANNER}\nSKIPPING MOUNT TEST: {FUSE_PROBLEM}\n{BANNER}")
        pytest.skip(f"FUSE unusable: {FUSE_PROBLEM}")


@pytest.fixture(scope="session", autouse=True)
def _no_leftovers(tmp_path_factory):
    """Last line of defence: whatever a test left mounted or running under
    this session's temp dir is unmounted and stopped by pid."""
    base = Path(os.path.realpath(tmp_path_factory.getbasetemp()))
    yield
    for mp in reversed(harness.mount_points()):
        if mp.startswith(str(base) + "/"):
            harness.fusermount_unmount(mp)
    for pid in harness.mediafs_pids(under=base):
        harness.stop_pid(pid, timeout=0)


@pytest.fixture
def mount(fuse, mediafs_bin, tmp_path):
    """mount(*sources, extra=(), cache_dir=None, mountpoint=None) -> harness.Mount.

    Each call gets a fresh mount point and, unless given one, a fresh cache
    dir. Everything mounted is unmounted at teardown."""
    mounts = []
    counter = iter(range(1_000_000))

    def make(*sources, extra=(), cache_dir=None, mountpoint=None):
        n = next(counter)
        if mountpoint is None:
            mountpoint = tmp_path / f"mnt{n}"
            mountpoint.mkdir()
        if cache_dir is None:
            cache_dir = tmp_path / f"cache{n}"
        env = dict(os.environ, XDG_CACHE_HOME=str(tmp_path / "xdg-cache"))
        if os.environ.get("MEDIAFS_TEST_DEBUG"):
            extra = [*extra, "-d"]
        try:
            m = harness.start_mount([*extra, *sources], mountpoint, cache_dir,
                                    tmp_path / f"mediafs{n}.stderr", env=env)
        except RuntimeError as e:
            pytest.fail(str(e))
        mounts.append(m)
        return m

    yield make
    unmount_all(mounts)


# ---------------------------------------------------------------- owners who are not root

OWNER_LOCK = Path("/tmp/mediafs-owner-tests.lock")
FUSE_CONF = Path("/etc/fuse.conf")


def _replace_text(path, text):
    tmp = path.with_name(path.name + ".mediafs-tests")
    tmp.write_text(text)
    os.chmod(tmp, 0o644)
    os.replace(tmp, path)


@pytest.fixture(scope="session")
def unprivileged_fuse(fuse):
    """The test users, and FUSE usable by them as on a stock Debian:
    /dev/fuse open to all (udev's 0666) and `user_allow_other` in
    /etc/fuse.conf. Both are put back at the end of the session; a lock
    keeps another test session from putting them back under this one."""
    users = {name: harness.ensure_user(name) for name in (harness.OWNER_USER, harness.OTHER_USER)}
    lock = open(OWNER_LOCK, "a")
    fcntl.flock(lock, fcntl.LOCK_EX)
    dev_mode = stat.S_IMODE(os.stat("/dev/fuse").st_mode)
    conf_text = FUSE_CONF.read_text() if FUSE_CONF.exists() else None
    allowed = conf_text is not None and "user_allow_other" in (line.strip() for line in conf_text.splitlines())
    try:
        os.chmod("/dev/fuse", dev_mode | 0o666)
        if not allowed:
            before = conf_text or ""
            _replace_text(FUSE_CONF, before + ("\n" if before and not before.endswith("\n") else "")
                          + "user_allow_other\n")
        yield users
    finally:
        os.chmod("/dev/fuse", dev_mode)
        if not allowed:
            if conf_text is None:
                FUSE_CONF.unlink(missing_ok=True)
            else:
                _replace_text(FUSE_CONF, conf_text)
        fcntl.flock(lock, fcntl.LOCK_UN)
        lock.close()


@pytest.fixture(params=["root", "owner"])
def actor(request, fuse):
    """Who mounts and administers: root, or an unprivileged owner."""
    if request.param == "root":
        return harness.Actor()
    request.getfixturevalue("unprivileged_fuse")
    return harness.Actor(harness.OWNER_USER)


@pytest.fixture
def other_user(unprivileged_fuse):
    """A user who neither mounted nor is root."""
    return harness.Actor(harness.OTHER_USER)


@pytest.fixture
def shared_tmp():
    """A directory under /tmp that every user can traverse (pytest's own
    are 0700). At teardown whatever is mounted under it is unmounted, any
    mediafs started under it stopped by pid, and it is removed."""
    d = Path(tempfile.mkdtemp(prefix="mediafs-owners-", dir="/tmp"))
    os.chmod(d, 0o755)
    try:
        yield d
    finally:
        for mp in reversed(harness.mount_points()):
            if mp.startswith(str(d) + "/"):
                harness.fusermount_unmount(mp)
        for pid in harness.mediafs_pids(under=d):
            harness.stop_pid(pid, timeout=0)
        shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def mount_as(fuse, mediafs_bin, shared_tmp):
    """mount_as(actor, *sources, extra=()) -> harness.Mount, made by that
    actor in a directory of its own (mount point and cache dir its own, as
    the cache lock requires). Everything mounted is unmounted at teardown."""
    mounts = []
    counter = iter(range(1_000_000))

    def make(actor, *sources, extra=()):
        home = shared_tmp / f"home{next(counter)}"
        home.mkdir()
        mountpoint = home / "mnt"
        mountpoint.mkdir()
        if actor.user is not None:
            entry = pwd.getpwnam(actor.user)
            for path in (home, mountpoint):
                os.chown(path, entry.pw_uid, entry.pw_gid)
        actor.home = home
        try:
            m = harness.start_mount([*extra, *sources], mountpoint, home / "cache", shared_tmp / f"{home.name}.stderr",
                                    env=dict(actor.env(), XDG_CACHE_HOME=str(home / "xdg-cache")), user=actor.user)
        except RuntimeError as e:
            pytest.fail(str(e))
        mounts.append(m)
        return m

    yield make
    unmount_all(mounts)
