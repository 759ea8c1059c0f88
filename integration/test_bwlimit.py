"""`--bwlimit RATE`: one download limit for the whole mount.

Functional bounds only: a cold read cannot beat the limit (a lower bound
on its time), and its bytes are right. How close to the limit it runs is
measured by `make bench`, not asserted here.
"""

import subprocess
import time

import harness
from harness import data_of, read_whole

MiB = 1024 * 1024


def test_a_cold_read_of_32_mib_under_bwlimit_8m_takes_at_least_4_s_and_is_right(mount, srv):
    data = data_of(32 * MiB, 7)
    srv.add("a.bin", data)
    path = mount(srv.url("a.bin"), extra=["--bwlimit", "8M"]).path("a.bin")
    # From the lookup on: its probe brings the first bytes, under the limit too.
    started = time.monotonic()
    got = read_whole(path)
    took = time.monotonic() - started
    assert got == data
    assert took >= 4.0, f"32 MiB in {took:.2f} s: faster than 8 MiB/s"
    assert took < 60, "a hang, not a limit"
    assert srv.bytes_sent() <= len(data) * 1.01


def test_bwlimit_as_a_mount_option_limits_too(mount, srv):
    data = data_of(4 * MiB, 8)
    srv.add("a.bin", data)
    path = mount(srv.url("a.bin"), extra=["-o", "bwlimit=1M"]).path("a.bin")
    started = time.monotonic()   # from the lookup on, whose probe brings the first bytes
    assert read_whole(path) == data
    assert time.monotonic() - started >= 4.0


def test_a_bad_bwlimit_is_refused_before_mounting(fuse, mediafs_bin, srv, tmp_path):
    srv.add("a.bin", b"x" * 1000)
    mountpoint = tmp_path / "mnt"
    mountpoint.mkdir()
    for bad in ["", "fast", "-8M", "1K", "0", "9999999999999G"]:
        proc = subprocess.Popen([str(mediafs_bin), "mount", "-f", "--cache-dir", str(tmp_path / "cache"),
                                 f"--bwlimit={bad}", srv.url("a.bin"), str(mountpoint)],
                                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        try:
            output, _ = proc.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            harness.fusermount_unmount(mountpoint)
            harness.stop_popen(proc, timeout=0)
            raise AssertionError(f"--bwlimit {bad!r} was accepted and mounted")
        assert proc.returncode != 0, f"--bwlimit {bad!r} was accepted"
        assert "--bwlimit" in output.decode(errors="replace")
        assert not harness.is_mounted(mountpoint)
