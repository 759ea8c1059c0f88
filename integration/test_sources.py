"""Where files come from, end to end: playlists (local and over HTTP), HTTP
directory listings (handmade, python http.server, nginx autoindex), hostile
names in listings, files added and removed at run time, and what requests
carry (--header, --config, --netrc, user:pass@ URLs) -- with credentials
never shown in logs, xattrs or `mediafs status`, and never sent to another
host after a redirect.

Servers are in-process FaultServers (which record every request's headers)
unless a test needs a real index page. Timeouts are hang guards only.
"""

import base64
import errno
import json
import os
import shutil
import socket
import subprocess
import sys

import pytest

import harness
from conftest import Nginx
from harness import autoindex_html, data_of, free_port, index_html, mediafs, read_whole, run, wait_until, xget
from faultserver import FaultServer

KiB, MiB = 1024, 1024 * 1024
WAIT = 30.0
MOUNT_ARGS = ("--timeout", "10")
SECRET = "s3cr3t-Pa55"


# ---------------------------------------------------------------- helpers

def refused(tmp_path, *sources, extra=()):
    """`mediafs mount -f` that must exit before mounting: (status, output)."""
    mp = tmp_path / "refused-mnt"
    mp.mkdir(exist_ok=True)
    argv = [harness.MEDIAFS_BIN, "mount", "-f", "--cache-dir", tmp_path / "refused-cache",
            *MOUNT_ARGS, *extra, *sources, mp]
    try:
        r = run(*argv, timeout=30)
    finally:
        if harness.is_mounted(mp):
            harness.fusermount_unmount(mp)
            pytest.fail(f"{sources} were mounted, not refused")
    return r.returncode, r.stdout + r.stderr


def listdir_sorted(path):
    return sorted(os.listdir(path))


def basic(user, password):
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


# ---------------------------------------------------------------- playlists

def test_local_extended_m3u_names_files_from_extinf_titles(mount, srv, tmp_path):
    files = {"t1.mp3": data_of(5000, 1), "t2.mp3": data_of(6000, 2), "v.mkv": data_of(7000, 3),
             "plain.bin": data_of(8000, 4), "Clip.bin": data_of(900, 5)}
    for name, data in files.items():
        srv.add(name, data)
    playlist = tmp_path / "mix.m3u"
    playlist.write_text(
        "#EXTM3U\n"
        f"#EXTINF:123,Artist - Song, Part 1\n{srv.url('t1.mp3')}\n"
        f"#EXTINF:-1 tvg-id=\"x\",AC/DC: Back/In Black\n{srv.url('t2.mp3')}\n"
        "# a comment\n"
        f"#EXTINF:60,Movie.MKV\n{srv.url('v.mkv')}\n"
        f"{srv.url('plain.bin')}\n"
        f"#EXTINF:5,Clip.bin\n{srv.url('Clip.bin')}\n")
    m = mount(playlist, extra=MOUNT_ARGS)
    expected = {"Artist - Song, Part 1.mp3": "t1.mp3", "AC_DC: Back_In Black.mp3": "t2.mp3",
                "Movie.MKV": "v.mkv", "plain.bin": "plain.bin", "Clip.bin": "Clip.bin"}
    assert listdir_sorted(m.mountpoint) == sorted(expected), m.stderr()
    for name, served in expected.items():
        assert read_whole(m.path(name)) == files[served], name


def test_local_m3u_with_bom_and_crlf(mount, srv, tmp_path):
    srv.add("a.bin", data_of(1000, 6))
    srv.add("b.bin", data_of(2000, 7))
    playlist = tmp_path / "win.m3u8"
    playlist.write_bytes(("\ufeff#EXTM3U\r\n#EXTINF:1,First\r\n" + srv.url("a.bin") + "\r\n"
                          + srv.url("b.bin") + "\r\n").encode())
    m = mount(playlist, extra=MOUNT_ARGS)
    assert listdir_sorted(m.mountpoint) == ["First.bin", "b.bin"], m.stderr()
    assert read_whole(m.path("First.bin")) == srv.data("a.bin")


