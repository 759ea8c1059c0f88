"""Plumbing for the mediafs integration suite: where the binary is, whether
FUSE is usable, what is mounted, and how to stop a process by its pid; and
the helpers the test files share (test data, reads, commands, xattrs,
waiting).

Next to nothing here asserts; the fixtures in conftest.py and the tests do.
The waiting helpers fail the test (pytest.fail) when a bound runs out, and
mount_one checks that the mounted file has the served size.
"""

import json
import mmap
import os
import pwd
import random
import shutil
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
MEDIAFS_BIN = Path(os.environ.get("MEDIAFS_BIN", REPO / ".build" / "release" / "mediafs"))

# Generous bounds that only stop a broken build from hanging the suite.
MOUNT_TIMEOUT = 20.0
EXIT_TIMEOUT = 10.0
KILL_TIMEOUT = 5.0
WAIT = 30.0            # upper bound for anything asynchronous
READ_DEADLINE = 60.0   # a read still blocked after this fails the test
XATTR_PREFIX = "user.mediafs."


def fuse_unusable_reason():
    """Why mount tests cannot run here, or None when they can."""
    if shutil.which("fusermount3") is None:
        return "fusermount3 not found (apt-get install fuse3)"
    try:
        fd = os.open("/dev/fuse", os.O_RDWR)
    except OSError as e:
        return f"/dev/fuse is not usable: {e.strerror}"
    os.close(fd)
    return None


def _unescape_mountinfo(field):
    # The kernel writes space, tab, newline and backslash as \ooo.
    out, i = [], 0
    while i < len(field):
        if field[i] == "\\" and len(field[i + 1:i + 4]) == 3 and field[i + 1:i + 4].isdigit():
            out.append(chr(int(field[i + 1:i + 4], 8)))
            i += 4
        else:
            out.append(field[i])
            i += 1
    return "".join(out)


def mount_points():
    """Mount points listed in /proc/self/mountinfo, in order, duplicates kept."""
    with open("/proc/self/mountinfo", encoding="utf-8", errors="surrogateescape") as f:
        return [_unescape_mountinfo(line.split(" ")[4]) for line in f]


def mount_count(path):
    target = os.path.realpath(path)
    return sum(1 for mp in mount_points() if mp == target)


def is_mounted(path):
    return mount_count(path) > 0


def fusermount_unmount(path):
    """Unmount path: politely a few times (a reader may still be closing),
    then lazily. Returns True when nothing is mounted there any more."""
    for _ in range(5):
        if not is_mounted(path):
            return True
        subprocess.run(["fusermount3", "-u", str(path)], capture_output=True, timeout=30)
        if not is_mounted(path):
            return True
        time.sleep(0.3)
    while is_mounted(path):
        r = subprocess.run(["fusermount3", "-uz", str(path)], capture_output=True, timeout=30)
        if r.returncode != 0:
            break
    return not is_mounted(path)


def pid_alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            # A zombie has exited; only its parent's wait is missing.
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError):  # gone before the open, or before the read
        return False


def wait_pids_gone(pids, timeout=EXIT_TIMEOUT):
    """Wait up to timeout for every pid to exit (see pid_alive)."""
    deadline = time.monotonic() + timeout
    while any(map(pid_alive, pids)) and time.monotonic() < deadline:
        time.sleep(0.05)


def stop_pid(pid, timeout=EXIT_TIMEOUT):
    """Wait for pid to exit, then TERM, then KILL. Works for processes that
    are not our children (daemons), which Popen.wait cannot wait for."""
    for sig, wait in ((None, timeout), (signal.SIGTERM, KILL_TIMEOUT), (signal.SIGKILL, KILL_TIMEOUT)):
        if sig is not None:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                return
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            if not pid_alive(pid):
                return
            time.sleep(0.05)


