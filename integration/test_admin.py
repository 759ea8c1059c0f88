"""Administration of a running mount, as a user does it: the `user.mediafs.*`
extended attributes (getfattr/setfattr and os.getxattr/os.setxattr), the
`status`, `purge` and `preload` commands, `--preload-next`, statfs, the fstab
form through mount.fuse3, and the man page.

Most tests use the in-process FaultServer so that they can see each request
(and slow one down); the fstab test uses the nginx fixture. Timeouts only
keep a broken build from hanging the suite; nothing here measures speed.
"""

import ctypes
import ctypes.util
import errno
import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

import harness
from harness import data_of, gets, guarded, mediafs, read_range, run, wait_until, xget, xset

KiB, MiB = 1024, 1024 * 1024
PROBE_BYTES = 512 * KiB   # a lookup's probe fetches the first bytes (LoaderSettings.probeFirstBytes)
PREFIX = harness.XATTR_PREFIX
FILE_READABLE = ["url", "content_type", "etag", "last_modified", "size",
                 "cached_bytes", "cached_ranges", "complete", "state"]
FILE_WRITABLE = ["purge", "preload", "pin"]
ROOT_ATTRS = ["stats", "sources", "readers", "purge", "add", "remove"]
STATS_KEYS = {"entries", "cached_bytes", "bytes_from_cache", "bytes_from_network",
              "requests", "transfers_in_flight", "kernel_read_opens",
              "attribute_requests"}
COMMANDS = ["mount", "status", "purge", "preload", "pin", "unpin"]
WAIT = 30.0  # upper bound for anything asynchronous


# ---------------------------------------------------------------- helpers

def ranges_text(*spans):
    """Inclusive 'a-b,c-d' text for half-open (start, end) spans."""
    return ",".join(f"{a}-{b - 1}" for a, b in spans)


def parse_ranges(text):
    if not text:
        return []
    out = []
    for part in text.split(","):
        a, b = part.split("-")
        out.append((int(a), int(b) + 1))
    return out


_libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
_libc.getxattr.restype = ctypes.c_ssize_t
_libc.getxattr.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_void_p, ctypes.c_size_t]


def getxattr_size_probe(path, name):
    """getxattr(path, name, NULL, 0): the value's size, or -errno."""
    n = _libc.getxattr(os.fsencode(str(path)), name.encode(), None, 0)
    return n if n >= 0 else -ctypes.get_errno()


@pytest.fixture
def public_dir():
    """A directory every user can traverse (pytest's tmp_path is 0700)."""
    d = Path(tempfile.mkdtemp(prefix="mediafs-admin-", dir="/tmp"))
    os.chmod(d, 0o755)
    try:
        yield d
    finally:
        for mp in harness.mount_points():
            if mp.startswith(str(d) + "/"):
                harness.fusermount_unmount(mp)
        shutil.rmtree(d, ignore_errors=True)


# ---------------------------------------------------------------- reading xattrs

def test_file_xattrs_describe_the_remote_file(mount, srv):
    data = data_of(3 * MiB + 17, 1)
    srv.add("movie.mp4", data, content_type="video/mp4")
    m = mount(srv.url("movie.mp4"))
    p = m.path("movie.mp4")
    assert xget(p, "url") == srv.url("movie.mp4")
    assert xget(p, "content_type") == "video/mp4"
    assert xget(p, "etag") == srv.etag("movie.mp4")
    assert xget(p, "last_modified") == srv.last_modified("movie.mp4")
    assert xget(p, "size") == str(len(data))
    assert xget(p, "complete") == "0"
    # The lookup's probe brings the first bytes, then the file rests.
    wait_until(lambda: xget(p, "state") == "idle", "state idle after the probe")
    assert xget(p, "purge") == ""
    assert xget(p, "preload") == ""
    assert int(xget(p, "cached_bytes")) < len(data)


def test_getfattr_dump_shows_every_file_attribute(mount, srv):
    data = data_of(100_000, 2)
    srv.add("a.bin", data)
    m = mount(srv.url("a.bin"))
    r = run("getfattr", "--absolute-names", "-d", "-m", "^user\\.mediafs\\.", m.path("a.bin"))
    assert r.returncode == 0, r.stderr
    shown = {line.split("=", 1)[0] for line in r.stdout.splitlines() if line.startswith(PREFIX)}
    assert shown == {PREFIX + k for k in FILE_READABLE + FILE_WRITABLE}, r.stdout
    r = run("getfattr", "--absolute-names", "--only-values", "-n", PREFIX + "size", m.path("a.bin"))
    assert r.returncode == 0 and r.stdout == str(len(data)), (r.stdout, r.stderr)


