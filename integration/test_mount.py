"""mediafs mounted for real, against the test nginx.

Every test mounts with its own mount point and (unless it says otherwise)
its own cache dir. Timeouts only keep a broken build from hanging the suite;
nothing here measures speed.
"""

import errno
import os
import random
import stat
import subprocess
import time

import pytest

import harness
from conftest import BIG_SIZE
from harness import guarded, read_range, wait_for_stderr

MAIN_FILES = ["big.bin", "small.bin", "sample.mp4", "empty.bin"]
KiB, MiB = 1024, 1024 * 1024
EIO_DEADLINE = 15.0


def urls(server, *rels):
    return [server.url(r) for r in rels]


def ls_l(directory):
    """{name: (mode string, size, mtime)} from `ls -l`, as a user sees it."""
    out = subprocess.run(["ls", "-l", "--time-style=+%s", str(directory)],
                         capture_output=True, text=True, timeout=60, check=True).stdout
    listing = {}
    for line in out.splitlines()[1:]:  # first line is "total N"
        mode, _links, _user, _group, size, mtime, name = line.split(None, 6)
        listing[name] = (mode[:10], int(size), int(mtime))
    return listing


def ffprobe_duration(path):
    out = subprocess.run(["ffprobe", "-v", "error", "-show_entries", "format=duration",
                          "-of", "csv=p=0", str(path)],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, f"ffprobe {path} failed: {out.stderr}"
    return float(out.stdout.strip())


# ---------------------------------------------------------------- listing

def test_ls_shows_each_url_as_the_owners_file_with_remote_size_and_mtime(mount, server, source):
    m = mount(*urls(server, *MAIN_FILES))
    listing = ls_l(m.mountpoint)
    assert sorted(listing) == sorted(MAIN_FILES)
    for name in MAIN_FILES:
        src = source(name).stat()
        # The owner's write bit lets the owner administer (xattrs); writes still fail (test_owners.py).
        assert listing[name] == ("-rw-r--r--", src.st_size, int(src.st_mtime)), name
        st = os.stat(m.path(name))
        assert stat.S_ISREG(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o644, name
        assert (st.st_uid, st.st_gid) == (os.getuid(), os.getgid()), name
        assert (st.st_size, int(st.st_mtime)) == (src.st_size, int(src.st_mtime)), name


def test_mount_root_is_read_only(mount, server):
    m = mount(*urls(server, "small.bin"))
    with pytest.raises(OSError) as e:
        open(m.path("small.bin"), "r+b")
    assert e.value.errno in (errno.EACCES, errno.EROFS, errno.EPERM)
    with pytest.raises(OSError):
        open(m.path("new.bin"), "wb")


def test_empty_remote_file_lists_as_zero_bytes_and_reads_nothing(mount, server):
    m = mount(*urls(server, "empty.bin", "small.bin"))
    assert os.stat(m.path("empty.bin")).st_size == 0
    assert m.path("empty.bin").read_bytes() == b""


# ---------------------------------------------------------------- content

@pytest.mark.parametrize("name", ["big.bin", "sample.mp4", "small.bin"])
def test_whole_file_read_through_mount_equals_source(mount, server, source, name):
    m = mount(*urls(server, name))
    r = subprocess.run(["cmp", str(source(name)), str(m.path(name))],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr


def test_dd_at_random_block_offsets_returns_source_bytes(mount, server, source):
    m = mount(*urls(server, "big.bin"))
    src = source("big.bin").read_bytes()
    rng = random.Random(1)
    blocks = BIG_SIZE // 4096
    for _ in range(50):
        skip, count = rng.randrange(blocks + 8), rng.randint(1, 256)
        out = subprocess.run(["dd", f"if={m.path('big.bin')}", "bs=4k", f"skip={skip}",
                              f"count={count}", "status=none"],
                             capture_output=True, timeout=120)
        assert out.returncode == 0, f"dd skip={skip} count={count}: {out.stderr.decode()}"
        assert out.stdout == src[skip * 4096:(skip + count) * 4096], f"dd skip={skip} count={count}"


def test_unaligned_preads_match_source_including_short_read_at_end(mount, server, source):
    m = mount(*urls(server, "big.bin"))
    src = source("big.bin").read_bytes()
    rng = random.Random(2)
    cases = [(rng.randrange(BIG_SIZE), rng.randint(1, 2 * MiB)) for _ in range(40)]
    cases += [(BIG_SIZE - rng.randint(1, 64 * KiB), rng.randint(64 * KiB + 1, 1 * MiB)) for _ in range(5)]
    cases += [(BIG_SIZE, 4096), (BIG_SIZE + 1, 1), (BIG_SIZE + rng.randint(1, MiB), 100_000),
              (0, 1), (BIG_SIZE - 1, 1)]
    fd = os.open(m.path("big.bin"), os.O_RDONLY)
    try:
        for offset, size in cases:
            assert os.pread(fd, size, offset) == src[offset:offset + size], f"pread({offset}, {size})"
    finally:
        os.close(fd)


def test_ffprobe_reads_duration_of_moov_at_end_mp4(mount, server, source):
    m = mount(*urls(server, "sample.mp4"))
    assert abs(ffprobe_duration(m.path("sample.mp4")) - ffprobe_duration(source("sample.mp4"))) <= 0.1


# ---------------------------------------------------------------- caching

def test_reading_cached_bytes_again_sends_no_request(mount, server, source):
    m = mount(*urls(server, "small.bin", "sample.mp4"))
    for name in ("small.bin", "sample.mp4"):
        assert m.path(name).read_bytes() == source(name).read_bytes()
    server.wait_quiet()
    assert server.log(), "the first read should have gone to the server"
    server.clear_log()
    for name in ("small.bin", "sample.mp4"):
        assert m.path(name).read_bytes() == source(name).read_bytes()
        assert read_range(m.path(name), 1000, 5000, once=True) == source(name).read_bytes()[1000:6000]
    server.wait_quiet()
    assert server.log() == []


# Ranges of big.bin a first mount reads; a later mount rereads the inner part
# of each, away from the edges, so page rounding cannot reach uncached bytes.
BIG_RANGES = [(0, 1 * MiB), (64 * MiB + 12_345, 2 * MiB), (200 * MiB + 7, 512 * KiB)]
MARGIN = 64 * KiB


def inner(offset, size):
    return offset + MARGIN, size - 2 * MARGIN


def warm_cache(mount, server, source, cache_dir):
    """Mount, read small.bin whole and BIG_RANGES of big.bin, unmount. Returns
    the spans of big.bin the server sent, with the log cleared."""
    m = mount(*urls(server, "small.bin", "big.bin"), cache_dir=cache_dir)
    assert m.path("small.bin").read_bytes() == source("small.bin").read_bytes()
    src = source("big.bin").read_bytes()
    for offset, size in BIG_RANGES:
        assert read_range(m.path("big.bin"), offset, size, once=True) == src[offset:offset + size]
    assert m.unmount() == 0, m.stderr()
    server.wait_quiet()
    spans = [e.span() for e in server.log() if e.uri == "/big.bin" and e.method == "GET"]
    server.clear_log()
    return spans


def reread_cached(m, source):
    assert ls_l(m.mountpoint)["big.bin"] == ("-rw-r--r--", BIG_SIZE, int(source("big.bin").stat().st_mtime))
    assert m.path("small.bin").read_bytes() == source("small.bin").read_bytes()
    src = source("big.bin").read_bytes()
    for offset, size in map(lambda r: inner(*r), BIG_RANGES):
        assert read_range(m.path("big.bin"), offset, size, once=True) == src[offset:offset + size]


def test_remount_lists_and_reads_cached_ranges_without_requests(mount, server, source, tmp_path):
    cache = tmp_path / "shared-cache"
    warm_cache(mount, server, source, cache)
    m = mount(*urls(server, "small.bin", "big.bin"), cache_dir=cache, extra=("-d",))
    reread_cached(m, source)
    server.wait_quiet()
    assert server.log() == [], f"requests after remount; mediafs log:\n{m.stderr()[-3000:]}"


def uncached_offset(spans, size=4096):
    """An offset of big.bin far from every span the server sent."""
    covered = sorted(spans)
    gaps, pos = [], 0
    for start, end in covered + [(BIG_SIZE, BIG_SIZE)]:
        if start - pos >= 4 * MiB:
            gaps.append((pos, start))
        pos = max(pos, end)
    if not gaps:
        return None
    start, end = max(gaps, key=lambda g: g[1] - g[0])
    return (start + (end - start) // 2) // 4096 * 4096


def test_with_server_stopped_cached_data_reads_and_uncached_fails_with_eio(mount, server, source, tmp_path):
    cache = tmp_path / "shared-cache"
    spans = warm_cache(mount, server, source, cache)
    offset = uncached_offset(spans)
    server.stop()
    m = mount(*urls(server, "small.bin", "big.bin"), cache_dir=cache, extra=("-d",))
    reread_cached(m, source)
    if offset is None:
        pytest.skip(f"the first mount fetched all of big.bin ({spans}); no uncached range left")
    started = time.monotonic()
    result = guarded(lambda: read_range(m.path("big.bin"), offset, 4096, once=True), EIO_DEADLINE,
                     what=f"read of {m.path('big.bin')} [{offset}, +4096)")
    got = repr(result) if isinstance(result, OSError) else f"{len(result)} bytes"
    assert isinstance(result, OSError) and result.errno == errno.EIO, \
        f"read at {offset} with the server down gave {got} after {time.monotonic() - started:.1f}s"
    # Still mounted and serving what it has.
    assert m.path("small.bin").read_bytes() == source("small.bin").read_bytes()


# ---------------------------------------------------------------- errors

def test_missing_and_unreachable_urls_fail_alone(mount, server, source):
    missing = server.url("missing.bin")
    unreachable = "http://127.0.0.1:1/unreachable.bin"
    m = mount(missing, unreachable, server.url("small.bin"))
    with pytest.raises(OSError) as e:
        os.stat(m.path("missing.bin"))
    assert e.value.errno == errno.ENOENT
    with pytest.raises(OSError) as e:
        os.stat(m.path("unreachable.bin"))
    assert e.value.errno == errno.EIO
    assert m.path("small.bin").read_bytes() == source("small.bin").read_bytes()
    assert wait_for_stderr(m, missing, timeout=5.0, interval=0.1), f"no log line names {missing}:\n{m.stderr()}"
    assert wait_for_stderr(m, unreachable, timeout=5.0, interval=0.1), f"no log line names {unreachable}:\n{m.stderr()}"


# ---------------------------------------------------------------- sources

def test_list_file_names_comments_duplicates_and_percent_decoding(mount, server, source, tmp_path):
    listing = tmp_path / "media.list"
    listing.write_text(
        "# mediafs test list\n"
        "\n"
        f"Movie Night.mp4\t{server.url('sample.mp4')}\n"
        f"{server.url('a/dup.bin')}\n"
        "# another comment\n"
        f"{server.url('b/dup.bin')}\n"
        "\n"
        f"{server.url('hello world.bin')}\n"
        f"{server.url('café.bin')}\n")
    assert "%20" in server.url("hello world.bin") and "%C3%A9" in server.url("café.bin")
    m = mount(listing, server.url("small.bin"))
    expected = {
        "Movie Night.mp4": "sample.mp4",
        "dup.bin": "a/dup.bin",
        "dup (2).bin": "b/dup.bin",
        "hello world.bin": "hello world.bin",
        "café.bin": "café.bin",
        "small.bin": "small.bin",
    }
    assert sorted(os.listdir(m.mountpoint)) == sorted(expected)
    for name, rel in expected.items():
        assert m.path(name).read_bytes() == source(rel).read_bytes(), name


# ---------------------------------------------------------------- lifecycle

def test_foreground_mount_exits_zero_after_fusermount_unmount(mount, server):
    m = mount(*urls(server, "small.bin"))
    m.path("small.bin").read_bytes()
    assert m.unmount() == 0, m.stderr()
    assert not harness.is_mounted(m.mountpoint)


def test_daemon_mode_returns_zero_with_mount_ready(fuse, mediafs_bin, server, source, tmp_path):
    mnt, cache = tmp_path / "mnt", tmp_path / "cache"
    mnt.mkdir()
    log = tmp_path / "mediafs.out"
    daemons = []
    try:
        with open(log, "wb") as out:
            # Output to a file, not a pipe: the daemon keeps it open.
            r = subprocess.run([str(mediafs_bin), "mount", "--cache-dir", str(cache),
                                server.url("small.bin"), str(mnt)],
                               stdin=subprocess.DEVNULL, stdout=out, stderr=out, timeout=60)
        daemons = harness.mediafs_pids(with_arg=str(mnt))
        assert r.returncode == 0, log.read_text(errors="replace")
        assert harness.is_mounted(mnt)
        assert (mnt / "small.bin").read_bytes() == source("small.bin").read_bytes()
        assert daemons, "no mediafs process left serving the mount"
        assert subprocess.run(["fusermount3", "-u", str(mnt)]).returncode == 0
        harness.wait_pids_gone(daemons)
        assert not any(map(harness.pid_alive, daemons)), "daemon still running 10s after unmount"
    finally:
        harness.fusermount_unmount(mnt)
        for pid in set(daemons) | set(harness.mediafs_pids(with_arg=str(mnt))):
            harness.stop_pid(pid, timeout=0)