def test_local_playlist_with_a_relative_entry_is_refused_naming_file_and_line(fuse, srv, tmp_path):
    srv.add("a.bin", b"a" * 100)
    playlist = tmp_path / "rel.m3u"
    playlist.write_text(f"#EXTM3U\n{srv.url('a.bin')}\n#EXTINF:1,x\nmusic/b.mp3\n")
    status, out = refused(tmp_path, playlist)
    assert status == 1, (status, out)
    assert f"{playlist}:4" in out, out


def test_playlist_over_http_resolves_relative_entries_against_its_url(mount, srv):
    files = {"lists/a.bin": data_of(3000, 8), "lists/sub/b.bin": data_of(4000, 9),
             "other/c.bin": data_of(5000, 10), "d.bin": data_of(600, 11)}
    for name, data in files.items():
        srv.add(name, data)
    srv.add("lists/pl.m3u8",
            b"#EXTM3U\n#EXTINF:10,Alpha\na.bin\nsub/b.bin\n../other/c.bin\n/d.bin\n",
            content_type="audio/x-mpegurl")
    m = mount(srv.url("lists/pl.m3u8"), extra=MOUNT_ARGS)
    expected = {"Alpha.bin": "lists/a.bin", "b.bin": "lists/sub/b.bin", "c.bin": "other/c.bin", "d.bin": "d.bin"}
    assert listdir_sorted(m.mountpoint) == sorted(expected), m.stderr()
    for name, served in expected.items():
        assert read_whole(m.path(name)) == files[served], name
    assert xget(m.path("b.bin"), "url") == srv.url("lists/sub/b.bin")


@pytest.mark.parametrize("kind", ["media", "master"])
def test_a_local_hls_playlist_is_refused_its_url_is_mounted_by_test_hls(fuse, tmp_path, kind):
    text = {
        "media": "#EXTM3U\n#EXT-X-VERSION:3\n#EXT-X-TARGETDURATION:10\n#EXTINF:9.9,\nseg0.ts\n#EXT-X-ENDLIST\n",
        "master": "#EXTM3U\n#EXT-X-STREAM-INF:BANDWIDTH=1280000\nlow/index.m3u8\n",
    }[kind]
    source = tmp_path / "stream.m3u8"
    source.write_text(text)
    status, out = refused(tmp_path, source)
    assert status == 1, (status, out)
    assert "HLS" in out and "URL" in out, out


# ---------------------------------------------------------------- directory listings

def test_handmade_listing_is_a_directory_with_lazily_listed_subdirectories(mount, srv):
    files = {"media/a.bin": data_of(10_000, 12), "media/b c.bin": data_of(11_000, 13),
             "media/sub/d.bin": data_of(12_000, 14)}
    for name, data in files.items():
        srv.add(name, data)
    srv.add("media/", autoindex_html("/media/", [("a.bin", "a.bin"), ("b%20c.bin", "b c.bin"),
                                                 ("sub/", "sub/"), ("?C=N;O=D", "Name"),
                                                 ("http://other.example/x.bin", "x")],
                                     sizes={"a.bin": 10_000, "b%20c.bin": 11_000}).encode(),
            content_type="text/html")
    srv.add("media/sub/", autoindex_html("/media/sub/", [("d.bin", "d.bin")]).encode(), content_type="text/html")
    m = mount(srv.url("media/"), extra=MOUNT_ARGS)
    srv.wait_idle(WAIT)
    assert not srv.requests, "mounting sent a request"
    # One index is the mount's root, listed on the first lookup.
    assert listdir_sorted(m.mountpoint) == ["a.bin", "b c.bin", "sub"]
    srv.wait_idle(WAIT)
    assert not any(r.path == "/media/sub/" for r in srv.requests), \
        "a subdirectory was listed before anyone looked at it"
    assert os.path.isdir(m.path("sub")) and not os.path.isdir(m.path("a.bin"))
    assert os.listdir(m.path("sub")) == ["d.bin"]
    assert any(r.path == "/media/sub/" for r in srv.requests)
    # nginx's lengths are the files' sizes with no request; the row without one is probed
    # (in the background, after the listing: waited for, or it lands in the count below).
    srv.wait_for(lambda log: any(r.method == "HEAD" and r.path == "/media/sub/d.bin" and r.done for r in log),
                 timeout=WAIT)
    srv.wait_idle(WAIT)
    before = len(srv.requests)
    assert [os.stat(m.path(n)).st_size for n in ("a.bin", "b c.bin")] == [10_000, 11_000]
    srv.wait_idle(WAIT)
    assert len(srv.requests) == before, [(r.method, r.path) for r in srv.requests[before:]]
    assert read_whole(m.path("a.bin")) == files["media/a.bin"]
    assert read_whole(m.path("b c.bin")) == files["media/b c.bin"]
    assert read_whole(m.path("sub/d.bin")) == files["media/sub/d.bin"]
    assert os.stat(m.path("sub/d.bin")).st_size == 12_000
    assert any(r.method == "HEAD" and r.path == "/media/sub/d.bin" for r in srv.requests)


