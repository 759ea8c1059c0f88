"""One cache, one user: a mount holds its cache directory's lock for its
whole life; a second mount and `mediafs cache gc|clear` are refused, naming
the holder's pid, while `cache ls` only reads; a remount right after an
unmount waits for the departing daemon instead of failing or re-probing.
A cache directory another user controls is refused, and symlinks planted in
an entry are never followed.

A holder whose mount still serves refuses at once; only a holder on its
way out (unmounted, flushing) is waited for, up to 10 s.
"""

import hashlib
import os
import subprocess
import time
from pathlib import Path

import pytest

import harness
from harness import data_of, gets, mediafs, mount_one, read_whole

KiB, MiB = 1024, 1024 * 1024
# Refused at once while the holder serves; this only stops a hang.
REFUSAL_DEADLINE = 60.0


def entry_dir(cache_dir, url):
    h = hashlib.sha256(url.encode()).hexdigest()
    return Path(cache_dir) / "v1" / h[:2] / h


def snapshot(cache_dir):
    """{relative path: (size, blocks)} of everything under v1/ and trash/."""
    out = {}
    for sub in ("v1", "trash"):
        for p in sorted((Path(cache_dir) / sub).rglob("*")):
            st = p.lstat()
            out[str(p.relative_to(cache_dir))] = (st.st_size, st.st_blocks)
    return out


def mount_expecting_refusal(url, cache_dir, mountpoint, stderr_path):
    """Runs `mediafs mount -f` that should fail before mounting. Returns
    (exit status, stderr); a mount that comes up anyway is unmounted and
    its process stopped, and the test fails."""
    mountpoint.mkdir(exist_ok=True)
    argv = [str(harness.MEDIAFS_BIN), "mount", "-f", "--cache-dir", str(cache_dir), url, str(mountpoint)]
    with open(stderr_path, "wb") as err:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=err, stderr=err)
    mounted = False
    try:
        deadline = time.monotonic() + REFUSAL_DEADLINE
        while proc.poll() is None and time.monotonic() < deadline:
            if harness.is_mounted(mountpoint):
                mounted = True
                break
            time.sleep(0.05)
    finally:
        if harness.is_mounted(mountpoint):
            mounted = True
            harness.fusermount_unmount(mountpoint)
        status = harness.stop_popen(proc, timeout=0 if mounted else harness.EXIT_TIMEOUT)
    text = Path(stderr_path).read_text(errors="replace")
    assert not mounted, f"a mount that should have been refused came up:\n{text}"
    return status, text


def test_second_mount_on_a_locked_cache_fails_naming_the_pid(mount, srv, tmp_path):
    data = data_of(2 * MiB + 5, 1)
    cache = tmp_path / "cache"
    m, path = mount_one(mount, srv, "a.bin", data, cache_dir=cache)

    status, err = mount_expecting_refusal(srv.url("a.bin"), cache, tmp_path / "second", tmp_path / "second.stderr")
    assert status != 0, f"second mount exited {status}:\n{err}"
    assert str(cache) in err and str(m.pid) in err, f"the refusal does not name {cache} and pid {m.pid}:\n{err}"

    assert m.proc.poll() is None, f"the first mount died:\n{m.stderr()}"
    assert read_whole(path) == data, "the first mount reads wrong bytes after the refused second mount"
    assert m.unmount() == 0, m.stderr()


def test_a_detached_daemon_keeps_the_lock_after_its_parent_exits(fuse, srv, tmp_path):
    """Without -f the process that took the lock forks and exits; the daemon
    it leaves must hold the lock and be the pid named, until it exits."""
    data = data_of(MiB, 7)
    srv.add("g.bin", data)
    mnt, cache = tmp_path / "mnt", tmp_path / "cache"
    mnt.mkdir()
    log = tmp_path / "daemon.out"
    daemons = []
    try:
        with open(log, "wb") as out:
            r = subprocess.run([str(harness.MEDIAFS_BIN), "mount", "--cache-dir", str(cache), srv.url("g.bin"),
                                str(mnt)], stdin=subprocess.DEVNULL, stdout=out, stderr=out, timeout=60)
        daemons = harness.mediafs_pids(with_arg=str(mnt))
        assert r.returncode == 0, log.read_text(errors="replace")
        assert len(daemons) == 1, f"expected one daemon serving {mnt}: {daemons}"
        assert read_whole(mnt / "g.bin") == data

        status, err = mount_expecting_refusal(srv.url("g.bin"), cache, tmp_path / "second",
                                              tmp_path / "second.stderr")
        assert status != 0 and str(daemons[0]) in err, f"the refusal does not name daemon {daemons[0]}:\n{err}"
        assert read_whole(mnt / "g.bin") == data

        assert subprocess.run(["fusermount3", "-u", str(mnt)]).returncode == 0
        harness.wait_pids_gone(daemons)
        assert not any(map(harness.pid_alive, daemons)), "daemon still running 10s after unmount"
        r = mediafs("cache", "clear", "--cache-dir", cache, timeout=REFUSAL_DEADLINE)
        assert r.returncode == 0, f"the lock outlived the daemon: {r.stderr}"
    finally:
        harness.fusermount_unmount(mnt)
        for pid in set(daemons) | set(harness.mediafs_pids(with_arg=str(mnt))):
            harness.stop_pid(pid, timeout=0)


