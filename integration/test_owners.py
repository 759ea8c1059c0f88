"""Owners who are not root: the mount's owner administers it (the
`user.mediafs.*` xattrs and the purge, preload, add and remove commands),
and nobody else but root does.

Each administration runs twice (the `actor` fixture): as root on root's
mount, and as an unprivileged owner (a user the tests create) on that
user's own mount, every call in a process of the owner's. The owner's write
bits, which let the kernel pass the owner's xattr writes on, must make
nothing writable: every write answers EROFS and changes nothing.
"""

import hashlib
import shlex
import stat

import harness
from harness import data_of, gets, wait_until

KiB, MiB = 1024, 1024 * 1024
PREFIX = harness.XATTR_PREFIX
WAIT = 30.0  # upper bound for anything asynchronous


def sha256(data):
    return hashlib.sha256(data).hexdigest()


def wait_for(what, predicate):
    # Each look is a process of the actor's: poll gently.
    return wait_until(predicate, what, timeout=WAIT, interval=0.2)


# ---------------------------------------------------------------- what the owner sees

def test_files_and_directories_are_the_owners_with_the_owners_write_bit(actor, mount_as, srv):
    srv.add("a.bin", data_of(1000, 1))
    m = mount_as(actor, srv.url("a.bin"))
    uid, gid, _ = actor.ids
    mode, st_uid, st_gid, size, _ = actor.ok("stat", m.path("a.bin"))
    assert stat.S_ISREG(mode) and stat.S_IMODE(mode) == 0o644, oct(mode)
    assert (st_uid, st_gid, size) == (uid, gid, 1000)
    mode, st_uid, st_gid, _, _ = actor.ok("stat", m.mountpoint)
    assert stat.S_ISDIR(mode) and stat.S_IMODE(mode) == 0o755, oct(mode)
    assert (st_uid, st_gid) == (uid, gid)


# ---------------------------------------------------------------- administration by the owner

def test_the_owner_preloads_and_purges_through_xattrs(actor, mount_as, srv):
    a, b = data_of(2 * MiB + 5, 2), data_of(300_000, 3)
    srv.add("a.bin", a)
    srv.add("b.bin", b)
    m = mount_as(actor, srv.url("a.bin"), srv.url("b.bin"))
    pa, pb = m.path("a.bin"), m.path("b.bin")
    actor.xset(pa, "preload", "1")
    wait_for("a.bin preloaded", lambda: actor.xget(pa, "complete") == "1")
    srv.wait_idle(WAIT)
    srv.clear_log()
    assert actor.ok("sha256", pa) == sha256(a)
    assert gets(srv, "a.bin") == [], "a preloaded file is read without requests"
    actor.xset(pa, "purge", "1")
    assert actor.xget(pa, "cached_bytes") == "0"
    assert actor.ok("sha256", pa) == sha256(a)
    assert gets(srv, "a.bin"), "after a purge the next read goes to the server"
    assert actor.ok("sha256", pb) == sha256(b)
    srv.wait_idle(WAIT)
    assert int(actor.xget(pb, "cached_bytes")) > 0
    actor.xset(m.mountpoint, "purge", "1")
    assert actor.xget(pa, "cached_bytes") == "0"
    assert actor.xget(pb, "cached_bytes") == "0"


def test_the_owner_adds_and_removes_through_xattrs(actor, mount_as, srv):
    srv.add("first.bin", data_of(1000, 4))
    srv.add("second.bin", data_of(2000, 5))
    m = mount_as(actor, srv.url("first.bin"), extra=("--timeout", "10"))
    actor.xset(m.mountpoint, "add", srv.url("second.bin"))
    wait_for("second.bin listed", lambda: "second.bin" in actor.ok("listdir", m.mountpoint))
    assert actor.ok("sha256", m.path("second.bin")) == sha256(srv.data("second.bin"))
    actor.xset(m.mountpoint, "remove", "first.bin")
    wait_for("first.bin gone", lambda: actor.ok("listdir", m.mountpoint) == ["second.bin"])