def test_a_length_in_an_nginx_index_that_no_longer_holds_never_gives_wrong_bytes(mount, srv):
    """The page says 1,234 bytes; the file is 10,000 now (the index was
    written before it changed, or lies). The first answer's length is a
    change: that read may fail (EIO), never return bytes of another length
    or version; the size becomes the server's, and reads then are right."""
    data = data_of(10_000, 15)
    srv.add("media/a.bin", data)
    srv.add("media/", autoindex_html("/media/", [("a.bin", "a.bin")], sizes={"a.bin": 1234}).encode(),
            content_type="text/html")
    m = mount(srv.url("media/"), extra=MOUNT_ARGS)
    assert os.stat(m.path("a.bin")).st_size == 1234
    try:
        got = read_whole(m.path("a.bin"))
        assert got == data, f"{len(got)} bytes read, not the file's"
    except OSError as e:
        assert e.errno == errno.EIO, e
    wait_until(lambda: os.stat(m.path("a.bin")).st_size == 10_000, "the server's size")
    assert read_whole(m.path("a.bin")) == data
    assert "changed on the server" in m.stderr()


def test_hostile_names_in_a_listing_are_made_safe_and_unique(mount, srv):
    long_name = "L" * 300 + ".bin"
    served = {  # href -> (server-side name under media/, data)
        "..%2Fescape.bin": "../escape.bin",
        "nul%00.bin": "nul\x00.bin",
        "bad%FF.bin": "bad\ufffd.bin",
        long_name: long_name,
        "x%2Fy.bin": "x/y.bin",
        "x_y.bin": "x_y.bin",
        "dup.bin": "dup.bin",
        "./dot.bin": "dot.bin",
    }
    datas = {}
    for i, (href, name) in enumerate(served.items()):
        datas[href] = data_of(1000 + i, 100 + i)
        srv.add("media/" + name, datas[href])
    srv.add("secret.bin", b"outside the listed directory")
    links = [(h, "x") for h in served] + [
        ("../", "Parent Directory"), ("../secret.bin", "up"), ("/secret.bin", "abs"),
        ("dup.bin", "dup again"), ("?C=M;O=A", "sort"), ("#top", "frag"), ("./", "self"),
        (f"http://localhost:{srv.port}/media/elsewhere.bin", "other host"),
        ("%2E%2E/", "encoded parent"), ("..", "dotdot"),
    ]
    srv.add("media/", autoindex_html("/media/", links).encode(), content_type="text/html")
    m = mount(srv.url("media/"), extra=MOUNT_ARGS)
    names = os.listdir(m.mountpoint)
    for n in names:
        assert "/" not in n and "\x00" not in n and n not in (".", "..") and len(n.encode()) <= 255, repr(n)
    assert len(names) == len(set(names)), names
    assert "secret.bin" not in names and "elsewhere.bin" not in names, names
    assert names.count("dup.bin") == 1, names
    expected = {
        "..%2Fescape.bin": ".._escape.bin",
        "nul%00.bin": "nul_.bin",
        "x%2Fy.bin": "x_y.bin",
        "x_y.bin": "x_y (2).bin",
        "dup.bin": "dup.bin",
        "./dot.bin": "dot.bin",
    }
    for href, name in expected.items():
        assert name in names, f"{href} should be listed as {name!r}: {sorted(names)}"
        assert read_whole(m.path(name)) == datas[href], name
    longs = [n for n in names if n.startswith("LLLL")]
    assert len(longs) == 1 and len(longs[0].encode()) <= 255, longs
    assert read_whole(m.path(longs[0])) == datas[long_name]
    bad = [n for n in names if n.startswith("bad")]
    assert len(bad) == 1, names
    assert read_whole(m.path(bad[0])) == datas["bad%FF.bin"]
    assert len(names) == len(expected) + 2, sorted(names)


