"""WebDAV collections as sources (`dav://`, `davs://`), end to end against
real servers on loopback: Apache httpd with mod_dav (no auth, Basic, Digest)
and wsgidav, which write their multistatus XML differently. Each test checks
what the server received (its access log: methods, paths, statuses, the
user it authenticated), not only what mediafs says.

- A nested tree with names holding spaces, `#`, `%` and Unicode lists as
  the server's tree and reads byte-exact (whole files and ranges).
- `ls -l` of a listed directory is one PROPFIND and no HEAD or GET.
- `davs://` is the same over https (Apache with mod_ssl, `--cacert`).
- Basic and Digest (user:pass@ or netrc): listings and ranged reads authenticate; a wrong
  password is EACCES with a log line that says credentials were sent and
  never shows them.
- `user.mediafs.refresh` lists a collection again: added files appear,
  removed ones go, and a file the listing shows changed (another getetag)
  drops its cached bytes and the kernel's pages with no open.
- A server without PROPFIND (plain nginx) is a clear error.
"""

import errno
import os
import shutil
import time
from pathlib import Path

import pytest

from davservers import ApacheDav, WsgiDav, make_served_dir
from harness import data_of, mediafs, read_range, read_whole, xget, xset

MOUNT_ARGS = ("--timeout", "10")

TREE = {
    "plain.bin": 300_000,
    "hello world.bin": 4_000,
    "hash#tag.bin": 5_000,
    "100% sure.bin": 6_000,
    "café ünï.bin": 7_000,
    "empty.bin": 0,
    "Season 1/ep 1.mkv": 2_500_000,
    "Season 1/deep/inner file.bin": 8_000,
    "名前/ファイル.bin": 9_000,
}
EMPTY_DIRS = ["nothing here"]


def write_tree(root, tree=TREE, empty_dirs=EMPTY_DIRS):
    for i, (rel, size) in enumerate(sorted(tree.items())):
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data_of(size, 1000 + i))
    for rel in empty_dirs:
        (root / rel).mkdir(parents=True, exist_ok=True)
    for path in [root, *root.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)


def disk_tree(root):
    """{relative path: bytes or None for a directory} of a local tree."""
    return {str(p.relative_to(root)): (None if p.is_dir() else p.read_bytes()) for p in root.rglob("*")}


def mounted_tree(top):
    """The same of a directory of the mount, walked through the kernel."""
    tree = {}
    for dirpath, dirnames, filenames in os.walk(top):
        for name in dirnames:
            tree[os.path.relpath(os.path.join(dirpath, name), top)] = None
        for name in filenames:
            tree[os.path.relpath(os.path.join(dirpath, name), top)] = read_whole(os.path.join(dirpath, name))
    return tree


def stat_all(directory):
    """`ls -l`: every entry stat'ed. Returns {name: size}."""
    return {name: os.stat(os.path.join(directory, name)).st_size for name in os.listdir(directory)}


@pytest.fixture(scope="module")
def served():
    root = make_served_dir()
    write_tree(root)
    yield root
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="module")
def apache(served):
    server = ApacheDav(served)
    server.start()
    yield server
    server.remove()


@pytest.fixture(scope="module")
def wsgidav(served, tmp_path_factory):
    server = WsgiDav(tmp_path_factory.mktemp("wsgidav"), served)
    server.start()
    yield server
    server.stop()


@pytest.fixture
def fresh_dir(tmp_path_factory):
    """A served tree of the test's own, which it may change."""
    root = make_served_dir()
    yield root
    shutil.rmtree(root, ignore_errors=True)


# ---------------------------------------------------------------- Apache mod_dav

def test_apache_collection_mounts_as_its_nested_tree_with_odd_names_read_byte_exact(mount, apache, served):
    m = mount(apache.url("open"), extra=MOUNT_ARGS)
    # One collection is the mount's root.
    assert sorted(os.listdir(m.mountpoint)) == sorted(p.name for p in served.iterdir())
    assert mounted_tree(m.mountpoint) == disk_tree(served), m.stderr()
    big = (served / "Season 1/ep 1.mkv").read_bytes()
    assert read_range(m.path("Season 1/ep 1.mkv"), 1_234_567, 100_000) == big[1_234_567:1_334_567]
    # The module's Apache served other tests' GETs too: wait for this one's.
    apache.log.wait_for(lambda es: any(e[0] == "GET" and e[1].startswith("/open/") for e in es), "a GET under /open/")
    gets = [e for e in apache.log.methods("GET") if e[1].startswith("/open/")]
    assert gets and all(status in ("200", "206") for _, _, status, _ in gets), gets