def test_listxattr_differs_for_root_and_files(mount, srv):
    srv.add("a.bin", data_of(10_000, 3))
    m = mount(srv.url("a.bin"))
    assert sorted(os.listxattr(m.path("a.bin"))) == sorted(PREFIX + k for k in FILE_READABLE + FILE_WRITABLE)
    assert sorted(os.listxattr(m.mountpoint)) == sorted(PREFIX + k for k in ROOT_ATTRS)


def test_size_probe_returns_the_value_length(mount, srv):
    srv.add("a.bin", data_of(10_000, 4))
    m = mount(srv.url("a.bin"))
    # Settled first: the lookup's first bytes arriving between the two calls
    # would change `state` (fetching -> idle) and its length with it.
    harness.wait_until(lambda: xget(m.path("a.bin"), "state") == "idle", "a.bin's lookup to finish")
    srv.wait_idle()
    for key in FILE_READABLE:
        value = os.getxattr(m.path("a.bin"), PREFIX + key)
        assert getxattr_size_probe(m.path("a.bin"), PREFIX + key) == len(value), key
    stats = os.getxattr(m.mountpoint, PREFIX + "stats")
    assert getxattr_size_probe(m.mountpoint, PREFIX + "stats") == len(stats)


def test_cached_bytes_and_ranges_follow_a_random_access_read(mount, srv):
    size = 16 * MiB
    data = data_of(size, 5)
    srv.add("a.bin", data)
    m = mount(srv.url("a.bin"))
    p = m.path("a.bin")
    # The lookup's probe brings the first bytes.
    wait_until(lambda: xget(p, "state") == "idle", "state idle after the probe")
    assert xget(p, "cached_ranges") == ranges_text((0, PROBE_BYTES))
    assert xget(p, "cached_bytes") == str(PROBE_BYTES)
    offset, length = 5 * MiB, 1 * MiB
    assert read_range(p, offset, length) == data[offset:offset + length]
    srv.wait_idle(WAIT)
    ranges = parse_ranges(xget(p, "cached_ranges"))
    cached = int(xget(p, "cached_bytes"))
    assert any(a <= offset and offset + length <= b for a, b in ranges), ranges
    assert cached == sum(b - a for a, b in ranges)
    assert cached == srv.bytes_sent("a.bin"), "cached bytes should be what the server sent"
    assert cached < size
    # The read asked for [5M, 6M) only: mediafs should not have cached more of the start.
    assert ranges_text((0, PROBE_BYTES), (offset, offset + length)) == xget(p, "cached_ranges"), \
        "cached_ranges after one random-access read of [5M, 6M)"
    assert xget(p, "complete") == "0"
    # The server is done sending before the daemon has filed the transfer away.
    wait_until(lambda: xget(p, "state") == "idle", "state idle after the read's transfer")


def test_complete_after_reading_everything(mount, srv):
    data = data_of(2 * MiB + 5, 6)
    srv.add("a.bin", data)
    m = mount(srv.url("a.bin"))
    p = m.path("a.bin")
    assert p.read_bytes() == data
    wait_until(lambda: xget(p, "complete") == "1", "complete == 1")
    assert xget(p, "cached_bytes") == str(len(data))
    assert xget(p, "cached_ranges") == ranges_text((0, len(data)))
    wait_until(lambda: xget(p, "state") == "idle", "state idle")


def test_root_stats_is_json_with_the_documented_keys(mount, srv):
    data = data_of(1 * MiB, 7)
    srv.add("a.bin", data)
    srv.add("b.bin", data_of(1000, 8))
    m = mount(srv.url("a.bin"), srv.url("b.bin"))
    assert m.path("a.bin").read_bytes() == data
    stats = json.loads(xget(m.mountpoint, "stats"))
    assert set(stats) >= STATS_KEYS, stats
    assert stats["entries"] == 2
    assert stats["cached_bytes"] >= len(data)
    assert stats["bytes_from_network"] >= len(data)
    assert stats["requests"] >= 1


# ---------------------------------------------------------------- errors