def stop_popen(proc, timeout=EXIT_TIMEOUT):
    """Like stop_pid, for our own child, and reaps it. Returns its exit status."""
    for sig, wait in ((None, timeout), (signal.SIGTERM, KILL_TIMEOUT), (signal.SIGKILL, KILL_TIMEOUT)):
        if sig is not None and proc.poll() is None:
            proc.send_signal(sig)
        try:
            return proc.wait(wait)
        except subprocess.TimeoutExpired:
            continue
    return proc.wait()


def cmdline(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            raw = f.read()
    except OSError:
        return []
    return [a.decode("utf-8", "surrogateescape") for a in raw.split(b"\0") if a]


def mediafs_pids(*, with_arg=None, under=None):
    """Pids of live mediafs processes whose arguments include with_arg, or any
    argument under the directory `under`."""
    me = os.getpid()
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == me:
            continue
        args = cmdline(int(entry))
        if not args or os.path.basename(args[0]) != "mediafs" or not pid_alive(int(entry)):
            continue
        if with_arg is not None and with_arg not in args:
            continue
        if under is not None and not any(a.startswith(str(under) + "/") for a in args):
            continue
        pids.append(int(entry))
    return pids


class Mount:
    """A running `mediafs mount -f`. unmount() is safe to call twice."""

    def __init__(self, mountpoint, cache_dir, proc, stderr_path, args):
        self.mountpoint = Path(mountpoint)
        self.cache_dir = Path(cache_dir)
        self.proc = proc
        self.stderr_path = Path(stderr_path)
        self.args = args
        self.returncode = None

    @property
    def pid(self):
        return self.proc.pid

    def path(self, name):
        return self.mountpoint / name

    def stderr(self):
        return self.stderr_path.read_text(errors="replace")

    def unmount(self):
        if self.returncode is not None:
            return self.returncode
        try:
            fusermount_unmount(self.mountpoint)
        finally:
            self.returncode = stop_popen(self.proc)
        return self.returncode


def start_mount(args, mountpoint, cache_dir, stderr_path, env=None, user=None):
    """Start `mediafs mount -f ARGS MOUNTPOINT` (as `user` when given) and
    return a Mount once the kernel lists the mount point. On failure, the
    process is stopped and RuntimeError carries its stderr."""
    argv = as_user(user, [str(MEDIAFS_BIN), "mount", "-f", "--cache-dir", str(cache_dir),
                          *map(str, args), str(mountpoint)])
    stderr_file = open(stderr_path, "wb")
    try:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=stderr_file, stderr=stderr_file, env=env)
    finally:
        stderr_file.close()
    m = Mount(mountpoint, cache_dir, proc, stderr_path, argv)
    deadline = time.monotonic() + MOUNT_TIMEOUT
    while not is_mounted(mountpoint):
        if proc.poll() is not None:
            m.unmount()
            raise RuntimeError(f"mediafs exited with status {proc.returncode} before mounting\n"
                               f"argv: {argv}\nstderr:\n{m.stderr()}")
        if time.monotonic() > deadline:
            m.unmount()
            raise RuntimeError(f"{mountpoint} not mounted after {MOUNT_TIMEOUT:.0f}s\n"
                               f"argv: {argv}\nstderr:\n{m.stderr()}")
        time.sleep(0.05)
    return m


# ---------------------------------------------------------------- shared by the tests

# Ports for the tests' servers, below Linux's ephemeral range (32768-60999,
# where connect() picks client ports, so a client cannot take one between
# our check and the server's bind) and split between pytest-xdist's workers
# (PYTEST_XDIST_WORKER "gw<N>"), so no two workers hand out the same port.
PORT_BASE, PORTS_PER_WORKER, WORKER_SLOTS = 12000, 1000, 20
_next_port = [0]


def _worker_index():
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
    return int(worker[2:]) % WORKER_SLOTS if worker.startswith("gw") and worker[2:].isdigit() else 0


def free_port():
    """A port nothing listens on now, this worker's own: handed out in turn
    from its block, so a port is reused only after a thousand others."""
    first = PORT_BASE + _worker_index() * PORTS_PER_WORKER
    for _ in range(PORTS_PER_WORKER):
        port = first + _next_port[0] % PORTS_PER_WORKER
        _next_port[0] += 1
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError(f"no free port in {first}-{first + PORTS_PER_WORKER - 1}")