def test_apache_ls_l_of_a_listed_directory_sends_one_propfind_and_no_head(mount, apache, served):
    apache.log.clear()
    m = mount(apache.url("open"), extra=MOUNT_ARGS)
    sizes = stat_all(m.mountpoint)
    expected = {p.name: (p.stat().st_size if p.is_file() else None) for p in served.iterdir()}
    assert {n: s for n, s in sizes.items() if expected[n] is not None} == \
        {n: s for n, s in expected.items() if s is not None}
    entries = apache.log.wait_for(lambda es: es, "the listing's PROPFIND")
    assert [(method, path, status) for method, path, status, _ in entries] == [("PROPFIND", "/open/", "207")], entries


def test_two_collections_are_two_directories_in_the_root(mount, apache, served):
    m = mount(apache.url("open"), apache.url("open", "Season%201/"), extra=MOUNT_ARGS)
    assert sorted(os.listdir(m.mountpoint)) == ["Season 1", "open"]
    assert mounted_tree(m.path("open")) == disk_tree(served), m.stderr()
    assert mounted_tree(m.path("Season 1")) == disk_tree(served / "Season 1")


def test_an_added_file_at_a_collection_root_survives_its_refresh_and_a_listed_one_stays(mount, apache, served,
                                                                                       server):
    m = mount(apache.url("open", "Season%201/"), extra=MOUNT_ARGS)
    listed = sorted(p.name for p in (served / "Season 1").iterdir())
    assert sorted(os.listdir(m.mountpoint)) == listed
    r = mediafs("add", server.url("small.bin"), "--to", m.mountpoint)
    assert r.returncode == 0, r.stdout + r.stderr
    xset(m.mountpoint, "refresh", "1")
    assert sorted(os.listdir(m.mountpoint)) == sorted([*listed, "small.bin"]), m.stderr()
    r = mediafs("remove", "ep 1.mkv", "--from", m.mountpoint)
    assert r.returncode != 0 and "listed by the mount's source" in r.stderr, r
    r = mediafs("remove", "small.bin", "--from", m.mountpoint)
    assert r.returncode == 0, r.stdout + r.stderr
    xset(m.mountpoint, "refresh", "1")
    assert sorted(os.listdir(m.mountpoint)) == listed


def test_apache_basic_auth_lists_and_reads_as_the_user(mount, apache, served):
    m = mount(apache.url("basic", user=apache.user, password=apache.password), extra=MOUNT_ARGS)
    assert read_whole(m.path("Season 1/deep/inner file.bin")) == \
        (served / "Season 1/deep/inner file.bin").read_bytes(), m.stderr()
    # The module's Apache served the tests before this one too: wait for
    # this read's GET (logged once its last byte went out), not any GET.
    ours = lambda e: e[1].startswith("/basic/") and e[2] in ("200", "206", "207")
    answered = [e for e in apache.log.wait_for(lambda es: any(e[0] == "GET" and ours(e) for e in es),
                                               "a GET under /basic/") if ours(e)]
    assert {e[0] for e in answered} >= {"PROPFIND", "GET"}, answered
    assert all(e[3] == apache.user for e in answered), answered
    assert apache.password not in m.stderr()


def test_apache_digest_auth_lists_and_reads_ranges_as_the_user(mount, apache, served):
    m = mount(apache.url("digest", user=apache.user, password=apache.password), extra=MOUNT_ARGS)
    assert sorted(os.listdir(m.mountpoint)) == sorted(p.name for p in served.iterdir()), m.stderr()
    big = (served / "Season 1/ep 1.mkv").read_bytes()
    assert read_range(m.path("Season 1/ep 1.mkv"), 2_000_000, 50_000) == big[2_000_000:2_050_000]
    assert read_whole(m.path("Season 1/ep 1.mkv")) == big
    # As the basic test: another test's GET may be in the module's log
    # already, and this read's is logged after its last byte went out
    # (stress run of Dec 7: the log was read before its line).
    ours = lambda e: e[1].startswith("/digest/") and e[2] in ("200", "206", "207")
    answered = [e for e in apache.log.wait_for(lambda es: any(e[0] == "GET" and ours(e) for e in es),
                                               "a GET under /digest/") if ours(e)]
    assert {e[0] for e in answered} >= {"PROPFIND", "GET"}, answered
    assert all(e[3] == apache.user for e in answered), answered
    assert apache.password not in m.stderr()


def test_apache_digest_with_netrc_credentials_lists_and_reads(mount, apache, served, tmp_path, monkeypatch):
    home = tmp_path / "home"
    home.mkdir()
    (home / ".netrc").write_text(f"machine 127.0.0.1 login {apache.user} password {apache.password}\n")
    os.chmod(home / ".netrc", 0o600)
    monkeypatch.setenv("HOME", str(home))
    apache.log.clear()
    m = mount(apache.url("digest", "Season%201/"), extra=[*MOUNT_ARGS, "--netrc"])
    assert read_whole(m.path("ep 1.mkv")) == (served / "Season 1/ep 1.mkv").read_bytes(), m.stderr()
    answered = [e for e in apache.log.wait_for(lambda es: any(e[0] == "GET" for e in es), "a GET")
                if e[2] in ("200", "206", "207")]
    assert {e[0] for e in answered} >= {"PROPFIND", "GET"}, answered
    assert all(e[3] == apache.user for e in answered), answered
    assert apache.password not in m.stderr()