def test_unknown_names_give_enodata(mount, srv):
    srv.add("a.bin", data_of(1000, 9))
    m = mount(srv.url("a.bin"))
    for path in (m.path("a.bin"), m.mountpoint):
        for name in (PREFIX + "nope", "user.other"):
            with pytest.raises(OSError) as e:
                os.getxattr(path, name)
            assert e.value.errno == errno.ENODATA, (path, name)
    with pytest.raises(OSError) as e:
        os.getxattr(m.mountpoint, PREFIX + "url")
    assert e.value.errno == errno.ENODATA, "the root has no url"


def test_names_outside_the_user_namespace_are_not_supported_so_ls_stops_asking(mount, srv):
    # ENOTSUP, not ENODATA: ls -l remembers "unsupported" for the whole
    # mount instead of asking for security.selinux and the ACL per file.
    srv.add("a.bin", data_of(1000, 9))
    m = mount(srv.url("a.bin"))
    for path in (m.path("a.bin"), m.mountpoint):
        for name in ("security.selinux", "system.posix_acl_access", "trusted.x"):
            with pytest.raises(OSError) as e:
                os.getxattr(path, name)
            assert e.value.errno == errno.ENOTSUP, (path, name)


@pytest.mark.parametrize("value", ["abc", "-1", "4X", "", "1.5M"])
def test_bad_preload_value_gives_einval(mount, srv, value):
    srv.add("a.bin", data_of(1000, 10))
    m = mount(srv.url("a.bin"))
    with pytest.raises(OSError) as e:
        xset(m.path("a.bin"), "preload", value)
    assert e.value.errno == errno.EINVAL, value


def test_writing_read_only_names_gives_eperm(mount, srv):
    srv.add("a.bin", data_of(1000, 11))
    m = mount(srv.url("a.bin"))
    for key in FILE_READABLE:
        with pytest.raises(OSError) as e:
            xset(m.path("a.bin"), key, "1")
        assert e.value.errno == errno.EPERM, key
    with pytest.raises(OSError) as e:
        xset(m.mountpoint, "stats", "{}")
    assert e.value.errno == errno.EPERM
    r = run("setfattr", "-n", PREFIX + "size", "-v", "5", m.path("a.bin"))
    assert r.returncode != 0 and "Operation not permitted" in r.stderr, r.stderr


