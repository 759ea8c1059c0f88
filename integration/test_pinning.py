"""Pinned files, end to end: `mediafs pin|unpin` and `user.mediafs.pin` keep a
file's cached bytes while other reads overrun `--cache-max-size` several
times over, the limit holding for the rest; the pin survives a remount and
the offline `cache gc`; pinned bytes alone over the limit are kept, said
once in the log and in `status`, and new bytes then pass uncached.

Servers are in-process FaultServers, so each GET can be counted. Timeouts
are hang guards only.
"""

import hashlib
import json
import threading
import time

from harness import data_of, disk_usage, gets, mediafs, read_whole, wait_until, xget, xset

KiB, MiB = 1024, 1024 * 1024
# On top of a limit: metadata files, the lock, directories, and file-system
# blocks the byte count cannot see at the edges of punched ranges.
SLACK = 1 * MiB
WAIT = 30.0
MOUNT_ARGS = ["--timeout", "10", "--no-passthrough", "--cache-min-free", "0"]
WARNING = "more than the cache limit"


def serve(srv, files):
    for name, data in files.items():
        srv.add(name, data)
    return [srv.url(name) for name in files]


def cached(path):
    return int(xget(path, "cached_bytes"))


def stats(m):
    return json.loads(xget(m.mountpoint, "stats"))


def read_checked(path, data):
    got = read_whole(path)
    assert hashlib.sha256(got).digest() == hashlib.sha256(data).digest(), f"{path}: wrong bytes"


def test_a_pinned_complete_file_stays_complete_while_other_reads_overrun_the_limit(mount, srv):
    keep = data_of(6 * MiB, 1)
    others = {f"o{i}.bin": data_of(8 * MiB, 10 + i) for i in range(6)}
    limit = 16 * MiB
    m = mount(*serve(srv, {"keep.bin": keep, **others}),
              extra=MOUNT_ARGS + ["--cache-max-size", "16M"])
    r = mediafs("pin", m.path("keep.bin"))
    assert r.returncode == 0, r.stderr
    assert xget(m.path("keep.bin"), "pin") == "1"
    read_checked(m.path("keep.bin"), keep)
    wait_until(lambda: xget(m.path("keep.bin"), "complete") == "1", "the pinned file to be complete")

    peak = 0
    done = threading.Event()

    def sample():
        nonlocal peak
        while not done.is_set():
            peak = max(peak, disk_usage(m.cache_dir))
            done.wait(0.01)

    sampler = threading.Thread(target=sample)
    sampler.start()
    try:
        # 48 MiB through a 16 MiB cache, 6 MiB of which are pinned.
        for name, data in others.items():
            read_checked(m.path(name), data)
    finally:
        done.set()
        sampler.join()
    assert peak <= limit + SLACK, f"the cache held {peak} bytes under a {limit}-byte limit"
    assert xget(m.path("keep.bin"), "complete") == "1", "a pinned file lost bytes to eviction"
    assert cached(m.path("keep.bin")) == len(keep)
    # The rest is within what the pinned file leaves of the limit, and uses it.
    assert sum(cached(m.path(n)) for n in others) <= limit - len(keep)
    assert cached(m.path("o5.bin")) > 0, "the file read last was not cached beside the pinned one"
    srv.clear_log()
    read_checked(m.path("keep.bin"), keep)
    assert not gets(srv, "keep.bin"), "the pinned file was fetched again"
    assert not stats(m)["pinned_over_limit"]
    status = mediafs("status", m.mountpoint)
    assert status.returncode == 0, status.stderr
    assert any("pinned" in line and line.endswith("keep.bin") for line in status.stdout.splitlines()), status.stdout


def test_the_pin_survives_a_remount_and_unpinning_lets_the_file_be_evicted(mount, srv, tmp_path):
    keep = data_of(6 * MiB, 2)
    others = {f"p{i}.bin": data_of(10 * MiB, 20 + i) for i in range(3)}
    # Read only after the unpin: files read before are in the kernel's page cache.
    later = {f"q{i}.bin": data_of(10 * MiB, 30 + i) for i in range(2)}
    urls = serve(srv, {"keep.bin": keep, **others, **later})
    cache = tmp_path / "cache-remount"
    m = mount(*urls, extra=MOUNT_ARGS + ["--cache-max-size", "16M"], cache_dir=cache)
    xset(m.path("keep.bin"), "pin", "1")
    read_checked(m.path("keep.bin"), keep)
    wait_until(lambda: xget(m.path("keep.bin"), "complete") == "1", "the pinned file to be complete")
    assert m.unmount() == 0

    ls = mediafs("cache", "ls", "--cache-dir", cache)
    row = next(line for line in ls.stdout.splitlines() if line.endswith(srv.url("keep.bin")))
    assert row.split()[3:5] == ["yes", "yes"], ls.stdout  # complete, pinned

    # Last access is kept in whole seconds: every read below must be later
    # than keep.bin's, or a tie (the whole test can run within a second)
    # lets the evictor take a newer file first and keep.bin fits after all.
    time.sleep(1.1)
    m = mount(*urls, extra=MOUNT_ARGS + ["--cache-max-size", "16M"], cache_dir=cache)
    assert xget(m.path("keep.bin"), "pin") == "1", "the pin was lost across a remount"
    for name, data in others.items():
        read_checked(m.path(name), data)
    assert xget(m.path("keep.bin"), "complete") == "1"

    r = mediafs("unpin", m.path("keep.bin"))
    assert r.returncode == 0, r.stderr
    assert xget(m.path("keep.bin"), "pin") == "0"
    # keep.bin is now the least recently read; the next reads push it out.
    for name, data in later.items():
        read_checked(m.path(name), data)
    wait_until(lambda: cached(m.path("keep.bin")) == 0, "the unpinned file to be evicted")
    wait_until(lambda: disk_usage(cache) <= 16 * MiB + SLACK, "the cache to be within its limit")


