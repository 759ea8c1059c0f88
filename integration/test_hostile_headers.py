"""Hostile response headers: a date with a 17-digit year, a range ending at
Int64.max, a length past 2^62, an unparseable Content-Range.

Each once trapped the daemon (an overflow), and the date did so again on
every later mount of the cache it was stored in. Here each is served for one
file beside an honest one, on a first mount and on a remount of the cache the
first left: the daemon lives (the mount point answers, the honest file reads
right, the daemon exits 0), and the hostile file gives EIO or its true bytes,
never other bytes.
"""

import errno
import os
import subprocess
import urllib.request

import pytest

from harness import data_of, gets, guarded, read_range, read_whole

KiB = 1024
MOUNT_ARGS = ("--timeout", "10", "--retries", "1")
INT64_MAX = str(2**63 - 1)

# id -> (behaviour, options)
CASES = {
    "huge_date": ("huge_date", {"year": "99999999999999999"}),
    "huge_range_end": ("huge_range_end", {"end": INT64_MAX}),
    "length_int64_max": ("huge_length", {"length": INT64_MAX}),
    "length_past_int64": ("huge_length", {"length": str(2**64)}),
    "length_at_the_limit": ("huge_length", {"length": str(2**62)}),
    "content_range_garbage": ("bad_content_range", {"value": "bytes garbage"}),
    "content_range_backwards": ("bad_content_range", {"value": "bytes 9-2/100"}),
}


def stat_or_error(path):
    try:
        return os.stat(path)
    except OSError as e:
        return e


def assert_eio(result, what):
    assert isinstance(result, OSError), f"{what}: got {result!r}, want EIO"
    assert result.errno == errno.EIO, f"{what}: {result!r}, want EIO"


def assert_bytes_or_error(result, want, what, errors=(errno.EIO,)):
    if isinstance(result, OSError):
        assert result.errno in errors, f"{what}: {result!r}, want the bytes or {errors}"
    else:
        assert result == want, f"{what}: WRONG BYTES ({len(result)} bytes, want {len(want)})"


def assert_alive(m, good, good_data, what):
    assert m.proc.poll() is None, f"{what}: the daemon exited with {m.proc.returncode}\n{m.stderr()}"
    # ENOTCONN here is what a dead daemon leaves behind.
    assert "good.bin" in os.listdir(m.mountpoint), f"{what}: the mount point no longer lists its files"
    assert guarded(lambda: read_whole(good)) == good_data, f"{what}: the honest file read wrong"


def check_mount(m, srv, case, data, good_data, what):
    """ls -l, stat and reads of the hostile file; whatever they give, the
    daemon and the honest file beside it are fine afterwards."""
    bad, good = m.path("bad.bin"), m.path("good.bin")
    listing = subprocess.run(["ls", "-l", str(m.mountpoint)], capture_output=True, text=True, timeout=60)
    assert "good.bin" in listing.stdout, f"{what}: ls -l shows\n{listing.stdout}{listing.stderr}"
    st = guarded(lambda: stat_or_error(bad), what="stat")
    assert_alive(m, good, good_data, f"{what}, after stat")

    if case == "huge_date":
        assert not isinstance(st, OSError), f"{what}: {st!r}"
        assert st.st_size == len(data) and st.st_mtime == 0, f"{what}: size {st.st_size}, mtime {st.st_mtime}"
        assert guarded(lambda: read_whole(bad)) == data, f"{what}: the file read wrong"
    elif case in ("huge_range_end", "content_range_garbage", "content_range_backwards"):
        # The HEAD is honest; every ranged answer is not.
        assert not isinstance(st, OSError) and st.st_size == len(data), f"{what}: {st!r}"
        assert_eio(guarded(lambda: read_range(bad, 0, 4 * KiB)), f"{what}: first read")
    elif case in ("length_int64_max", "length_past_int64"):
        assert_eio(st, f"{what}: stat")
        assert_eio(guarded(lambda: read_range(bad, 0, 4 * KiB)), f"{what}: open and read")
    else:
        # 2^62 is within bounds: an ext4 cache refuses a data file that long
        # (EFBIG, passed on), a filesystem that takes it serves the true
        # bytes, and past them the server's 416 is EIO, never zeros.
        if isinstance(st, OSError):
            assert st.errno in (errno.EIO, errno.EFBIG), f"{what}: stat: {st!r}"
        else:
            assert st.st_size == 2**62, f"{what}: size {st.st_size}"
            assert_eio(guarded(lambda: read_range(bad, 2**61, 4 * KiB)), f"{what}: read past the true bytes")
        assert_bytes_or_error(guarded(lambda: read_range(bad, 0, len(data))), data, f"{what}: read",
                              (errno.EIO, errno.EFBIG))
    assert_alive(m, good, good_data, f"{what}, after reads")


@pytest.mark.parametrize("case", list(CASES))
def test_hostile_header_fails_only_its_file_on_a_mount_and_a_remount_of_its_cache(mount, srv, tmp_path, case):
    behaviour, options = CASES[case]
    data, good_data = data_of(200 * KiB + 7, 1), data_of(150 * KiB + 3, 2)
    srv.add("good.bin", good_data)
    srv.add("bad.bin", data)
    srv.set_fault("bad.bin", behaviour, **options)
    cache = tmp_path / "shared-cache"
    urls = (srv.url("good.bin"), srv.url("bad.bin"))

    first = mount(*urls, extra=MOUNT_ARGS, cache_dir=cache)
    check_mount(first, srv, case, data, good_data, f"{case}, first mount")
    assert first.unmount() == 0, f"{case}: the first daemon exited with {first.returncode}\n{first.stderr()}"

    srv.clear_log()
    second = mount(*urls, extra=MOUNT_ARGS, cache_dir=cache)
    check_mount(second, srv, case, data, good_data, f"{case}, remount")
    if case == "huge_date":
        # The stored header was parsed again, and the bytes came from the cache.
        assert gets(srv, "bad.bin") == [], f"{case}: the remount fetched the file again"
    assert second.unmount() == 0, f"{case}: the second daemon exited with {second.returncode}\n{second.stderr()}"


@pytest.mark.parametrize("case", list(CASES))
def test_faultserver_sends_the_hostile_header_it_is_asked_for_and_honest_bytes(srv, case):
    behaviour, options = CASES[case]
    data = data_of(10 * KiB, 3)
    srv.add("bad.bin", data)
    srv.set_fault("bad.bin", behaviour, **options)
    head = urllib.request.urlopen(urllib.request.Request(srv.url("bad.bin"), method="HEAD"), timeout=10)
    with head:
        assert head.headers["Content-Length"] == options.get("length", str(len(data)))
        if behaviour == "huge_date":
            assert head.headers["Last-Modified"] == "Sun, 06 Nov 99999999999999999 08:49:37 GMT"
    ranged = urllib.request.Request(srv.url("bad.bin"), headers={"Range": "bytes=0-99"})
    with urllib.request.urlopen(ranged, timeout=10) as response:
        headers, body = response.headers, response.read()
    assert response.status == 206
    want = {
        "huge_date": "bytes 0-99/%d" % len(data),
        "huge_range_end": "bytes 0-%s/*" % INT64_MAX,
        "huge_length": "bytes 0-99/%s" % options.get("length"),
        "bad_content_range": options.get("value"),
    }[behaviour]
    assert headers["Content-Range"] == want
    assert body == data[:100], f"{case}: the body is not the file's bytes"