@pytest.mark.parametrize("command", [["clear"], ["gc", "--cache-max-size", "0"]])
def test_cache_gc_or_clear_on_a_mounted_cache_fails_and_deletes_nothing(mount, srv, tmp_path, command):
    data = data_of(3 * MiB, 2)
    cache = tmp_path / "cache"
    m, path = mount_one(mount, srv, "b.bin", data, cache_dir=cache, extra=["--revalidate", "never"])
    assert read_whole(path) == data
    harness.wait_until(lambda: harness.xget(path, "complete") == "1", "b.bin to be complete in the cache")
    before = snapshot(cache)
    assert any(k.endswith("/data") for k in before), before

    r = mediafs("cache", *command, "--cache-dir", cache, timeout=REFUSAL_DEADLINE)
    assert r.returncode != 0, f"`cache {command[0]}` on a mounted cache succeeded: {r.stdout}"
    assert str(cache) in r.stderr and str(m.pid) in r.stderr, \
        f"the refusal does not name {cache} and pid {m.pid}: {r.stderr}"
    after = snapshot(cache)
    # The mount itself may write metadata meanwhile; nothing may go, no data shrink.
    assert set(before) <= set(after), f"`cache {command[0]}` removed {sorted(set(before) - set(after))}"
    assert {k: v for k, v in after.items() if k.endswith("/data")} == \
        {k: v for k, v in before.items() if k.endswith("/data")}, f"`cache {command[0]}` changed data files"

    srv.clear_log()
    assert read_whole(path) == data
    assert gets(srv, "b.bin") == [], "the mount lost cached bytes to a refused command"

    # Listing only reads: allowed, with a note naming the holder. The mount
    # saves the entry's metadata on its own schedule: the refusal no longer
    # waits 10 s for it, so the listing is asked until it names the file.
    listed = []

    def lists_the_file():
        listed[:] = [mediafs("cache", "ls", "--cache-dir", cache)]
        return listed[0].returncode == 0 and srv.url("b.bin") in listed[0].stdout

    harness.wait_until(lists_the_file, "`cache ls` to list b.bin once its metadata is saved")
    r = listed[0]
    assert str(m.pid) in r.stderr, f"`cache ls` of a cache in use does not say who uses it: {r.stderr!r}"
    assert m.unmount() == 0, m.stderr()

    # Unmounted: the same command now works.
    r = mediafs("cache", *command, "--cache-dir", cache)
    assert r.returncode == 0, r.stderr
    assert not entry_dir(cache, srv.url("b.bin")).exists(), f"`cache {command[0]}` left the entry"


def test_remount_right_after_unmount_succeeds_and_sees_the_cache(mount, srv, tmp_path):
    """Many entries make the departing daemon's final flush take a while: a
    remount that did not wait for it would probe the entries not yet saved."""
    files = {f"f{i:03}.bin": data_of(4 * KiB + i, 1000 + i) for i in range(200)}
    for name, data in files.items():
        srv.add(name, data)
    urls = [srv.url(name) for name in files]
    cache = tmp_path / "cache"
    extra = ["--revalidate", "never"]
    m = mount(*urls, cache_dir=cache, extra=extra)
    for name, data in files.items():
        assert read_whole(m.path(name)) == data
    for i in range(5):
        # Not Mount.unmount(): that waits for the daemon to exit.
        r = subprocess.run(["fusermount3", "-u", str(m.mountpoint)], capture_output=True, text=True, timeout=30)
        assert r.returncode == 0, f"iteration {i}: fusermount3 -u: {r.stderr}"
        srv.clear_log()
        old = m
        m = mount(*urls, cache_dir=cache, extra=extra)
        assert old.unmount() == 0, f"iteration {i}: the unmounted daemon exited badly:\n{old.stderr()}"
        for name, data in files.items():
            assert read_whole(m.path(name)) == data, f"iteration {i}: wrong bytes in {name} after the remount"
        assert srv.requests == [], \
            f"iteration {i}: the remount did not find {len(srv.requests)} entries the departing daemon saved"
    assert m.unmount() == 0, m.stderr()