def test_pinned_bytes_alone_over_the_limit_are_kept_said_once_and_leave_new_bytes_uncached(mount, srv, tmp_path):
    keep = data_of(8 * MiB, 3)
    other = data_of(4 * MiB, 4)
    urls = serve(srv, {"keep.bin": keep, "other.bin": other})
    cache = tmp_path / "cache-over"
    m = mount(*urls, extra=MOUNT_ARGS + ["--cache-max-size", "64M"], cache_dir=cache)
    xset(m.path("keep.bin"), "pin", "1")
    read_checked(m.path("keep.bin"), keep)
    wait_until(lambda: xget(m.path("keep.bin"), "complete") == "1", "the pinned file to be complete")
    assert m.unmount() == 0

    m = mount(*urls, extra=MOUNT_ARGS + ["--cache-max-size", "4M"], cache_dir=cache)
    wait_until(lambda: stats(m)["pinned_over_limit"], "stats to say pinned bytes exceed the limit")
    assert stats(m)["pinned_bytes"] >= len(keep)
    assert xget(m.path("keep.bin"), "complete") == "1", "pinned bytes were evicted to meet the limit"
    # Several reads, each waking the evictor, and at least one timed pass.
    for _ in range(3):
        read_checked(m.path("other.bin"), other)
    wait_until(lambda: srv.wait_idle(WAIT) is not None and cached(m.path("other.bin")) == 0,
               "the other file's bytes to pass uncached")
    assert xget(m.path("keep.bin"), "complete") == "1"
    status = mediafs("status", m.mountpoint)
    assert status.returncode == 0 and WARNING in status.stdout, status.stdout + status.stderr
    assert m.stderr().count(WARNING) == 1, "the state was not logged exactly once:\n" + m.stderr()

    xset(m.path("keep.bin"), "pin", "0")
    wait_until(lambda: not stats(m)["pinned_over_limit"], "stats to say pinned bytes fit again")
    wait_until(lambda: "fit under the cache limit again" in m.stderr(), "the log to say pinned bytes fit again")
    assert m.stderr().count(WARNING) == 1


def test_offline_cache_gc_keeps_a_pinned_entry_and_says_it_is_over_the_limit(mount, srv, tmp_path):
    keep = data_of(3 * MiB, 5)
    other = data_of(3 * MiB, 6)
    urls = serve(srv, {"keep.bin": keep, "other.bin": other})
    cache = tmp_path / "cache-gc"
    m = mount(*urls, extra=MOUNT_ARGS, cache_dir=cache)
    xset(m.path("keep.bin"), "pin", "1")
    read_checked(m.path("keep.bin"), keep)
    read_checked(m.path("other.bin"), other)
    wait_until(lambda: xget(m.path("other.bin"), "complete") == "1", "the other file to be complete")
    assert m.unmount() == 0

    r = mediafs("cache", "gc", "--cache-dir", cache, "--cache-max-size", "1M", "--cache-min-free", "0")
    assert r.returncode == 0, r.stderr
    assert "pinned entries take" in r.stdout, r.stdout
    ls = mediafs("cache", "ls", "--cache-dir", cache).stdout
    assert srv.url("keep.bin") in ls and srv.url("other.bin") not in ls, ls


def test_pin_takes_only_0_or_1_and_the_commands_need_a_path(mount, srv):
    m = mount(*serve(srv, {"a.bin": data_of(10 * KiB, 7)}), extra=MOUNT_ARGS)
    try:
        xset(m.path("a.bin"), "pin", "yes")
    except OSError as e:
        assert e.errno == 22, e
    else:
        raise AssertionError("pin=yes was accepted")
    assert xget(m.path("a.bin"), "pin") == "0"
    for command in ("pin", "unpin"):
        r = mediafs(command)
        assert r.returncode == 2 and "mediafs pin|unpin PATH" in r.stderr, r.stderr