def test_the_owner_runs_the_preload_purge_add_and_remove_commands(actor, mount_as, srv):
    a, b = data_of(3 * MiB, 6), data_of(1100, 7)
    srv.add("a.bin", a)
    srv.add("b.bin", b)
    m = mount_as(actor, srv.url("a.bin"), extra=("--timeout", "10"))
    pa = m.path("a.bin")
    r = actor.mediafs("preload", "--bytes", "1M", pa)
    assert r.returncode == 0, r.stderr
    wait_for("a.bin's first 1M", lambda: actor.xget(pa, "cached_ranges") == f"0-{MiB - 1}"
             or int(actor.xget(pa, "cached_bytes")) > MiB)
    r = actor.mediafs("preload", pa)
    assert r.returncode == 0, r.stderr
    wait_for("a.bin complete", lambda: actor.xget(pa, "complete") == "1")
    r = actor.mediafs("purge", pa)
    assert r.returncode == 0, r.stderr
    assert actor.xget(pa, "cached_bytes") == "0"
    r = actor.mediafs("add", srv.url("b.bin"), "--to", m.mountpoint)
    assert r.returncode == 0, r.stderr
    wait_for("b.bin listed", lambda: "b.bin" in actor.ok("listdir", m.mountpoint))
    assert actor.ok("sha256", m.path("b.bin")) == sha256(b)
    r = actor.mediafs("purge", m.mountpoint)
    assert r.returncode == 0, r.stderr
    assert actor.xget(m.path("b.bin"), "cached_bytes") == "0"
    r = actor.mediafs("remove", "a.bin", "--from", m.mountpoint)
    assert r.returncode == 0, r.stderr
    wait_for("a.bin gone", lambda: actor.ok("listdir", m.mountpoint) == ["b.bin"])


# ---------------------------------------------------------------- nothing is writable

# (op, path under the mount, arguments): each is a write the owner's mode
# bits let through to mediafs, which must refuse it.
WRITES = [
    ("open", "a.bin", "O_WRONLY"),
    ("open", "a.bin", "O_RDWR"),
    ("open", "a.bin", "O_WRONLY|O_APPEND"),
    ("open", "a.bin", "O_RDONLY|O_TRUNC"),
    ("open", "new.bin", "O_WRONLY|O_CREAT"),
    ("open", "new.bin", "O_WRONLY|O_CREAT|O_EXCL"),
    ("truncate", "a.bin", "0"),
    ("utime", "a.bin"),
    ("utime", ""),
    ("chmod", "a.bin", "600"),
    ("chmod", "", "700"),
    ("chown", "a.bin"),
    ("unlink", "a.bin"),
    ("rename", "a.bin", "{mnt}/moved.bin"),
    ("link", "a.bin", "{mnt}/linked.bin"),
    ("symlink", "symlinked.bin", "a.bin"),
    ("mkdir", "dir"),
    ("mknod", "node"),
]

SHELL_WRITES = [
    "echo x > {f}",
    "echo x >> {f}",
    "truncate -s 0 {f}",
    "touch {f}",
    "touch {mnt}/new.bin",
    "rm -f {f}",
    "mv {f} {mnt}/moved.bin",
    "mkdir {mnt}/dir",
    "chmod 600 {f}",
    "ln -s x {mnt}/link",
    "cp /etc/hostname {f}",
]


def snapshot(actor, m):
    """What a write could have changed: names, attributes and content."""
    return (actor.ok("listdir", m.mountpoint), actor.ok("stat", m.path("a.bin")),
            actor.ok("stat", m.mountpoint), actor.ok("sha256", m.path("a.bin")))


