"""A refresh that adds, removes or changes names tells the kernel of exactly
those at once (decision 0051): a name it held as missing (a negative entry,
kept `negative_timeout`) stats at once once a refresh added it; a removed
one is gone at once; a changed one shows its new size at once. Each refresh
here is the user's (`user.mediafs.refresh`) or the remote control's
(`vfs/refresh`); the same path serves a poll's and the timer's.

Nothing is asserted of a clock: the notifications are sent from the
daemon's invalidations worker, so a test waits (bounded) for the root's
`kernel_entry_notifications` count to reach what the refresh changed, then
stats with no wait. Without the notifications the stats fail: the kernel
answers from what it held for up to a second (entry and negative timeouts).
"""

import base64
import json
import os
import signal
import time
import urllib.request

import pytest

from harness import autoindex_html, free_port, is_mounted, wait_until, xget, xset

MOUNT_ARGS = ["--timeout", "10"]
ROUNDS = 5


def serve(srv, top, sub):
    """/media/ holds `top` and the folder sub/, which holds `sub`; both
    indexes give each file's length, as nginx's do."""
    for name, data in top.items():
        srv.add(f"media/{name}", data)
    for name, data in sub.items():
        srv.add(f"media/sub/{name}", data)
    top_links = [(n, n) for n in sorted(top)] + [("sub/", "sub/")]
    srv.add("media/", autoindex_html("/media/", top_links, {n: len(d) for n, d in top.items()}).encode(),
            content_type="text/html")
    srv.add("media/sub/", autoindex_html("/media/sub/", [(n, n) for n in sorted(sub)],
                                         {n: len(d) for n, d in sub.items()}).encode(), content_type="text/html")


def notifications(m):
    return json.loads(xget(m.mountpoint, "stats"))["kernel_entry_notifications"]


def refreshed(m, directory, before, names):
    """Refreshes `directory` and waits until the kernel was told of `names`
    more entries than `before`."""
    xset(directory, "refresh", "1")
    wait_until(lambda: notifications(m) >= before + names, f"{names} kernel entry notifications")
    assert notifications(m) == before + names


def missing(path):
    with pytest.raises(FileNotFoundError):
        os.stat(path)


def test_a_name_the_kernel_held_as_missing_stats_at_once_after_a_refresh_adds_it(mount, srv):
    top, sub = {"a.bin": b"a" * 10}, {"x.bin": b"x" * 10}
    serve(srv, top, sub)
    m = mount(srv.url("media/"), extra=MOUNT_ARGS)
    assert sorted(os.listdir(m.path("sub"))) == ["x.bin"]
    for i in range(ROUNDS):
        name = f"new{i}.bin"
        missing(m.path(f"sub/{name}"))  # the kernel now holds it as missing
        sub[name] = b"n" * (100 + i)
        serve(srv, top, sub)
        refreshed(m, m.path("sub"), notifications(m), 1)
        assert os.stat(m.path(f"sub/{name}")).st_size == 100 + i, m.stderr()


def test_a_removed_file_is_gone_at_once_after_a_refresh(mount, srv):
    top = {f"r{i}.bin": b"r" * (10 + i) for i in range(ROUNDS)} | {"keep.bin": b"k" * 5}
    serve(srv, top, {})
    m = mount(srv.url("media/"), extra=MOUNT_ARGS)
    for i in range(ROUNDS):
        name = f"r{i}.bin"
        # Its attributes are the kernel's now, for the attribute timeout.
        assert os.stat(m.path(name)).st_size == 10 + i
        del top[name]
        serve(srv, top, {})
        refreshed(m, m.mountpoint, notifications(m), 1)
        missing(m.path(name))
        assert name not in os.listdir(m.mountpoint)


def test_an_open_file_whose_name_a_refresh_removed_still_fstats_and_reads(mount, srv):
    top = {"open.bin": b"o" * 5000, "keep.bin": b"k" * 5}
    serve(srv, top, {})
    m = mount(srv.url("media/"), extra=MOUNT_ARGS)
    held = os.open(m.path("open.bin"), os.O_RDONLY)
    try:
        del top["open.bin"]
        serve(srv, top, {})
        refreshed(m, m.mountpoint, notifications(m), 1)
        missing(m.path("open.bin"))
        # Its name is gone, not its attributes: fstat asks them by name.
        assert os.fstat(held).st_size == 5000
        assert os.pread(held, 10_000, 0) == b"o" * 5000
    finally:
        os.close(held)


def test_a_file_whose_size_changed_shows_it_at_once_after_a_refresh(mount, srv):
    top, sub = {"a.bin": b"a" * 10}, {"c.bin": b"c" * 1000}
    serve(srv, top, sub)
    m = mount(srv.url("media/"), extra=MOUNT_ARGS)
    assert os.stat(m.path("sub/c.bin")).st_size == 1000
    for i in range(1, ROUNDS + 1):
        sub["c.bin"] = b"c" * (1000 + i)
        serve(srv, top, sub)
        refreshed(m, m.path("sub"), notifications(m), 1)
        assert os.stat(m.path("sub/c.bin")).st_size == 1000 + i, m.stderr()
        with open(m.path("sub/c.bin"), "rb") as f:
            assert f.read() == sub["c.bin"]