def test_apache_davs_is_webdav_over_https_with_digest(mount, served):
    server = ApacheDav(served, tls=True)
    server.start()
    try:
        m = mount(server.url("digest", user=server.user, password=server.password),
                  extra=[*MOUNT_ARGS, "--cacert", str(server.cert)])
        assert mounted_tree(m.mountpoint) == disk_tree(served), m.stderr()
        answered = [e for e in server.log.wait_for(lambda es: any(e[0] == "GET" for e in es), "a GET")
                    if e[2] in ("200", "206", "207")]
        assert {e[0] for e in answered} >= {"PROPFIND", "GET"} and all(e[3] == server.user for e in answered)
    finally:
        server.remove()


@pytest.mark.parametrize("area", ["basic", "digest"])
def test_apache_wrong_password_is_eacces_with_a_log_line_that_hides_it(mount, apache, area):
    apache.log.clear()
    m = mount(apache.url(area, user=apache.user, password="wrong-Secret-9"), extra=MOUNT_ARGS)
    with pytest.raises(OSError) as raised:
        os.listdir(m.mountpoint)
    assert raised.value.errno == errno.EACCES
    err = m.stderr()
    assert "HTTP 401" in err and "credentials were sent" in err, err
    assert "wrong-Secret-9" not in err
    refused = [e for e in apache.log.wait_for(lambda es: any(e[1] == f"/{area}/" for e in es), f"/{area}/ refused")
               if e[1] == f"/{area}/"]
    assert refused and all(e[2] == "401" for e in refused), refused
    # The server saw the user's credentials, and refused them.
    assert refused[-1][3] == apache.user, refused


def test_apache_no_credentials_is_eacces_saying_none_were_sent(mount, apache):
    m = mount(apache.url("basic"), extra=MOUNT_ARGS)
    with pytest.raises(OSError) as raised:
        os.listdir(m.mountpoint)
    assert raised.value.errno == errno.EACCES
    assert "no credentials were sent" in m.stderr(), m.stderr()


def test_apache_refresh_lists_added_files_and_drops_removed_ones(mount, fresh_dir):
    write_tree(fresh_dir, {"keep.bin": 1_000, "goes.bin": 2_000}, [])
    server = ApacheDav(fresh_dir)
    server.start()
    try:
        m = mount(server.url("open"), extra=MOUNT_ARGS)
        assert sorted(os.listdir(m.mountpoint)) == ["goes.bin", "keep.bin"]
        (fresh_dir / "goes.bin").unlink()
        added = data_of(3_000_000, 77)
        (fresh_dir / "new file.bin").write_bytes(added)
        (fresh_dir / "new file.bin").chmod(0o644)
        # Within the directory cache time, the old listing is believed.
        assert sorted(os.listdir(m.mountpoint)) == ["goes.bin", "keep.bin"]
        server.log.clear()
        xset(m.mountpoint, "refresh", "1")
        assert sorted(os.listdir(m.mountpoint)) == ["keep.bin", "new file.bin"], m.stderr()
        assert [e[:3] for e in server.log.wait_for(lambda es: es, "the refresh's PROPFIND")] == \
            [("PROPFIND", "/open/", "207")]
        # Fresh from the disk, its ETag is weak in the listing and strong in
        # a GET: one version still, read in ranges.
        assert read_range(m.path("new file.bin"), 2_000_000, 100_000) == added[2_000_000:2_100_000], m.stderr()
        assert read_whole(m.path("new file.bin")) == added
        assert "changed on the server" not in m.stderr()
    finally:
        server.remove()


def test_apache_refresh_that_lists_another_etag_drops_the_cached_bytes_with_no_open(mount, fresh_dir):
    # Same size, another mtime: Apache's getetag (size and mtime) changes.
    # Dated well in the past, so that both getetag and a GET's ETag are
    # strong and the ETags decide.
    old, new = data_of(1_500_000, 81), data_of(1_500_000, 82)
    film = fresh_dir / "film.bin"
    film.write_bytes(old)
    film.chmod(0o644)
    then = time.time() - 1000
    os.utime(film, (then, then))
    server = ApacheDav(fresh_dir)
    server.start()
    try:
        m = mount(server.url("open"), extra=MOUNT_ARGS)
        path = m.path("film.bin")
        assert read_whole(path) == old
        assert xget(path, "complete") == "1", m.stderr()
        film.write_bytes(new)
        os.utime(film, (then + 100, then + 100))
        server.log.clear()
        xset(m.mountpoint, "refresh", "1")
        # Changed by the listing alone: no open, no request but the PROPFIND.
        assert xget(path, "cached_bytes") == "0", m.stderr()
        assert [e[:3] for e in server.log.wait_for(lambda es: es, "the refresh's PROPFIND")] == \
            [("PROPFIND", "/open/", "207")]
        assert "its listing shows ETag" in m.stderr()
        # The kernel's pages of the old version are gone too.
        assert read_whole(path) == new, "a mix of two versions, or the old one"
        gets = [e for e in server.log.wait_for(lambda es: any(e[0] == "GET" for e in es), "a GET") if e[0] == "GET"]
        assert all(e[1] == "/open/film.bin" for e in gets)
    finally:
        server.remove()