def test_every_write_by_the_owner_fails_with_erofs_and_changes_nothing(actor, mount_as, srv):
    data = data_of(100_000, 8)
    srv.add("a.bin", data)
    m = mount_as(actor, srv.url("a.bin"))
    before = snapshot(actor, m)
    assert before[3] == sha256(data)
    for op, rel, *rest in WRITES:
        rest = [arg.format(mnt=m.mountpoint) for arg in rest]
        result = actor.fsop(op, m.path(rel) if rel else m.mountpoint, *rest)
        assert result == {"errno": "EROFS"}, (op, rel, rest, result)
    for template in SHELL_WRITES:
        command = template.format(f=shlex.quote(str(m.path("a.bin"))), mnt=shlex.quote(str(m.mountpoint)))
        r = actor.run("sh", "-c", command)
        assert r.returncode != 0 and "Read-only file system" in r.stderr, (command, r.stderr)
    assert snapshot(actor, m) == before
    assert [r.method for r in srv.requests if r.method not in ("GET", "HEAD")] == []


def test_other_attribute_writes_and_removals_are_not_supported(actor, mount_as, srv):
    srv.add("a.bin", data_of(1000, 9))
    m = mount_as(actor, srv.url("a.bin"))
    for path in (m.path("a.bin"), m.mountpoint):
        assert actor.fsop("setxattr", path, "user.other", "1") == {"errno": "ENOTSUP"}, path
        assert actor.fsop("removexattr", path, PREFIX + "purge") == {"errno": "ENOTSUP"}, path
    assert actor.fsop("setxattr", m.path("a.bin"), PREFIX + "size", "5") == {"errno": "EPERM"}


# ---------------------------------------------------------------- other users

def test_another_user_reads_an_allow_other_mount_but_cannot_administer_it(actor, other_user, mount_as, srv):
    data = data_of(200_000, 10)
    srv.add("a.bin", data)
    srv.add("b.bin", data_of(1000, 11))
    m = mount_as(actor, srv.url("a.bin"), extra=("-o", "allow_other"))
    p = m.path("a.bin")
    assert other_user.ok("sha256", p) == sha256(data)
    assert other_user.xget(p, "size") == str(len(data))
    srv.wait_idle(WAIT)
    cached = actor.xget(p, "cached_bytes")
    assert int(cached) > 0
    refused = [(p, "purge", "1"), (p, "preload", "1"), (m.mountpoint, "purge", "1"),
               (m.mountpoint, "add", srv.url("b.bin")), (m.mountpoint, "remove", "a.bin")]
    for target, key, value in refused:
        assert other_user.fsop("setxattr", target, PREFIX + key, value) == {"errno": "EACCES"}, (target, key)
    r = other_user.run("setfattr", "-n", PREFIX + "purge", "-v", "1", p)
    assert r.returncode != 0 and "Permission denied" in r.stderr, r.stderr
    _, _, owner_name = actor.ids
    for argv in (["purge", p], ["preload", p], ["add", srv.url("b.bin"), "--to", m.mountpoint],
                 ["remove", "a.bin", "--from", m.mountpoint]):
        r = other_user.mediafs(*argv)
        assert r.returncode != 0, (argv, r.stdout)
        assert f"administered by its owner ({owner_name}, uid" in r.stderr, (argv, r.stderr)
        assert f"you are {harness.OTHER_USER}, uid" in r.stderr, (argv, r.stderr)
    srv.wait_idle(WAIT)
    assert actor.ok("listdir", m.mountpoint) == ["a.bin"]
    assert actor.xget(p, "cached_bytes") == cached
    assert gets(srv, "b.bin") == []
    # The owner still may.
    actor.xset(p, "purge", "1")
    assert actor.xget(p, "cached_bytes") == "0"


def test_without_allow_other_another_user_is_told_the_mount_is_its_owners_only(actor, other_user, mount_as, srv):
    srv.add("a.bin", data_of(1000, 12))
    m = mount_as(actor, srv.url("a.bin"))
    p = m.path("a.bin")
    outsiders = [other_user] + ([harness.Actor()] if actor.user is not None else [])
    for outsider in outsiders:
        assert outsider.fsop("stat", p) == {"errno": "EACCES"}, outsider
        assert outsider.fsop("setxattr", p, PREFIX + "purge", "1") == {"errno": "EACCES"}, outsider
        r = outsider.mediafs("purge", p)
        assert r.returncode != 0, outsider
        assert "reachable by its owner only" in r.stderr, (outsider, r.stderr)
    assert actor.ok("listdir", m.mountpoint) == ["a.bin"]