def test_python_http_server_listing(mount, tmp_path):
    root = tmp_path / "www"
    (root / "films" / "extra").mkdir(parents=True)
    files = {"films/One Film.mp4": data_of(20_000, 30), "films/two&three.bin": data_of(3000, 31),
             "films/extra/x.bin": data_of(4000, 32)}
    for rel, data in files.items():
        (root / rel).write_bytes(data)
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "http.server", "--bind", "127.0.0.1", str(port),
                             "--directory", str(root)],
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_until(lambda: _connectable(port), "python http.server to listen", timeout=10)
        m = mount(f"http://127.0.0.1:{port}/films/", extra=MOUNT_ARGS)
        assert listdir_sorted(m.mountpoint) == ["One Film.mp4", "extra", "two&three.bin"], m.stderr()
        assert os.listdir(m.path("extra")) == ["x.bin"]
        for rel, data in files.items():
            assert read_whole(m.path(rel.removeprefix("films/"))) == data, rel
        m.unmount()
    finally:
        harness.stop_popen(proc, timeout=0)


def _connectable(port):
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
        return True
    except OSError:
        return False


def test_nginx_autoindex_listing(mount, tmp_path):
    if shutil.which("nginx") is None:
        pytest.skip("nginx not installed")
    root = tmp_path / "www"
    (root / "shows" / "s01").mkdir(parents=True)
    files = {"shows/ep 1.mkv": data_of(30_000, 40), "shows/café.bin": data_of(1234, 41),
             "shows/s01/e1.bin": data_of(2345, 42)}
    for rel, data in files.items():
        (root / rel).write_bytes(data)
    work = tmp_path / "nginx"
    work.mkdir()
    nginx = Nginx(work, root, autoindex=True)
    nginx.start()
    try:
        m = mount(nginx.url("shows") + "/", extra=MOUNT_ARGS)
        assert listdir_sorted(m.mountpoint) == sorted(["café.bin", "ep 1.mkv", "s01"]), m.stderr()
        assert os.listdir(m.path("s01")) == ["e1.bin"]
        for rel, data in files.items():
            assert read_whole(m.path(rel.removeprefix("shows/"))) == data, rel
        m.unmount()
    finally:
        nginx.stop()


# ---------------------------------------------------------------- runtime add / remove

def test_setfattr_add_and_remove_change_the_root(mount, srv):
    srv.add("first.bin", data_of(1000, 50))
    srv.add("second.bin", data_of(2000, 51))
    m = mount(srv.url("first.bin"), extra=MOUNT_ARGS)
    r = run("setfattr", "-n", "user.mediafs.add", "-v", srv.url("second.bin"), m.mountpoint)
    assert r.returncode == 0, r.stderr
    wait_until(lambda: "second.bin" in os.listdir(m.mountpoint), "second.bin to appear")
    assert read_whole(m.path("second.bin")) == srv.data("second.bin")
    r = run("setfattr", "-n", "user.mediafs.remove", "-v", "first.bin", m.mountpoint)
    assert r.returncode == 0, r.stderr
    wait_until(lambda: "first.bin" not in os.listdir(m.mountpoint), "first.bin to go from readdir")
    wait_until(lambda: not os.path.exists(m.path("first.bin")), "first.bin lookups to fail")
    with pytest.raises(OSError) as e:
        os.setxattr(m.mountpoint, "user.mediafs.remove", b"no-such-name.bin")
    assert e.value.errno == errno.ENOENT
    assert os.listdir(m.mountpoint) == ["second.bin"]


