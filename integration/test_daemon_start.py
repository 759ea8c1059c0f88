"""Start-up that cannot hang. `mediafs mount` without -f used to fork in
fuse_daemonize, and the child's main thread kept its parent's cached thread
id in the Swift runtime's locks: a swift_once it then contended for (the
catalog loads a large cache on several threads) never ended, with the mount
up and every access blocked in the kernel (2 of 10 remounts of a
100,000-entry cache here). The command now starts the daemon anew and
returns once it is mounted, after its catalog is loaded; a daemon not
ready within --timeout is stopped and leaves no mount.

`make stress` runs the remount loop at full size (100,000 entries,
50 remounts)."""

import os
import subprocess
import time

import pytest

import harness

ENTRIES = int(os.environ.get("MEDIAFS_START_ENTRIES", "20000"))
REMOUNTS = int(os.environ.get("MEDIAFS_START_REMOUNTS", "6"))
STAT_DEADLINE = 10.0


def start_daemon(mediafs_bin, args, out_path, timeout=120):
    with open(out_path, "ab") as out:
        # Output to a file, not a pipe: the daemon keeps it open until mounted.
        return subprocess.run([str(mediafs_bin), "mount", *args], stdin=subprocess.DEVNULL,
                              stdout=out, stderr=out, timeout=timeout)


def stop_daemons(mnt):
    daemons = harness.mediafs_pids(with_arg=str(mnt))
    harness.fusermount_unmount(mnt)
    harness.wait_pids_gone(daemons)
    for pid in daemons:
        harness.stop_pid(pid, timeout=0)


@pytest.mark.stress
def test_remounts_of_a_large_cache_in_daemon_mode_each_answer_at_once(fuse, mediafs_bin, server, source, tmp_path):
    expected = source("small.bin").read_bytes()
    listing = tmp_path / "many.list"
    listing.write_text("".join(f"f{i:06d}.bin\t{server.url('small.bin')}?n={i}\n" for i in range(ENTRIES)))
    mnt, cache, log = tmp_path / "mnt", tmp_path / "cache", tmp_path / "mediafs.out"
    mnt.mkdir()
    args = ["--cache-dir", str(cache), str(listing), str(mnt)]
    try:
        # The first mount learns every entry's size (one probe each).
        r = start_daemon(mediafs_bin, args, log)
        assert r.returncode == 0, log.read_text(errors="replace")[-3000:]
        assert len(os.listdir(mnt)) == ENTRIES
        assert {os.stat(mnt / f"f{i:06d}.bin").st_size for i in range(ENTRIES)} == {len(expected)}
        stop_daemons(mnt)

        last = f"f{ENTRIES - 1:06d}.bin"
        for run in range(REMOUNTS):
            server.clear_log()
            r = start_daemon(mediafs_bin, args, log)
            assert r.returncode == 0, f"remount {run}: " + log.read_text(errors="replace")[-3000:]
            # Mounted means ready: a stat answers at once, from the records.
            size = harness.guarded(lambda: os.stat(mnt / last).st_size, deadline=STAT_DEADLINE, what="stat")
            assert size == len(expected), f"remount {run}"
            assert server.log() == [], f"remount {run}: a remount's stat needs no request"
            if run == 0:
                # Started anew, not forked: its first environment names the pipe.
                daemons = harness.mediafs_pids(with_arg=str(mnt))
                assert len(daemons) == 1, daemons
                with open(f"/proc/{daemons[0]}/environ", "rb") as f:
                    assert b"MEDIAFS_DAEMON_READY_FD=" in f.read(), "the daemon is a fork of the command"
            stop_daemons(mnt)
    finally:
        stop_daemons(mnt)


def test_a_daemon_not_ready_within_the_timeout_is_stopped_and_leaves_no_mount(fuse, mediafs_bin, srv, tmp_path):
    # An HLS playlist is read before mounting; its server never answers.
    srv.add("index.m3u8", b"#EXTM3U\n", content_type="application/vnd.apple.mpegurl")
    srv.set_fault("index.m3u8", "hold")
    mnt, log = tmp_path / "mnt", tmp_path / "mediafs.out"
    mnt.mkdir()
    began = time.monotonic()
    try:
        r = start_daemon(mediafs_bin, ["--cache-dir", str(tmp_path / "cache"), "--timeout", "2", "--retries", "0",
                                       srv.url("index.m3u8"), str(mnt)], log, timeout=60)
        took = time.monotonic() - began
        text = log.read_text(errors="replace")
        assert r.returncode != 0, text
        assert not harness.is_mounted(mnt), "a start that failed left its mount"
        assert harness.mediafs_pids(with_arg=str(mnt)) == [], "a start that failed left its daemon"
        assert "index.m3u8" in text or "not ready" in text, text
        print(f"failed start returned {r.returncode} after {took:.1f} s: {text.strip()[-300:]}")
    finally:
        srv.release("index.m3u8")
        stop_daemons(mnt)