def test_one_refresh_tells_the_kernel_of_every_name_it_changed_and_no_other(mount, srv):
    top = {"a.bin": b"a" * 10}
    sub = {"same.bin": b"s" * 10, "gone.bin": b"g" * 10, "grows.bin": b"w" * 10}
    serve(srv, top, sub)
    m = mount(srv.url("media/"), extra=MOUNT_ARGS)
    for name in sub:
        os.stat(m.path(f"sub/{name}"))
    missing(m.path("sub/new.bin"))
    del sub["gone.bin"]
    sub["grows.bin"] = b"w" * 20
    sub["new.bin"] = b"n" * 30
    serve(srv, top, sub)
    # Added, removed, changed: three; the unchanged name and the root not.
    refreshed(m, m.path("sub"), notifications(m), 3)
    missing(m.path("sub/gone.bin"))
    assert os.stat(m.path("sub/grows.bin")).st_size == 20
    assert os.stat(m.path("sub/new.bin")).st_size == 30
    # Nothing changed: nothing told.
    before = notifications(m)
    xset(m.path("sub"), "refresh", "1")
    assert notifications(m) == before


def test_the_remote_controls_refresh_tells_the_kernel_too(mount, srv, tmp_path):
    top = {"a.bin": b"a" * 10}
    serve(srv, top, {})
    secret = tmp_path / "rc-pass"
    secret.write_text("rc-secret\n")
    secret.chmod(0o600)
    port = free_port()
    m = mount(srv.url("media/"), extra=MOUNT_ARGS + ["--rc", f"127.0.0.1:{port}", "--rc-user", "gw",
                                                     "--rc-pass-file", str(secret)])
    missing(m.path("b.bin"))
    top["b.bin"] = b"b" * 42
    serve(srv, top, {})
    before = notifications(m)
    request = urllib.request.Request(f"http://127.0.0.1:{port}/vfs/refresh", data=b"{}", method="POST",
                                     headers={"Content-Type": "application/json",
                                              "Authorization": "Basic " + base64.b64encode(b"gw:rc-secret").decode()})
    with urllib.request.urlopen(request, timeout=60) as answer:
        assert answer.status == 200
    # The call answers once the kernel was told: no wait here.
    assert notifications(m) == before + 1
    assert os.stat(m.path("b.bin")).st_size == 42


def test_a_name_added_at_the_root_and_removed_again_shows_each_time(mount, srv):
    """`user.mediafs.add` and `remove` on the root change its names as a
    relisting does: a name the kernel held as missing stats once it is
    added, and is gone once it is removed (the setxattr holds the root,
    so the kernel is told just after it returns)."""
    srv.add("a.bin", b"a" * 10)
    srv.add("b.bin", b"b" * 21)
    m = mount(srv.url("a.bin"), extra=MOUNT_ARGS)
    for _ in range(ROUNDS):
        missing(m.path("b.bin"))  # the kernel now holds it as missing
        before = notifications(m)
        xset(m.mountpoint, "add", srv.url("b.bin"))
        wait_until(lambda: notifications(m) >= before + 1, "the added name's notification")
        assert os.stat(m.path("b.bin")).st_size == 21, m.stderr()
        before = notifications(m)
        xset(m.mountpoint, "remove", "b.bin")
        wait_until(lambda: notifications(m) >= before + 1, "the removed name's notification")
        missing(m.path("b.bin"))
    assert notifications(m) == 2 * ROUNDS


def test_a_mount_stopped_by_a_signal_just_after_a_refresh_exits_and_unmounts(mount, srv):
    # The refresh's job asks the kernel the folder's node id, a lookup once
    # the folder's entry is past its one-second timeout; a signal ends the
    # loop meanwhile. The stop must not wait on that lookup (decision 0051).
    top, sub = {"a.bin": b"a" * 10}, {"x.bin": b"x" * 10}
    for i in range(3):
        serve(srv, top, sub)
        m = mount(srv.url("media/"), extra=MOUNT_ARGS)
        assert sorted(os.listdir(m.path("sub"))) == sorted(sub)
        time.sleep(1.1)  # past the entry timeout: the node id's walk sends a lookup
        sub[f"n{i}.bin"] = b"n"
        serve(srv, top, sub)
        xset(m.path("sub"), "refresh", "1")
        m.proc.send_signal(signal.SIGTERM)
        assert m.proc.wait(timeout=30) == 0, m.stderr()
        m.returncode = 0
        assert not is_mounted(m.mountpoint)