def test_mediafs_add_and_remove_commands(mount, srv):
    srv.add("a.bin", data_of(1000, 52))
    srv.add("b.bin", data_of(1100, 53))
    srv.add("c.bin", data_of(1200, 54))
    m = mount(srv.url("a.bin"), extra=MOUNT_ARGS)
    r = mediafs("add", srv.url("b.bin"), srv.url("c.bin"), "--to", m.mountpoint)
    assert r.returncode == 0, r.stdout + r.stderr
    wait_until(lambda: {"b.bin", "c.bin"} <= set(os.listdir(m.mountpoint)), "added files")
    assert read_whole(m.path("c.bin")) == srv.data("c.bin")
    r = mediafs("remove", "a.bin", "b.bin", "--from", m.mountpoint)
    assert r.returncode == 0, r.stdout + r.stderr
    wait_until(lambda: os.listdir(m.mountpoint) == ["c.bin"], "removed files to go")
    r = mediafs("remove", "nope.bin", "--from", m.mountpoint)
    assert r.returncode != 0 and "No such file" in r.stdout + r.stderr, r
    r = mediafs("add", srv.url("a.bin"), "--to", "/tmp")
    assert r.returncode != 0, r


def serve_index(srv, names):
    """media/ served as an index page listing `names`."""
    srv.add("media/", index_html(names).encode(), content_type="text/html")


def test_two_indexes_are_two_directories_in_the_root(mount, srv):
    srv.add("media/a.bin", data_of(1000, 60))
    serve_index(srv, ["a.bin"])
    srv.add("other/b.bin", data_of(2000, 57))
    srv.add("other/", autoindex_html("/other/", [("b.bin", "b.bin")]).encode(), content_type="text/html")
    m = mount(srv.url("media/"), srv.url("other/"), extra=MOUNT_ARGS)
    assert listdir_sorted(m.mountpoint) == ["media", "other"]
    assert os.listdir(m.path("media")) == ["a.bin"]
    assert read_whole(m.path("other/b.bin")) == srv.data("other/b.bin")


def test_a_list_file_of_one_index_keeps_a_name_for_it(mount, srv, tmp_path):
    srv.add("media/a.bin", data_of(1000, 61))
    serve_index(srv, ["a.bin"])
    listing = tmp_path / "one.list"
    listing.write_text(srv.url("media/") + "\n")
    m = mount(listing, extra=MOUNT_ARGS)
    assert os.listdir(m.mountpoint) == ["media"]
    assert os.listdir(m.path("media")) == ["a.bin"]


def test_add_and_remove_at_a_listed_root_keep_added_names_through_a_refresh(mount, srv):
    for seed, name in enumerate(["a.bin", "b.bin", "c.bin"]):
        srv.add(f"media/{name}", data_of(1000 + seed, 62 + seed))
    serve_index(srv, ["a.bin", "b.bin"])
    srv.add("x.bin", data_of(3000, 58))
    srv.add("elsewhere/b.bin", data_of(4000, 59))
    m = mount(srv.url("media/"), extra=MOUNT_ARGS)
    assert listdir_sorted(m.mountpoint) == ["a.bin", "b.bin"]
    r = mediafs("add", srv.url("x.bin"), srv.url("elsewhere/b.bin"), "--to", m.mountpoint)
    assert r.returncode == 0, r.stdout + r.stderr
    # The listing's b.bin keeps its name; the added one is numbered.
    wait_until(lambda: listdir_sorted(m.mountpoint) == ["a.bin", "b (2).bin", "b.bin", "x.bin"], "added files")
    serve_index(srv, ["a.bin", "b.bin", "c.bin"])
    os.setxattr(m.mountpoint, "user.mediafs.refresh", b"1")
    wait_until(lambda: listdir_sorted(m.mountpoint) == ["a.bin", "b (2).bin", "b.bin", "c.bin", "x.bin"],
               "the added names after the refresh")
    assert read_whole(m.path("x.bin")) == srv.data("x.bin")
    assert read_whole(m.path("b (2).bin")) == srv.data("elsewhere/b.bin")
    assert read_whole(m.path("b.bin")) == srv.data("media/b.bin")
    r = mediafs("remove", "a.bin", "--from", m.mountpoint)
    assert r.returncode != 0 and "listed by the mount's source" in r.stderr, r
    with pytest.raises(OSError) as e:
        os.setxattr(m.mountpoint, "user.mediafs.remove", b"a.bin")
    assert e.value.errno == errno.EROFS
    with pytest.raises(OSError) as e:
        os.setxattr(m.mountpoint, "user.mediafs.remove", b"nope.bin")
    assert e.value.errno == errno.ENOENT
    r = mediafs("remove", "x.bin", "--from", m.mountpoint)
    assert r.returncode == 0, r.stdout + r.stderr
    wait_until(lambda: "x.bin" not in os.listdir(m.mountpoint), "x.bin to go")
    os.setxattr(m.mountpoint, "user.mediafs.refresh", b"1")
    wait_until(lambda: listdir_sorted(m.mountpoint) == ["a.bin", "b (2).bin", "b.bin", "c.bin"],
               "a removed name not to come back")


