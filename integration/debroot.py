"""A fresh Debian root, as a machine that never saw a Swift toolchain has
one, for the tests that install the package (test_package.py).

The base is `debootstrap --variant=minbase` of this machine's own release,
from the mirror this machine's apt uses. It is built once (about a minute
here) and kept under ~/.cache/mediafs-debroot (MEDIAFS_DEBROOT_CACHE
elsewhere), never changed after; each use gets a copy of it. The .debs apt
downloads into a copy are kept beside the base, so a later run installs
the same dependencies without the network.

A DebRoot mounts only what a test asks of it (its /proc); `close()`
unmounts everything under it, deepest first (what a test mounted there
too), stops by pid every process still running inside it, and removes it.
"""

import fcntl
import os
import re
import shutil
import subprocess
import time
from pathlib import Path

import harness

CACHE = Path(os.environ.get("MEDIAFS_DEBROOT_CACHE", Path.home() / ".cache" / "mediafs-debroot"))
# What a process inside finds on PATH: a root shell's, with no /opt and no
# /usr/local/bin of the host's.
ENV = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C.UTF-8", "HOME": "/root",
       "DEBIAN_FRONTEND": "noninteractive"}
# apt inside reaches the mirror as this machine does.
ENV.update({k: v for k, v in os.environ.items() if k.lower() in ("http_proxy", "https_proxy", "no_proxy")})
BUILD_TIMEOUT = 1800   # debootstrap over a slow mirror
APT_TIMEOUT = 900


def codename():
    """This machine's release (bookworm on Debian 12), from /etc/os-release."""
    text = Path("/etc/os-release").read_text()
    m = re.search(r"^VERSION_CODENAME=\"?([a-z]+)\"?$", text, re.M)
    if m is None:
        raise RuntimeError("/etc/os-release names no VERSION_CODENAME")
    return m.group(1)


def mirror(suite):
    """The Debian mirror this machine's apt uses for `suite`: MEDIAFS_DEBIAN_MIRROR,
    else the first deb822 .sources entry or sources.list line that names it."""
    if os.environ.get("MEDIAFS_DEBIAN_MIRROR"):
        return os.environ["MEDIAFS_DEBIAN_MIRROR"]
    apt = Path("/etc/apt")
    for sources in sorted((apt / "sources.list.d").glob("*.sources")):
        for stanza in sources.read_text().split("\n\n"):
            fields = dict(re.findall(r"^([A-Za-z-]+):\s*(.*)$", stanza, re.M))
            if suite in fields.get("Suites", "").split() and "deb" in fields.get("Types", "").split():
                return fields["URIs"].split()[0]
    for listing in [apt / "sources.list", *sorted((apt / "sources.list.d").glob("*.list"))]:
        if listing.exists():
            for line in listing.read_text().splitlines():
                words = re.sub(r"\[[^]]*\]", "", line).split()
                if len(words) >= 3 and words[0] == "deb" and words[2] == suite:
                    return words[1]
    raise RuntimeError(f"no apt source for {suite} in /etc/apt; set MEDIAFS_DEBIAN_MIRROR")