def data_of(size, seed):
    """size random bytes, the same for the same seed."""
    return random.Random(seed).randbytes(size)


def run(*argv, user=None, timeout=60, env=None):
    """Run a command (as `user` through runuser when given); output as text."""
    if user is not None:
        argv = ("runuser", "-u", user, "--", *argv)
    return subprocess.run([str(a) for a in argv], capture_output=True, text=True, timeout=timeout, env=env)


def mediafs(*args, timeout=60):
    return run(MEDIAFS_BIN, *args, timeout=timeout)


def xget(path, key):
    return os.getxattr(str(path), XATTR_PREFIX + key).decode()


def xset(path, key, value):
    os.setxattr(str(path), XATTR_PREFIX + key, value.encode() if isinstance(value, str) else value)


def index_html(names):
    """An nginx-style index page of /media/ linking `names`."""
    rows = "\n".join(f'<a href="{n}">{n}</a>' for n in names)
    return f"<html><body><h1>Index of /media/</h1><pre><a href=\"../\">../</a>\n{rows}\n</pre></body></html>\n"


def autoindex_html(title, links, sizes=None):
    """nginx's autoindex page of `title` linking `links` ((href, text)
    pairs). A row's length column is the file's from `sizes` (href ->
    bytes), else `-` (as nginx writes for a directory): mediafs takes
    nginx's lengths, so a made-up one would be a file that changed."""
    sizes = sizes or {}
    rows = "\n".join(f'<a href="{href}">{text}</a>                 30-Nov-2026 01:00    {sizes.get(href, "-")}'
                     for href, text in links)
    return (f"<html>\r\n<head><title>Index of {title}</title></head>\r\n<body>\r\n"
            f"<h1>Index of {title}</h1><hr><pre><a href=\"../\">../</a>\r\n{rows}\r\n</pre><hr></body>\r\n</html>\r\n")


def gets(srv, name=None):
    """A FaultServer's GET requests (of `name` only, when given)."""
    return [r for r in srv.requests if r.method == "GET" and (name is None or r.name == name)]


def read_whole(path):
    with open(path, "rb") as f:
        return f.read()


def read_range(path, offset, size, *, once=False):
    """pread with the kernel's readahead off, so mediafs is asked for these
    bytes only. Repeats short preads until size bytes or EOF; once=True
    makes exactly one pread, so a short read shows."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)
        if once:
            return os.pread(fd, size, offset)
        out = b""
        while len(out) < size:
            chunk = os.pread(fd, size - len(out), offset + len(out))
            if not chunk:
                break
            out += chunk
        return out
    finally:
        os.close(fd)


def pread_direct(path, offset, size):
    """pread with O_DIRECT, past the page cache, straight to mediafs: a fresh
    handle asks for exactly these bytes (no readahead window yet). offset
    and size must be multiples of the page size."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
    buf = mmap.mmap(-1, max(size, mmap.PAGESIZE))
    try:
        n = os.preadv(fd, [buf], offset)
        return bytes(buf[:n])
    finally:
        buf.close()
        os.close(fd)