def test_adding_a_taken_name_gets_a_numbered_name(mount, srv):
    srv.add("x/same.bin", data_of(100, 55))
    srv.add("y/same.bin", data_of(200, 56))
    m = mount(srv.url("x/same.bin"), extra=MOUNT_ARGS)
    os.setxattr(m.mountpoint, "user.mediafs.add", srv.url("y/same.bin").encode())
    wait_until(lambda: "same (2).bin" in os.listdir(m.mountpoint), "same (2).bin")
    assert read_whole(m.path("same (2).bin")) == srv.data("y/same.bin")
    assert read_whole(m.path("same.bin")) == srv.data("x/same.bin")


# ---------------------------------------------------------------- headers and credentials

def test_header_option_is_sent_with_every_request(mount, srv):
    srv.add("h.bin", data_of(300 * KiB, 60))
    m = mount(srv.url("h.bin"), extra=(*MOUNT_ARGS, "--header", "X-One: 1", "--header", "X-Two: two words"))
    assert read_whole(m.path("h.bin")) == srv.data("h.bin")
    recs = srv.wait_idle(WAIT)
    assert recs
    for r in recs:
        assert r.headers.get("X-One") == "1" and r.headers.get("X-Two") == "two words", (r.method, r.headers)


def test_config_file_adds_headers_per_host(mount, srv, tmp_path):
    srv.add("c.bin", data_of(2000, 61))
    srv.add("d.bin", data_of(3000, 62))
    config = tmp_path / "mediafs.conf"
    config.write_text("# per-host headers\n[127.0.0.1]\nX-For-Ip: ip\n\n[localhost]\nX-For-Name: name\n")
    m = mount(srv.url("c.bin"), f"http://localhost:{srv.port}/d.bin", extra=(*MOUNT_ARGS, "--config", config))
    assert read_whole(m.path("c.bin")) == srv.data("c.bin")
    assert read_whole(m.path("d.bin")) == srv.data("d.bin")
    recs = srv.wait_idle(WAIT)
    for r in recs:
        host = r.headers.get("Host", "")
        if host.startswith("127.0.0.1"):
            assert r.headers.get("X-For-Ip") == "ip" and "X-For-Name" not in r.headers, r.headers
        else:
            assert r.headers.get("X-For-Name") == "name" and "X-For-Ip" not in r.headers, r.headers
    assert {r.name for r in recs} == {"c.bin", "d.bin"}


def test_netrc_supplies_credentials(mount, srv, tmp_path, monkeypatch):
    home = tmp_path / "home"
    home.mkdir()
    (home / ".netrc").write_text(f"machine 127.0.0.1 login nuser password {SECRET}\n")
    os.chmod(home / ".netrc", 0o600)
    monkeypatch.setenv("HOME", str(home))
    srv.add("n.bin", data_of(5000, 63))
    m = mount(srv.url("n.bin"), extra=(*MOUNT_ARGS, "--netrc", "-d"))
    assert read_whole(m.path("n.bin")) == srv.data("n.bin")
    recs = srv.wait_idle(WAIT)
    assert recs and all(r.headers.get("Authorization") == basic("nuser", SECRET) for r in recs), \
        [r.headers for r in recs]
    assert SECRET not in m.stderr()


