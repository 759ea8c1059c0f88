"""The daemon's end, sudden or polite: kill -9 right after a purge or after
the evictor freed bytes (a tiny --cache-max-size), then a remount on the
same cache must read every file byte for byte; and mount, read, unmount at
once, many times over, must end with exit status 0 every time.

Files come from an nginx of the test's own (tmp_path/www). Bounds only keep
a broken build from hanging the suite; nothing here measures speed.
"""

import hashlib
import os
import random
import signal
import subprocess
from pathlib import Path

import pytest

import harness
from conftest import Nginx
from harness import data_of, guarded, read_range, read_whole, wait_until, xget, xset

KiB, MiB = 1024, 1024 * 1024
SEED = 20251011
FILES = {"big.bin": 12 * MiB, "mid.bin": 5 * MiB, "small.bin": 2 * MiB}
LIMITED = ("--cache-max-size", "8M", "--timeout", "10")
FLUSH_WAIT = 15.0      # metadata is flushed every 5 s
FREED = ("to keep the cache within its limit", "evicted ")


@pytest.fixture
def web(tmp_path):
    """An nginx of this test's own serving FILES from tmp_path/www; returns
    (nginx, {name: bytes}). It can be stopped and started again on its port."""
    root, work = tmp_path / "www", tmp_path / "nginx"
    root.mkdir()
    work.mkdir()
    files = {}
    for i, (name, size) in enumerate(FILES.items()):
        files[name] = data_of(size, SEED + i)
        (root / name).write_bytes(files[name])
    server = Nginx(work, root)
    server.start()
    try:
        yield server, files
    finally:
        server.stop()


def meta_path(cache_dir, url):
    h = hashlib.sha256(url.encode()).hexdigest()
    return Path(cache_dir) / "v1" / h[:2] / h / "meta"


def claimed_on_disk(cache_dir, url):
    """Bytes the metadata on disk claims present (0 without metadata)."""
    try:
        text = meta_path(cache_dir, url).read_text()
    except FileNotFoundError:
        return 0
    for line in text.splitlines():
        if line.startswith("present "):
            ranges = [r.split("-") for r in line[len("present "):].split(",") if r.strip()]
            return sum(int(last) - int(first) + 1 for first, last in ranges)
    return 0


def wait_flushed(cache_dir, m, files, nginx):
    """Until the metadata on disk of every file claims what the mount says
    it holds: a flush wrote down every byte the reads cached. (A file whose
    bytes all passed uncached under the limit has nothing new to write.)"""
    def flushed():
        return all(claimed_on_disk(cache_dir, nginx.url(n)) == int(xget(m.path(n), "cached_bytes"))
                   for n in files)
    wait_until(flushed, "metadata of every file to be flushed", timeout=FLUSH_WAIT)


def kill_9(m):
    os.kill(m.pid, signal.SIGKILL)
    m.proc.wait(harness.EXIT_TIMEOUT)
    subprocess.run(["fusermount3", "-uz", str(m.mountpoint)], capture_output=True, timeout=30)
    m.unmount()
    assert not harness.is_mounted(m.mountpoint)


def first_difference(got, want):
    if isinstance(got, BaseException):
        return repr(got)
    if len(got) != len(want):
        return f"{len(got)} bytes, want {len(want)}"
    page = next(i for i in range(0, len(got), 4096) if got[i:i + 4096] != want[i:i + 4096])
    zeros = got[page:page + 4096].count(0) == len(got[page:page + 4096])
    return f"first wrong 4 KiB page at {page}{' (zeros)' if zeros else ''}"


def check_remount(mount, nginx, files, cache, round_, how, crashed_log):
    """Remount on the crashed cache: every cached range, then every file
    whole, must be the source's bytes."""
    m = mount(*(nginx.url(n) for n in files), extra=("--timeout", "10"), cache_dir=cache)
    wrong = []
    for name, data in files.items():
        path = m.path(name)
        for part in filter(None, xget(path, "cached_ranges").split(",")):
            a, b = map(int, part.split("-"))
            got = guarded(lambda: read_range(path, a, b + 1 - a))
            if got != data[a:b + 1]:
                wrong.append(f"{name}: cached {a}-{b}: {first_difference(got, data[a:b + 1])}")
        got = guarded(lambda: read_whole(path))
        if got != data:
            wrong.append(f"{name}: whole read: {first_difference(got, data)}")
    assert not wrong, (f"round {round_}, killed right after {how}:\n  " + "\n  ".join(wrong)
                       + f"\ncrashed daemon's log, last lines:\n{crashed_log[-1500:]}")
    assert m.unmount() == 0, m.stderr()[-2000:]


@pytest.mark.parametrize("freeing", ["purge", "eviction"])
def test_kill_9_right_after_freeing_bytes_then_a_remount_reads_every_file_exactly(mount, web, tmp_path, freeing):
    nginx, files = web
    urls = [nginx.url(n) for n in files]
    cache = tmp_path / "cache-crash"
    rng = random.Random(SEED)
    for round_ in range(3):
        m = mount(*urls, extra=LIMITED, cache_dir=cache)
        # More than the limit, so the evictor has work at its next pass.
        for name, data in files.items():
            start = rng.randrange(0, len(data) // 2, 4096)
            assert guarded(lambda: read_range(m.path(name), start, len(data) - start)) == data[start:], name
        if freeing == "purge":
            # Metadata on disk claims the bytes; the purge frees them.
            wait_flushed(cache, m, files, nginx)
            for name in rng.sample(list(files), 2):
                xset(m.path(name), "purge", "1")
        else:
            # The evictor frees bytes right after a flush wrote them down.
            wait_until(lambda: any(t in m.stderr() for t in FREED), "the evictor to free bytes over an 8M limit",
                       timeout=FLUSH_WAIT, interval=0.01)
        kill_9(m)
        check_remount(mount, nginx, files, cache, round_, "a purge" if freeing == "purge" else "an eviction",
                      m.stderr())
    print(f"\nkill -9 right after each {freeing}: 3 rounds, every remount read {len(files)} files exactly")


@pytest.mark.parametrize("purge_first", [False, True], ids=["read", "read-purge"])
def test_mount_read_unmount_at_once_twenty_times_exits_zero_every_time(mount, web, tmp_path, purge_first):
    nginx, files = web
    cache = tmp_path / "cache-cycle"
    statuses = []
    for i in range(20):
        m = mount(*(nginx.url(n) for n in files), cache_dir=cache)
        for name, data in files.items():
            assert guarded(lambda: read_whole(m.path(name))) == data, f"cycle {i}: {name}"
        if purge_first:
            # Invalidations of the kernel's pages in flight at the unmount.
            xset(m.mountpoint, "purge", "1")
        r = subprocess.run(["fusermount3", "-u", str(m.mountpoint)], capture_output=True, text=True, timeout=30)
        assert r.returncode == 0, f"cycle {i}: fusermount3 -u: {r.stderr}"
        try:
            status = m.proc.wait(harness.EXIT_TIMEOUT)
        except subprocess.TimeoutExpired:
            status = f"still running {harness.EXIT_TIMEOUT:.0f}s after the unmount"
        m.unmount()
        statuses.append(status)
        assert status == 0, f"cycle {i}: daemon ended with {status}\n{m.stderr()[-3000:]}"
    print(f"\nmount/read/unmount{' after a purge' if purge_first else ''}: {len(statuses)} cycles, "
          f"exit statuses {sorted(set(statuses))}")