def pread_uncached(path, offset, size):
    """One pread with the kernel's readahead off: mediafs sees just this
    read (and a short one is not glued to the next)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)
        return os.pread(fd, size, offset)
    finally:
        os.close(fd)


def in_thread(fn, deadline=READ_DEADLINE, *, catch=(), what="read"):
    """Run fn in a daemon thread; returns a join() that waits up to deadline
    (from when it is called) and gives fn's value, or the exception fn raised
    if it is one of `catch` (re-raising any other). join() fails the test if
    fn is still blocked (teardown's unmount frees it)."""
    box = {}

    def work():
        try:
            box["value"] = fn()
        except catch as e:  # handed to the joiner as a value
            box["value"] = e
        except BaseException as e:  # re-raised by the joiner
            box["error"] = e

    t = threading.Thread(target=work, daemon=True)
    t.start()

    def join():
        t.join(deadline)
        if t.is_alive():
            pytest.fail(f"{what} still blocked after {deadline:.0f}s")
        if "error" in box:
            raise box["error"]
        return box["value"]

    join.running = t.is_alive   # whether fn is still running, without waiting
    return join


def guarded(fn, deadline=READ_DEADLINE, *, catch=OSError, what="read"):
    """fn() in a daemon thread, waited for at once: its value, or the
    exception it raised if that is one of `catch` (re-raising any other);
    fails the test if fn is still blocked after the deadline."""
    return in_thread(fn, deadline, catch=catch, what=what)()


def wait_until(predicate, what, timeout=WAIT, interval=0.05):
    """Poll predicate until it returns something true, and return that;
    fails the test after timeout."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(interval)


def wait_for_stderr(m, text, timeout=10.0, interval=0.05):
    """Whether a Mount's stderr shows text within timeout."""
    deadline = time.monotonic() + timeout
    while text not in m.stderr():
        if time.monotonic() > deadline:
            return False
        time.sleep(interval)
    return True


def mount_one(mount, srv, name, data, extra=(), wait=WAIT, **kw):
    """Serve data as `name` from a FaultServer, mount its URL, wait for the
    probe; the server's log is empty on return, and mediafs has taken the
    probe's end too (`wait_transfers_ended`: test_faults' change during a
    read once read the head while it still arrived). Returns (mount, path)."""
    srv.add(name, data)
    m = mount(srv.url(name), extra=extra, **kw)
    path = m.path(name)
    assert os.stat(path).st_size == len(data)
    srv.wait_idle(wait)
    wait_transfers_ended(m, timeout=wait)
    srv.clear_log()
    return m, path


def wait_transfers_ended(m, timeout=WAIT):
    """Until the mount has no transfer in flight: a lookup's probe taken to
    its end, so that a read of the head is a read of cached bytes, not a
    cold open's (which starts a player's stream: decision 0056)."""
    wait_until(lambda: json.loads(xget(m.mountpoint, "stats"))["transfers_in_flight"] == 0,
               "mediafs's transfers to end", timeout=timeout)


def mount_listed(mount, srv, files, extra=(), wait=WAIT):
    """Serve `files` (name -> bytes), mount their URLs, list the root and
    stat each (HEAD probes, not a lookup's GET of first bytes, which would
    cache some of them); the server's log is empty on return."""
    for name, data in files.items():
        srv.add(name, data)
    m = mount(*[srv.url(n) for n in files], extra=extra)
    assert sorted(os.listdir(m.mountpoint)) == sorted(files)
    for name, data in files.items():
        assert os.stat(m.path(name)).st_size == len(data)
    srv.wait_idle(wait)
    srv.clear_log()
    return m


# ---------------------------------------------------------------- other users

OWNER_USER = "mediafs-owner"   # mounts and administers in the owner tests
OTHER_USER = "mediafs-other"   # another user, who may read but not administer


def as_user(user, argv):
    """argv run as `user` (with its groups) when given. setpriv execs in
    place, so a Popen's pid is the command's own, to stop by pid."""
    if user is None:
        return [str(a) for a in argv]
    return ["setpriv", f"--reuid={user}", f"--regid={user}", "--init-groups", *map(str, argv)]


def ensure_user(name):
    """(uid, gid) of a system user, created (no home, no login) if absent."""
    try:
        entry = pwd.getpwnam(name)
    except KeyError:
        r = subprocess.run(["useradd", "--system", "--user-group", "--no-create-home", "--home-dir", "/nonexistent",
                            "--shell", "/usr/sbin/nologin", name], capture_output=True, text=True, timeout=60)
        if r.returncode != 0 and "already exists" not in r.stderr:
            raise RuntimeError(f"useradd {name}: {r.stderr}")
        entry = pwd.getpwnam(name)
    return entry.pw_uid, entry.pw_gid


# One file-system call, run as another user: prints {"ok": value} or
# {"errno": "ENAME"}, so a test sees the exact errno that user got.
FSOP = r"""
import errno, hashlib, json, os, sys
op, path, *rest = sys.argv[1:]
def run():
    if op == "getxattr": return os.getxattr(path, rest[0]).decode()
    if op == "setxattr": return os.setxattr(path, rest[0], rest[1].encode())
    if op == "removexattr": return os.removexattr(path, rest[0])
    if op == "listdir": return sorted(os.listdir(path))
    if op == "sha256":
        with open(path, "rb") as f: return hashlib.sha256(f.read()).hexdigest()
    if op == "stat":
        st = os.stat(path)
        return [st.st_mode, st.st_uid, st.st_gid, st.st_size, st.st_mtime_ns]
    if op == "open":
        flags = 0
        for name in rest[0].split("|"): flags |= getattr(os, name)
        fd = os.open(path, flags, 0o644)
        try:
            if "O_WRONLY" in rest[0] or "O_RDWR" in rest[0]: os.write(fd, b"x")
        finally:
            os.close(fd)
        return None
    if op == "truncate": return os.truncate(path, int(rest[0]))
    if op == "utime": return os.utime(path, (1, 1))
    if op == "chmod": return os.chmod(path, int(rest[0], 8))
    if op == "chown": return os.chown(path, os.getuid(), os.getgid())
    if op == "unlink": return os.unlink(path)
    if op == "rmdir": return os.rmdir(path)
    if op == "mkdir": return os.mkdir(path)
    if op == "rename": return os.rename(path, rest[0])
    if op == "link": return os.link(path, rest[0])
    if op == "symlink": return os.symlink(rest[0], path)
    if op == "mknod": return os.mknod(path, 0o644)
    raise SystemExit(f"unknown op {op}")
try:
    print(json.dumps({"ok": run()}))
except OSError as e:
    print(json.dumps({"errno": errno.errorcode.get(e.errno, str(e.errno))}))
"""


class Actor:
    """Someone acting on mounts: root (user None) or a named user. Every
    call runs in a process of that user's, as a person at a shell would."""

    def __init__(self, user=None, home=None):
        self.user = user
        self.home = home

    def __repr__(self):
        return self.user or "root"

    @property
    def ids(self):
        """(uid, gid, name)."""
        entry = pwd.getpwuid(0) if self.user is None else pwd.getpwnam(self.user)
        return entry.pw_uid, entry.pw_gid, entry.pw_name

    def env(self):
        env = dict(os.environ)
        if self.home is not None:
            env["HOME"] = str(self.home)
        return env

    def run(self, *argv, timeout=60):
        return subprocess.run(as_user(self.user, argv), capture_output=True, text=True, timeout=timeout,
                              env=self.env())

    def mediafs(self, *args, timeout=60):
        return self.run(MEDIAFS_BIN, *args, timeout=timeout)

    def fsop(self, op, path, *rest):
        """{"ok": value} or {"errno": "ENAME"} (see FSOP)."""
        r = self.run("python3", "-c", FSOP, op, path, *rest)
        if r.returncode != 0:
            raise RuntimeError(f"{op} {path} as {self}: {r.stderr}")
        return json.loads(r.stdout)

    def ok(self, op, path, *rest):
        """The value of an op that must succeed."""
        result = self.fsop(op, path, *rest)
        assert "ok" in result, f"{op} {path} {rest} as {self}: {result}"
        return result["ok"]

    def xget(self, path, key):
        return self.ok("getxattr", path, XATTR_PREFIX + key)

    def xset(self, path, key, value):
        return self.ok("setxattr", path, XATTR_PREFIX + key, value)


def disk_usage(cache_dir):
    """Bytes a cache directory occupies on disk (st_blocks), trash included."""
    total = 0
    for root, _dirs, files in os.walk(cache_dir):
        for f in files:
            try:
                total += os.lstat(os.path.join(root, f)).st_blocks * 512
            except FileNotFoundError:
                pass
    return total