def test_a_password_in_a_url_is_never_on_a_command_line(mount, srv, mediafs_bin, tmp_path):
    """`ps` shows `user:****@` for the foreground mount and for a spawned
    daemon (which gets the real arguments through a pipe), and both still
    send the real password."""
    srv.add("p.bin", data_of(100 * KiB, 65))
    url = f"http://alice:{SECRET}@127.0.0.1:{srv.port}/p.bin"
    masked = f"http://alice:{'*' * len(SECRET)}@127.0.0.1:{srv.port}/p.bin"
    m = mount(url, extra=MOUNT_ARGS)
    shown = harness.cmdline(m.pid)
    assert masked in shown and not any(SECRET in a for a in shown), shown
    assert read_whole(m.path("p.bin")) == srv.data("p.bin")
    mountpoint = tmp_path / "daemon-mnt"
    mountpoint.mkdir()
    log = tmp_path / "daemon.out"
    with open(log, "wb") as out:
        started = subprocess.run([str(mediafs_bin), "mount", "--cache-dir", str(tmp_path / "daemon-cache"),
                                  *MOUNT_ARGS, url, str(mountpoint)], stdin=subprocess.DEVNULL, stdout=out,
                                 stderr=out, timeout=60)
    daemons = harness.mediafs_pids(with_arg=str(mountpoint))
    try:
        assert started.returncode == 0, log.read_text()
        assert len(daemons) == 1, daemons
        shown = harness.cmdline(daemons[0])
        assert masked in shown and not any(SECRET in a for a in shown), shown
        srv.clear_log()
        assert read_whole(mountpoint / "p.bin") == srv.data("p.bin")
        recs = srv.wait_idle(WAIT)
        assert recs and all(r.headers.get("Authorization") == basic("alice", SECRET) for r in recs), \
            [r.headers for r in recs]
    finally:
        harness.fusermount_unmount(mountpoint)
        harness.wait_pids_gone(daemons)
        for pid in daemons:
            harness.stop_pid(pid, timeout=0)


def test_userinfo_in_url_is_basic_auth_and_never_shown(mount, srv):
    srv.add("u.bin", data_of(200 * KiB, 64))
    srv.add("missing-later.bin", b"x")
    good = f"http://alice:{SECRET}@127.0.0.1:{srv.port}/u.bin"
    missing = f"http://alice:{SECRET}@127.0.0.1:{srv.port}/absent.bin"
    m = mount(good, missing, extra=(*MOUNT_ARGS, "-d"))
    assert listdir_sorted(m.mountpoint) == ["absent.bin", "u.bin"]
    assert read_whole(m.path("u.bin")) == srv.data("u.bin")
    with pytest.raises(OSError) as e:
        os.stat(m.path("absent.bin"))
    assert e.value.errno == errno.ENOENT
    recs = srv.wait_idle(WAIT)
    assert all(r.headers.get("Authorization") == basic("alice", SECRET) for r in recs), [r.headers for r in recs]
    url_attr = xget(m.path("u.bin"), "url")
    assert SECRET not in url_attr and url_attr.endswith("/u.bin"), url_attr
    r = run("getfattr", "--absolute-names", "-d", "-m", "-", m.path("u.bin"), m.path("absent.bin"))
    assert SECRET not in r.stdout + r.stderr
    for args in (("status", m.mountpoint), ("status", m.mountpoint, "--json")):
        r = mediafs(*args)
        assert r.returncode == 0, r.stderr
        assert SECRET not in r.stdout + r.stderr, r.stdout
    json.loads(mediafs("status", m.mountpoint, "--json").stdout)
    wait_until(lambda: "absent.bin" in m.stderr(), "a log line about absent.bin", timeout=10)
    assert SECRET not in m.stderr(), m.stderr()


def test_credentials_in_a_playlist_url_are_never_shown(fuse, srv, tmp_path):
    status, out = refused(tmp_path, f"http://bob:{SECRET}@127.0.0.1:{srv.port}/nothing-here.m3u")
    assert status == 1, out
    assert "nothing-here.m3u" in out and SECRET not in out, out