def test_other_user_may_read_but_not_set_with_allow_other(mount, srv, public_dir):
    data = data_of(50_000, 12)
    srv.add("a.bin", data)
    mnt = public_dir / "mnt"
    mnt.mkdir()
    m = mount(srv.url("a.bin"), extra=("-o", "allow_other"), mountpoint=mnt)
    path = m.path("a.bin")
    r = run("sha256sum", path, user="nobody")
    assert r.returncode == 0, r.stderr
    assert r.stdout.split()[0] == hashlib.sha256(data).hexdigest()
    r = run("getfattr", "--absolute-names", "--only-values", "-n", PREFIX + "size", path, user="nobody")
    assert r.returncode == 0 and r.stdout == str(len(data)), (r.stdout, r.stderr)
    r = run("getfattr", "--absolute-names", "--only-values", "-n", PREFIX + "stats", mnt, user="nobody")
    assert r.returncode == 0 and json.loads(r.stdout)["entries"] == 1, (r.stdout, r.stderr)
    for target, key, value in ((path, "purge", "1"), (path, "preload", "1"), (mnt, "purge", "1")):
        r = run("setfattr", "-n", PREFIX + key, "-v", value, target, user="nobody")
        assert r.returncode != 0 and "Permission denied" in r.stderr, (target, key, r.stderr)
    # Same through setpriv, checking the errno from Python itself.
    code = ("import errno, os, sys\n"
            "try:\n    os.setxattr(sys.argv[1], 'user.mediafs.purge', b'1')\n"
            "except OSError as e:\n    print(errno.errorcode[e.errno])\nelse:\n    print('OK')\n")
    r = run("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "python3", "-c", code, path)
    assert r.stdout.strip() == "EACCES", (r.stdout, r.stderr)
    # The owner (root) still may.
    xset(path, "purge", "1")
    assert xget(path, "cached_bytes") == "0"


# ---------------------------------------------------------------- purge

def test_purge_drops_cached_bytes_and_next_read_refetches(mount, srv):
    data = data_of(2 * MiB, 13)
    srv.add("a.bin", data)
    m = mount(srv.url("a.bin"))
    p = m.path("a.bin")
    assert p.read_bytes() == data
    wait_until(lambda: xget(p, "complete") == "1", "complete after a full read")
    srv.wait_idle(WAIT)
    srv.clear_log()
    assert p.read_bytes() == data
    assert gets(srv, "a.bin") == [], "a cached file should be read without requests"
    # setxattr returning means the purge is done, kernel page cache included:
    # the very next read must reach mediafs (and so the server).
    xset(p, "purge", "1")
    assert xget(p, "cached_bytes") == "0"
    assert xget(p, "cached_ranges") == ""
    assert xget(p, "complete") == "0"
    assert p.read_bytes() == data
    assert gets(srv, "a.bin"), "after purge the next read must go to the server"


def test_setfattr_purge_with_any_value(mount, srv):
    data = data_of(300_000, 14)
    srv.add("a.bin", data)
    m = mount(srv.url("a.bin"))
    assert m.path("a.bin").read_bytes() == data
    r = run("setfattr", "-n", PREFIX + "purge", "-v", "whatever", m.path("a.bin"))
    assert r.returncode == 0, r.stderr
    assert xget(m.path("a.bin"), "cached_bytes") == "0"


def test_root_purge_purges_every_file(mount, srv):
    a, b = data_of(1 * MiB, 15), data_of(500_000, 16)
    srv.add("a.bin", a)
    srv.add("b.bin", b)
    m = mount(srv.url("a.bin"), srv.url("b.bin"))
    assert m.path("a.bin").read_bytes() == a
    assert m.path("b.bin").read_bytes() == b
    assert int(xget(m.path("a.bin"), "cached_bytes")) > 0
    srv.wait_idle(WAIT)
    xset(m.mountpoint, "purge", "1")
    for name in ("a.bin", "b.bin"):
        assert xget(m.path(name), "cached_bytes") == "0", name
        assert xget(m.path(name), "cached_ranges") == "", name
    assert json.loads(xget(m.mountpoint, "stats"))["cached_bytes"] == 0
    srv.clear_log()
    assert m.path("b.bin").read_bytes() == b
    assert gets(srv, "b.bin"), "after a root purge the next read must go to the server"


# ---------------------------------------------------------------- preload

def test_preload_1_completes_a_file_without_reads(mount, srv):
    data = data_of(6 * MiB + 3, 17)
    srv.add("a.bin", data)
    m = mount(srv.url("a.bin"))
    p = m.path("a.bin")
    xset(p, "preload", "1")
    wait_until(lambda: xget(p, "complete") == "1", "preload 1 to complete the file")
    assert xget(p, "cached_bytes") == str(len(data))
    assert xget(p, "cached_ranges") == ranges_text((0, len(data)))
    wait_until(lambda: xget(p, "state") == "idle", "state idle after preload")
    srv.wait_idle(WAIT)
    srv.clear_log()
    assert p.read_bytes() == data
    assert gets(srv, "a.bin") == [], "a preloaded file should be read without requests"


@pytest.mark.parametrize("value, n", [("1048576", 1 * MiB), ("2M", 2 * MiB), ("700K", 700 * KiB)])
def test_preload_n_bytes_caches_exactly_the_leading_bytes(mount, srv, value, n):
    data = data_of(8 * MiB, 18)
    srv.add("a.bin", data)
    m = mount(srv.url("a.bin"))
    p = m.path("a.bin")
    xset(p, "preload", value)
    expected = ranges_text((0, n))
    wait_until(lambda: xget(p, "cached_ranges") == expected
               or int(xget(p, "cached_bytes")) > n,
               f"cached_ranges == {expected}")
    wait_until(lambda: xget(p, "state") == "idle", "state idle after preload")
    srv.wait_idle(WAIT)
    assert xget(p, "cached_ranges") == expected
    assert xget(p, "cached_bytes") == str(n)
    assert xget(p, "complete") == "0"
    srv.clear_log()
    assert read_range(p, 0, n) == data[:n]
    assert gets(srv, "a.bin") == [], "the preloaded bytes should be read without requests"


def test_preload_0_stops_a_dripping_preload(mount, srv):
    data = data_of(16 * MiB, 19)
    srv.add("a.bin", data)
    m = mount(srv.url("a.bin"))
    p = m.path("a.bin")
    assert xget(p, "size") == str(len(data))
    srv.set_fault("a.bin", "drip", bytes_per_sec=200_000, chunk=16 * KiB)
    srv.clear_log()
    xset(p, "preload", "1")
    srv.wait_for(lambda rs: [r for r in rs if r.name == "a.bin" and r.method == "GET"
                             and r.bytes_sent > 0], timeout=WAIT)
    xset(p, "preload", "0")
    reqs = srv.wait_idle(WAIT)
    got = [r for r in reqs if r.name == "a.bin" and r.method == "GET"]
    assert got and all(not r.completed for r in got), \
        [(r.range, r.bytes_sent, r.completed) for r in got]
    assert sum(r.bytes_sent for r in got) < len(data)
    wait_until(lambda: xget(p, "state") == "idle", "state idle after preload 0")
    assert xget(p, "complete") == "0"
    # And it stays stopped: no new transfer starts on its own.
    time.sleep(1.0)
    assert len(gets(srv, "a.bin")) == len(got)


def test_read_of_another_file_is_served_during_a_slow_preload(mount, srv):
    slow, fast = data_of(16 * MiB, 20), data_of(1 * MiB + 11, 21)
    srv.add("slow.bin", slow)
    srv.add("fast.bin", fast)
    m = mount(srv.url("slow.bin"), srv.url("fast.bin"))
    assert xget(m.path("slow.bin"), "size") == str(len(slow))
    srv.set_fault("slow.bin", "drip", bytes_per_sec=100_000, chunk=8 * KiB)
    xset(m.path("slow.bin"), "preload", "1")
    srv.wait_for(lambda rs: [r for r in rs if r.name == "slow.bin" and r.method == "GET"
                             and r.bytes_sent > 0], timeout=WAIT)
    result = guarded(lambda: m.path("fast.bin").read_bytes(), WAIT, catch=Exception)
    assert not isinstance(result, Exception), repr(result)
    assert result == fast
    # The preload was still running when the read returned.
    assert xget(m.path("slow.bin"), "complete") == "0"
    assert any(not r.done for r in gets(srv, "slow.bin")), "slow.bin's transfer should still be in flight"
    xset(m.path("slow.bin"), "preload", "0")


def test_a_read_joining_a_paused_preload_is_served_while_another_read_runs(mount, srv):
    # A preload pauses while any read-priority transfer runs. A read that
    # joins it promotes it to a read, and it must resume: it once stayed
    # paused, and its reader waited for bytes that never came.
    data, slow = data_of(4 * MiB, 23), data_of(4 * MiB, 24)
    srv.add("a.bin", data)
    srv.add("slow.bin", slow)
    m = mount(srv.url("a.bin"), srv.url("slow.bin"), extra=["--timeout", "10"])
    assert xget(m.path("a.bin"), "size") == str(len(data))
    assert xget(m.path("slow.bin"), "size") == str(len(slow))
    probes = len(gets(srv, "a.bin"))   # the lookup's ranged GET
    # slow.bin's GET waits at the server until the test lets it go: a
    # read-priority transfer runs all through a.bin's preload and read.
    srv.set_fault("slow.bin", "hold")
    background = harness.in_thread(lambda: read_range(m.path("slow.bin"), 0, 2 * MiB), deadline=120,
                                   catch=(OSError,))
    srv.wait_for(lambda rs: srv.held("slow.bin") == 1, timeout=WAIT)
    xset(m.path("a.bin"), "preload", "1")
    srv.wait_for(lambda rs: [r for r in rs if r.name == "a.bin" and r.method == "GET"], timeout=WAIT)
    offset = 1 * MiB   # past the probe's first bytes
    result = guarded(lambda: read_range(m.path("a.bin"), offset, 64 * KiB), WAIT, catch=Exception)
    assert not isinstance(result, Exception), repr(result)
    assert result == data[offset:offset + 64 * KiB]
    assert srv.held("slow.bin") == 1 and background.running(), "slow.bin's read should still be waiting"
    assert len(gets(srv, "a.bin")) == probes + 1, "the read should have joined the preload, not sent its own request"
    srv.release("slow.bin")
    assert background() == slow[:2 * MiB]


def test_read_of_the_preloading_file_far_ahead_is_served(mount, srv):
    data = data_of(16 * MiB, 22)
    srv.add("a.bin", data)
    m = mount(srv.url("a.bin"))
    p = m.path("a.bin")
    assert xget(p, "size") == str(len(data))
    srv.set_fault("a.bin", "drip", bytes_per_sec=100_000, chunk=8 * KiB)
    xset(p, "preload", "1")
    srv.wait_for(lambda rs: [r for r in rs if r.name == "a.bin" and r.method == "GET"
                             and r.bytes_sent > 0], timeout=WAIT)
    # A read needs bytes the preload will not reach for a long time; drip
    # only applies per request, so a new ranged request at the same rate
    # brings 64 KiB in well under the deadline.
    offset = 12 * MiB
    result = guarded(lambda: read_range(p, offset, 64 * KiB), WAIT, catch=Exception)
    assert not isinstance(result, Exception), repr(result)
    assert result == data[offset:offset + 64 * KiB]
    assert xget(p, "complete") == "0"
    xset(p, "preload", "0")


def test_preload_next_caches_the_head_of_the_next_file(mount, srv):
    files = {n: data_of(4 * MiB, 30 + i) for i, n in enumerate(["a.bin", "b.bin", "c.bin"])}
    for name, data in files.items():
        srv.add(name, data)
    m = mount(*(srv.url(n) for n in files), extra=("--preload-next", "1:1M"))
    with open(m.path("a.bin"), "rb"):
        pass
    b = m.path("b.bin")
    wait_until(lambda: xget(b, "cached_ranges") == ranges_text((0, MiB))
               or int(xget(b, "cached_bytes")) > MiB, "b.bin to get its first 1 MiB")
    wait_until(lambda: xget(b, "state") == "idle", "b.bin idle")
    srv.wait_idle(WAIT)
    assert xget(b, "cached_ranges") == ranges_text((0, MiB))
    # Looking c.bin up probes it, which brings its first bytes, and no more.
    assert int(xget(m.path("c.bin"), "cached_bytes")) <= PROBE_BYTES, "only the next 1 file is preloaded"
    srv.wait_idle(WAIT)
    assert [r.range for r in gets(srv, "c.bin")] == [f"bytes=0-{PROBE_BYTES - 1}"]


def test_preload_next_default_size_is_4m(mount, srv):
    files = {n: data_of(6 * MiB, 40 + i) for i, n in enumerate(["a.bin", "b.bin"])}
    for name, data in files.items():
        srv.add(name, data)
    m = mount(*(srv.url(n) for n in files), extra=("--preload-next", "1"))
    with open(m.path("a.bin"), "rb"):
        pass
    b = m.path("b.bin")
    wait_until(lambda: xget(b, "cached_ranges") == ranges_text((0, 4 * MiB))
               or int(xget(b, "cached_bytes")) > 4 * MiB, "b.bin to get its first 4 MiB")
    srv.wait_idle(WAIT)
    assert xget(b, "cached_ranges") == ranges_text((0, 4 * MiB))


# ---------------------------------------------------------------- commands

def test_status_json_matches_the_xattrs(mount, srv):
    a, b = data_of(2 * MiB, 50), data_of(3 * MiB, 51)
    srv.add("a.bin", a)
    srv.add("b.bin", b)
    m = mount(srv.url("a.bin"), srv.url("b.bin"))
    assert m.path("a.bin").read_bytes() == a
    assert read_range(m.path("b.bin"), MiB, 64 * KiB) == b[MiB:MiB + 64 * KiB]
    srv.wait_idle(WAIT)
    wait_until(lambda: all(xget(m.path(n), "state") == "idle" for n in ("a.bin", "b.bin")), "idle")
    r = mediafs("status", m.mountpoint, "--json")
    assert r.returncode == 0, r.stderr
    status = json.loads(r.stdout)
    assert set(status) >= {"mountpoint", "files", "totals"}, status
    assert os.path.realpath(status["mountpoint"]) == os.path.realpath(m.mountpoint)
    files = {f["name"]: f for f in status["files"]}
    assert sorted(files) == sorted(os.listdir(m.mountpoint))
    for name, f in files.items():
        p = m.path(name)
        assert set(f) >= {"name", "size", "cached_bytes", "complete", "state"}, f
        assert int(f["size"]) == int(xget(p, "size")), name
        assert int(f["cached_bytes"]) == int(xget(p, "cached_bytes")), name
        assert (f["complete"] in (True, 1, "1")) == (xget(p, "complete") == "1"), (name, f["complete"])
        assert f["state"] == xget(p, "state"), name
    assert files["a.bin"]["complete"] in (True, 1, "1")
    # The stats above reached the daemon after `status` read its totals.
    moving = {"attribute_requests"}
    stats = json.loads(xget(m.mountpoint, "stats"))
    assert {k: v for k, v in status["totals"].items() if k not in moving} == \
        {k: v for k, v in stats.items() if k not in moving}
    assert set(status["totals"]) == set(stats)


def test_status_table_shows_names_and_a_totals_line(mount, srv):
    srv.add("first file.bin", data_of(1 * MiB, 52))
    srv.add("second.bin", data_of(2 * MiB, 53))
    m = mount(srv.url("first file.bin"), srv.url("second.bin"))
    assert m.path("first file.bin").read_bytes()
    r = mediafs("status", m.mountpoint)
    assert r.returncode == 0, r.stderr
    for name in ("first file.bin", "second.bin"):
        assert name in r.stdout, r.stdout
    assert any("total" in line.lower() for line in r.stdout.splitlines()), r.stdout


def test_preload_and_purge_commands(mount, srv):
    a, b = data_of(4 * MiB, 55), data_of(3 * MiB, 56)
    srv.add("a.bin", a)
    srv.add("b.bin", b)
    m = mount(srv.url("a.bin"), srv.url("b.bin"))
    pa, pb = m.path("a.bin"), m.path("b.bin")
    r = mediafs("preload", "--bytes", "1M", pa)
    assert r.returncode == 0, r.stderr
    wait_until(lambda: xget(pa, "cached_ranges") == ranges_text((0, MiB))
               or int(xget(pa, "cached_bytes")) > MiB, "a.bin 1M preloaded")
    srv.wait_idle(WAIT)
    assert xget(pa, "cached_ranges") == ranges_text((0, MiB))
    r = mediafs("preload", pa, pb)
    assert r.returncode == 0, r.stderr
    wait_until(lambda: xget(pa, "complete") == "1" and xget(pb, "complete") == "1",
               "both files complete after `mediafs preload`")
    r = mediafs("purge", pa, pb)
    assert r.returncode == 0, r.stderr
    assert xget(pa, "cached_bytes") == "0" and xget(pb, "cached_bytes") == "0"
    # purge of the mount root purges everything
    assert pa.read_bytes() == a
    r = mediafs("purge", m.mountpoint)
    assert r.returncode == 0, r.stderr
    assert xget(pa, "cached_bytes") == "0"


@pytest.mark.parametrize("argv", [["purge"], ["preload"], ["preload", "--bytes", "1M"]])
def test_commands_refuse_a_file_outside_a_mount_and_set_nothing(argv):
    fd, name = tempfile.mkstemp(prefix="mediafs-notmount-", dir="/tmp")
    os.write(fd, b"hello")
    os.close(fd)
    try:
        r = mediafs(*argv, name)
        assert r.returncode != 0, r.stdout
        assert "not in a mediafs mount" in r.stdout + r.stderr, (r.stdout, r.stderr)
        try:
            attrs = os.listxattr(name)
        except OSError as e:
            assert e.errno == errno.ENOTSUP
            attrs = []
        assert not [a for a in attrs if a.startswith(PREFIX)], attrs
    finally:
        os.unlink(name)


def test_status_refuses_a_directory_outside_a_mount():
    d = tempfile.mkdtemp(prefix="mediafs-notmount-", dir="/tmp")
    try:
        for argv in (["status", d], ["status", d, "--json"]):
            r = mediafs(*argv)
            assert r.returncode != 0, r.stdout
            assert "not in a mediafs mount" in r.stdout + r.stderr, (argv, r.stdout, r.stderr)
    finally:
        os.rmdir(d)


# ---------------------------------------------------------------- statfs

def test_statfs_reports_cache_capacity_and_cached_bytes_as_used(mount, srv):
    data = data_of(4 * MiB, 60)
    srv.add("a.bin", data)
    m = mount(srv.url("a.bin"))
    assert m.path("a.bin").read_bytes() == data
    wait_until(lambda: xget(m.path("a.bin"), "complete") == "1", "complete")
    st = os.statvfs(m.mountpoint)
    assert st.f_frsize > 0 and st.f_blocks > 0, st
    assert st.f_blocks * st.f_frsize >= len(data), st
    assert (st.f_blocks - st.f_bfree) * st.f_frsize >= len(data), st
    assert st.f_bavail > 0, st
    cached = json.loads(xget(m.mountpoint, "stats"))["cached_bytes"]
    used = (st.f_blocks - st.f_bfree) * st.f_frsize
    assert len(data) <= used <= cached + 64 * st.f_frsize, (used, cached, st)
    # Capacity is the cache file system's (this mount's bytes plus its free
    # room), never more than that file system holds.
    cache_fs = os.statvfs(m.cache_dir)
    assert st.f_blocks * st.f_frsize <= cache_fs.f_blocks * cache_fs.f_frsize, (st, cache_fs)
    r = run("df", "-B1", m.mountpoint)
    assert r.returncode == 0, r.stderr
    assert str(m.mountpoint) in r.stdout, r.stdout


# ---------------------------------------------------------------- fstab form

def pids_serving(mnt):
    """Live processes (not us) whose command line names the mount point."""
    pids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) != os.getpid() and harness.pid_alive(int(entry)):
            if str(mnt) in harness.cmdline(int(entry)):
                pids.append(int(entry))
    return pids