def test_a_restart_mid_read_with_no_room_ends_the_transfer_and_the_new_mount_never_fails(mount, srv, tmp_path):
    """A service's restart (issue 55): a reader in the middle of a file its
    server drips, on a cache with no room to keep bytes (`--cache-min-free`
    above any disk: reads pass through); the mount is detached (what
    `fusermount3 -u` does once the last file closes: here the reader is
    killed after) and mounted again at once on the same cache, 20 times.
    Each new mount comes up (it waits for the departing daemon's lock,
    never "in use"), each departing daemon exits 0, and the server sent
    far less than 20 files: each daemon stopped its transfer rather than
    draining it."""
    size = 32 * MiB
    srv.add("drip.bin", data_of(size, 21))
    srv.set_fault("drip.bin", "drip", bytes_per_sec=4_000_000, chunk=64 * KiB)
    cache = tmp_path / "cache-restart"
    extra = ["--cache-min-free", "1000T"]
    m = mount(srv.url("drip.bin"), cache_dir=cache, extra=extra)
    for i in range(20):
        sent = srv.bytes_sent("drip.bin")
        reader = subprocess.Popen(["dd", f"if={m.path('drip.bin')}", "of=/dev/null", "bs=64k"],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            harness.wait_until(lambda: srv.bytes_sent("drip.bin") > sent + 256 * KiB,
                               f"cycle {i}: the reader's bytes to flow")
            r = subprocess.run(["fusermount3", "-uz", str(m.mountpoint)], capture_output=True, text=True, timeout=30)
            assert r.returncode == 0, f"cycle {i}: fusermount3 -uz: {r.stderr}"
        finally:
            reader.kill()
            reader.wait()
        old = m
        m = mount(srv.url("drip.bin"), cache_dir=cache, extra=extra)
        assert old.unmount() == 0, f"cycle {i}: the departing daemon exited badly:\n{old.stderr()[-3000:]}"
    assert m.unmount() == 0, m.stderr()
    sent = sum(r.bytes_sent for r in srv.wait_idle() if r.name == "drip.bin" and r.method == "GET")
    # Drained, each daemon's would have run to the file's end: 20 files.
    assert sent < 4 * size, f"{sent} B sent for 20 restarts: the departing daemons drained their transfers"


@pytest.mark.parametrize("how", ["mode 0777", "owned by nobody"])
def test_cache_directory_another_user_controls_is_refused(fuse, srv, tmp_path, how):
    srv.add("d.bin", data_of(KiB, 4))
    cache = tmp_path / "cache"
    cache.mkdir()
    if how == "mode 0777":
        os.chmod(cache, 0o777)
        expected = "writable by other users"
    else:
        os.chmod(cache, 0o700)
        os.chown(cache, 65534, 65534)
        expected = "belongs to uid 65534"

    status, err = mount_expecting_refusal(srv.url("d.bin"), cache, tmp_path / "mnt", tmp_path / "mnt.stderr")
    assert status != 0 and str(cache) in err and expected in err, f"exit {status}:\n{err}"
    r = mediafs("cache", "gc", "--cache-dir", cache)
    assert r.returncode != 0 and expected in r.stderr, r.stderr
    assert sorted(os.listdir(cache)) == [], "a refused cache directory was written into"


@pytest.mark.parametrize("planted", ["data", "meta"])
def test_a_symlink_planted_in_an_entry_is_not_followed(mount, srv, tmp_path, planted):
    """A link someone planted is a miss: the file is fetched again and reads
    right, and the link's target is neither read as cache nor written."""
    data = data_of(2 * MiB + 77, 5)
    cache = tmp_path / "cache"
    extra = ["--revalidate", "never"]
    m, path = mount_one(mount, srv, "e.bin", data, cache_dir=cache, extra=extra)
    assert read_whole(path) == data
    harness.wait_until(lambda: harness.xget(path, "complete") == "1", "e.bin to be complete in the cache")
    assert m.unmount() == 0, m.stderr()

    entry = entry_dir(cache, srv.url("e.bin"))
    wrong = data_of(len(data), 6)
    decoy = tmp_path / f"decoy-{planted}"
    if planted == "data":
        # The metadata still says complete: following the link would serve the decoy.
        decoy.write_bytes(wrong)
        (entry / "data").unlink()
    else:
        # Good metadata behind the link, wrong bytes in data: following it would serve them.
        (entry / "meta").rename(decoy)
        (entry / "data").write_bytes(wrong)
    decoy_bytes = decoy.read_bytes()
    (entry / planted).symlink_to(decoy)

    m = mount(srv.url("e.bin"), cache_dir=cache, extra=extra)
    path = m.path("e.bin")
    assert os.stat(path).st_size == len(data)
    assert read_whole(path) == data, f"a planted {planted} link was followed: wrong bytes"
    assert gets(srv, "e.bin"), f"a planted {planted} link was trusted: no request after the remount"
    assert decoy.read_bytes() == decoy_bytes, f"the target of the planted {planted} link was written"
    assert m.unmount() == 0, m.stderr()
    assert not (entry / planted).is_symlink(), f"the planted {planted} link is still there after a clean unmount"