def test_credentials_in_a_listing_url_are_sent_and_never_shown(mount, srv):
    srv.add("priv/a.bin", data_of(1000, 65))
    srv.add("priv/", autoindex_html("/priv/", [("a.bin", "a.bin")]).encode(), content_type="text/html")
    m = mount(f"http://carol:{SECRET}@127.0.0.1:{srv.port}/priv/", extra=(*MOUNT_ARGS, "-d"))
    assert os.listdir(m.mountpoint) == ["a.bin"]
    assert read_whole(m.path("a.bin")) == srv.data("priv/a.bin")
    recs = srv.wait_idle(WAIT)
    assert all(r.headers.get("Authorization") == basic("carol", SECRET) for r in recs), \
        [(r.path, r.headers.get("Authorization")) for r in recs]
    assert SECRET not in xget(m.path("a.bin"), "url")
    assert SECRET not in mediafs("status", m.mountpoint).stdout
    assert SECRET not in m.stderr()


def _cross_host_redirect(srv, other, name):
    """Make srv's redirect fault point at another origin: `other` is
    'hostname' (localhost, same port) or 'port' (a second server)."""
    if other == "hostname":
        srv.host = "localhost"   # only used to build the Location header
        return srv, None
    second = FaultServer().start()
    second.add(name, srv.data(name))
    srv.port = second.port       # only used to build the Location header
    return second, second


# netrc names a machine, not a port, but a redirect to another port of it
# reaches another server all the same: netrc is consulted for the first
# URL's origin only.
@pytest.mark.parametrize("how,other", [(h, o) for h in ("header", "userinfo", "netrc", "config")
                                       for o in ("hostname", "port")])
def test_authorization_is_not_sent_to_another_host_after_a_redirect(mount, srv, tmp_path, monkeypatch,
                                                                    how, other):
    name = "r.bin"
    srv.add(name, data_of(100 * KiB, 66))
    url = srv.url(name)
    extra = list(MOUNT_ARGS)
    if how == "header":
        extra += ["--header", f"Authorization: Bearer {SECRET}"]
    elif how == "userinfo":
        url = url.replace("http://", f"http://dave:{SECRET}@")
    elif how == "netrc":
        home = tmp_path / "home"
        home.mkdir()
        (home / ".netrc").write_text(f"machine 127.0.0.1 login dave password {SECRET}\n")
        monkeypatch.setenv("HOME", str(home))
        extra += ["--netrc"]
    else:
        config = tmp_path / "c.conf"
        config.write_text(f"[127.0.0.1]\nAuthorization: Bearer {SECRET}\n")
        extra += ["--config", config]
    srv.set_fault(name, "redirect", code=302)
    target, second = _cross_host_redirect(srv, other, name)
    try:
        m = mount(url, extra=extra)
        got = read_whole(m.path(name))
        assert got == srv.data(name)
        first = srv.wait_idle(WAIT)
        assert any(r.path == f"/{name}" and "Authorization" in r.headers for r in first), \
            f"the first host never got the credentials: {[r.headers for r in first]}"
        followed = [r for r in target.wait_idle(WAIT) if r.path.startswith("/_real/")]
        assert followed, "the redirect was not followed"
        leaks = [(r.method, r.headers) for r in followed
                 if "Authorization" in r.headers or SECRET in str(r.headers)]
        assert not leaks, f"credentials sent to {other}-different host after a redirect: {leaks}"
        assert SECRET not in m.stderr()
    finally:
        if second is not None:
            second.stop()


def test_per_host_config_headers_are_not_sent_to_another_host_after_a_redirect(mount, srv, tmp_path):
    """A `[127.0.0.1]` section's headers (an API key, say) are for that host:
    a redirect to `localhost` must not carry them."""
    name = "k.bin"
    srv.add(name, data_of(50 * KiB, 67))
    config = tmp_path / "c.conf"
    config.write_text(f"[127.0.0.1]\nX-Api-Key: {SECRET}\n")
    srv.set_fault(name, "redirect", code=302)
    url = srv.url(name)
    srv.host = "localhost"   # only used to build the Location header
    m = mount(url, extra=(*MOUNT_ARGS, "--config", config))
    assert read_whole(m.path(name)) == srv.data(name)
    recs = srv.wait_idle(WAIT)
    assert any(r.path == f"/{name}" and r.headers.get("X-Api-Key") == SECRET for r in recs)
    leaks = [(r.method, r.path, r.headers) for r in recs
             if r.headers.get("Host", "").startswith("localhost") and "X-Api-Key" in r.headers]
    assert not leaks, f"the [127.0.0.1] header went to localhost after a redirect: {leaks}"