def test_a_remount_lists_the_tree_with_its_sizes_from_the_saved_listings_with_the_server_gone(mount, fresh_dir, tmp_path):
    # Each directory's last listing is kept in the cache: a remount lists
    # and stats the whole tree with no request (here, with no server).
    write_tree(fresh_dir, {"a.bin": 1_000, "Sub dir/b c.bin": 2_000, "Sub dir/deep/d.bin": 3_000}, [])
    server = ApacheDav(fresh_dir)
    server.start()
    cache = tmp_path / "cache-dav-remount"
    try:
        m = mount(server.url("open"), extra=MOUNT_ARGS, cache_dir=cache)
        first = mounted_tree(m.mountpoint)
        assert first == disk_tree(fresh_dir), m.stderr()
        assert m.unmount() == 0
        propfinds = [e[:2] for e in server.log.wait_for(lambda es: sum(e[0] == "PROPFIND" for e in es) >= 3,
                                                         "a PROPFIND a directory") if e[0] == "PROPFIND"]
        assert len(propfinds) == 3, f"one PROPFIND a directory: {propfinds}"
    finally:
        server.remove()
    m = mount(server.url("open"), extra=MOUNT_ARGS, cache_dir=cache)
    assert mounted_tree(m.mountpoint) == first, m.stderr()


def test_apache_ls_l_of_ten_thousand_files_is_one_propfind(mount, fresh_dir):
    count = 10_000
    folder = fresh_dir / "many"
    folder.mkdir()
    for i in range(count):
        (folder / f"episode {i:05d}.mkv").write_bytes(b"x" * (i % 97))
    for path in [fresh_dir, folder, *folder.iterdir()]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    server = ApacheDav(fresh_dir)
    server.start()
    try:
        started = time.monotonic()
        m = mount(server.url("open", "many/"), extra=MOUNT_ARGS)
        sizes = stat_all(m.mountpoint)
        elapsed = time.monotonic() - started
        assert len(sizes) == count
        assert sizes["episode 00100.mkv"] == 100 % 97
        entries = server.log.wait_for(lambda es: es, "the listing's PROPFIND")
        assert [e[:3] for e in entries] == [("PROPFIND", "/open/many/", "207")], entries[:5]
        print(f"\nmount + ls -l of {count} WebDAV files: {elapsed:.2f}s, {len(entries)} request(s)")
    finally:
        server.remove()


# ---------------------------------------------------------------- wsgidav

def test_wsgidav_collection_mounts_as_its_nested_tree_read_byte_exact(mount, wsgidav, served):
    m = mount(wsgidav.url(), extra=MOUNT_ARGS)
    assert mounted_tree(m.mountpoint) == disk_tree(served), m.stderr()
    big = (served / "Season 1/ep 1.mkv").read_bytes()
    assert read_range(m.path("Season 1/ep 1.mkv"), 999_999, 77_777) == big[999_999:999_999 + 77_777]


def test_wsgidav_ls_l_of_a_listed_directory_sends_one_propfind_and_no_head(mount, wsgidav, served):
    wsgidav.log.clear()
    m = mount(wsgidav.url("Season%201/"), extra=MOUNT_ARGS)
    sizes = stat_all(m.mountpoint)
    assert sizes["ep 1.mkv"] == TREE["Season 1/ep 1.mkv"]
    entries = wsgidav.log.wait_for(lambda es: es, "the listing's PROPFIND")
    assert [e[:3] for e in entries] == [("PROPFIND", "/Season 1/", "207")], entries


# ---------------------------------------------------------------- no WebDAV there

def test_a_server_without_propfind_is_a_clear_error(mount, server):
    m = mount(server.base_url.replace("http://", "dav://"), extra=MOUNT_ARGS)
    with pytest.raises(OSError) as raised:
        os.listdir(m.mountpoint)
    assert raised.value.errno == errno.EOPNOTSUPP
    err = m.stderr()
    assert "HTTP 405" in err and "does not answer PROPFIND" in err and "mount http://" in err, err
    assert any(e.method == "PROPFIND" and e.status == 405 for e in server.log()), server.log()