def base():
    """The cached base root, built first if missing; one builder at a time."""
    suite = codename()
    CACHE.mkdir(parents=True, exist_ok=True)
    done = CACHE / f"{suite}-minbase"
    with open(CACHE / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (done / ".mediafs-complete").exists():
            return done
        if shutil.which("debootstrap") is None:
            raise RuntimeError("debootstrap not found: run scripts/install-deps.sh")
        # A half-built root from a run that was stopped is thrown away.
        building = CACHE / f"{suite}-minbase.building"
        shutil.rmtree(building, ignore_errors=True)
        shutil.rmtree(done, ignore_errors=True)
        started = time.monotonic()
        r = subprocess.run(["debootstrap", "--variant=minbase", suite, str(building), mirror(suite)],
                           capture_output=True, text=True, timeout=BUILD_TIMEOUT)
        if r.returncode != 0:
            raise RuntimeError(f"debootstrap failed ({r.returncode}):\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}")
        # The debs debootstrap installed are in the root already.
        for deb in (building / "var/cache/apt/archives").glob("*.deb"):
            deb.unlink()
        (building / ".mediafs-complete").write_text(f"built in {time.monotonic() - started:.0f} s\n")
        building.rename(done)
        return done


class DebRoot:
    """A copy of the base at `path` (which must not exist yet)."""

    def __init__(self, path):
        self.path = Path(path)
        self.archives = CACHE / "archives"
        subprocess.run(["cp", "-a", "--reflink=auto", str(base()), str(self.path)], check=True, timeout=600)
        (self.path / ".mediafs-complete").unlink()
        # Names resolve as they do here now, not as when the base was built.
        shutil.copy("/etc/resolv.conf", self.path / "etc/resolv.conf")

    def run(self, *argv, timeout=120, check=True, input=None):
        """`chroot ROOT argv...`, with a clean environment; its output as text."""
        r = subprocess.run(["chroot", str(self.path), *argv], env=ENV, capture_output=True, text=True,
                           timeout=timeout, input=input, stdin=None if input is not None else subprocess.DEVNULL)
        if check and r.returncode != 0:
            raise AssertionError(f"in the root: {' '.join(argv)} exited {r.returncode}:\n{r.stdout}\n{r.stderr}")
        return r

    def popen(self, argv, **kw):
        return subprocess.Popen(["chroot", str(self.path), *argv], env=ENV, stdin=subprocess.DEVNULL, **kw)

    def inside(self, path):
        """The host's path of the root's `path`."""
        return self.path / str(path).lstrip("/")

    def mount_proc(self):
        subprocess.run(["mount", "-t", "proc", "proc", str(self.inside("/proc"))], check=True, timeout=30)

    def make_fuse_device(self):
        """/dev/fuse (10, 229), which debootstrap does not make."""
        dev = self.inside("/dev/fuse")
        if not dev.exists():
            subprocess.run(["mknod", "-m", "0666", str(dev), "c", "10", "229"], check=True, timeout=30)

    def apt_install(self, *packages):
        """apt-get install inside, the debs kept from earlier runs offered
        first; the new ones kept after. A failure with the base's package
        lists (the mirror moved on) is retried once after apt-get update."""
        archives = self.inside("/var/cache/apt/archives")
        self.archives.mkdir(parents=True, exist_ok=True)
        for deb in self.archives.glob("*.deb"):
            shutil.copy(deb, archives / deb.name)
        argv = ["apt-get", "install", "-y", "--no-install-recommends", *packages]
        r = self.run(*argv, timeout=APT_TIMEOUT, check=False)
        if r.returncode != 0:
            self.run("apt-get", "update", timeout=APT_TIMEOUT)
            r = self.run(*argv, timeout=APT_TIMEOUT)
        for deb in archives.glob("*.deb"):
            if not (self.archives / deb.name).exists():
                shutil.copy(deb, self.archives / deb.name)
        return r

    def pids(self):
        """Processes whose root directory is this root."""
        found = []
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                try:
                    if os.readlink(f"/proc/{entry}/root") == str(self.path.resolve()):
                        found.append(int(entry))
                except OSError:
                    continue
        return [pid for pid in found if harness.pid_alive(pid)]

    def mounts(self):
        """(mount point, file system type) of what is mounted inside, in order."""
        base = str(self.path.resolve())
        found = []
        with open("/proc/self/mountinfo", encoding="utf-8", errors="surrogateescape") as f:
            for line in f:
                fields = line.split(" ")
                mp = harness._unescape_mountinfo(fields[4])
                fstype = fields[fields.index("-") + 1]
                if mp == base or mp.startswith(base + "/"):
                    found.append((mp, fstype))
        return found

    def close(self):
        """Unmounts what is mounted inside (FUSE mounts first, detached if
        need be), stops what runs inside by pid, removes the copy. Raises if
        something would not go."""
        for mp, fstype in reversed(self.mounts()):
            if fstype.startswith("fuse") and not harness.fusermount_unmount(mp):
                subprocess.run(["umount", "-l", mp], capture_output=True, timeout=30)
        for pid in self.pids():
            harness.stop_pid(pid, timeout=0)
        for mp, _ in reversed(self.mounts()):
            subprocess.run(["umount", mp], capture_output=True, timeout=30)
        left = self.mounts()
        if left:
            raise RuntimeError(f"still mounted inside {self.path}: {left}")
        shutil.rmtree(self.path)
