"""Plumbing for the mediafs integration suite: where the binary is, whether
FUSE is usable, what is mounted, and how to stop a process by its pid.

Nothing here asserts; the fixtures in conftest.py and the tests do.
"""

import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
MEDIAFS_BIN = Path(os.environ.get("MEDIAFS_BIN", REPO / ".build" / "release" / "mediafs"))

# Generous bounds that only stop a broken build from hanging the suite.
MOUNT_TIMEOUT = 20.0
EXIT_TIMEOUT = 10.0
KILL_TIMEOUT = 5.0


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
    except FileNotFoundError:
        return False


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


def start_mount(args, mountpoint, cache_dir, stderr_path, env=None):
    """Start `mediafs mount -f ARGS MOUNTPOINT` and return a Mount once the
    kernel lists the mount point. On failure, the process is stopped and
    RuntimeError carries its stderr."""
    argv = [str(MEDIAFS_BIN), "mount", "-f", "--cache-dir", str(cache_dir), *map(str, args), str(mountpoint)]
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