@pytest.fixture
def mediafs_in_path(mediafs_bin):
    link = Path("/usr/local/bin/mediafs")
    created = False
    if not link.exists() and not link.is_symlink():
        link.symlink_to(Path(mediafs_bin).resolve())
        created = True
    try:
        yield link
    finally:
        if created and link.is_symlink():
            link.unlink()


@pytest.mark.parametrize("extra_opts", ["", ",timeout=30,preload_next=1:1M"])
def test_fstab_form_through_mount_fuse3(fuse, mediafs_in_path, server, source, tmp_path, extra_opts):
    mnt, cache = tmp_path / "mnt", tmp_path / "cache"
    mnt.mkdir()
    listing = tmp_path / "media.list"
    listing.write_text(f"{server.url('sample.mp4')}\n{server.url('small.bin')}\n")
    daemons = []
    try:
        r = subprocess.run(["mount", "-t", "fuse.mediafs", str(listing), str(mnt),
                            "-o", f"cache_dir={cache}{extra_opts}"],
                           capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
        daemons = pids_serving(mnt)
        assert r.returncode == 0, r.stdout + r.stderr
        assert harness.is_mounted(mnt)
        assert sorted(os.listdir(mnt)) == ["sample.mp4", "small.bin"]
        if extra_opts:
            with open(mnt / "sample.mp4", "rb"):
                pass
            wait_until(lambda: xget(mnt / "small.bin", "complete") == "1",
                       "preload_next to preload small.bin (smaller than 1M) whole")
        assert (mnt / "small.bin").read_bytes() == source("small.bin").read_bytes()
        assert (mnt / "sample.mp4").read_bytes() == source("sample.mp4").read_bytes()
        assert any(cache.iterdir()), "the cache_dir option was not used"
        assert daemons, "no process left serving the mount"
        r = subprocess.run(["umount", str(mnt)], capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        harness.wait_pids_gone(daemons)
        assert not any(map(harness.pid_alive, daemons)), "daemon still running 10s after umount"
    finally:
        harness.fusermount_unmount(mnt)
        for pid in set(daemons) | set(pids_serving(mnt)):
            harness.stop_pid(pid, timeout=0)


# ---------------------------------------------------------------- man page

MAN = harness.REPO / "man" / "mediafs.1"


def test_man_page_has_no_groff_warnings():
    assert MAN.exists(), f"{MAN} is missing"
    r = subprocess.run(["groff", "-man", "-ww", "-Tutf8", str(MAN)],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and r.stderr == "", r.stderr


def test_man_page_mentions_every_xattr_and_command():
    r = subprocess.run(["groff", "-man", "-Tutf8", str(MAN)],
                       capture_output=True, text=True, timeout=60,
                       env=dict(os.environ, MANWIDTH="200"))
    # Strip overstrike (bold/underline) so words can be searched.
    text = re.sub(r"\x1b\[[0-9;]*m", "", re.sub(r".\x08", "", r.stdout))
    source_text = MAN.read_text(errors="replace").replace("\\-", "-").replace("\\&", "").replace("\\fB", "") \
        .replace("\\fI", "").replace("\\fR", "").replace("\\fP", "")
    missing = []
    for key in sorted(set(FILE_READABLE + FILE_WRITABLE + ["stats", "refresh"])):
        if PREFIX + key not in text and PREFIX + key not in source_text:
            missing.append(PREFIX + key)
    for cmd in COMMANDS:
        if f"mediafs {cmd}" not in text and f"mediafs {cmd}" not in source_text:
            missing.append(f"command `mediafs {cmd}`")
    for option in ("--preload-next", "cache_dir", "preload_next", "--dir-cache-time", "dir_cache_time"):
        if option not in text and option not in source_text:
            missing.append(f"option {option}")
    assert not missing, "man/mediafs.1 does not mention: " + ", ".join(missing)
