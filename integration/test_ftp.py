"""FTP directories as sources (`ftp://`, explicit TLS as --ftp-tls says),
end to end against pyftpdlib (ftpserver.py), plain and with AUTH TLS, one
user with a password, at most three connections from one address. Each
test checks what the server logged.

- A tree mounts with the server's sizes and times, each directory one MLSD
  and no RETR; files read byte-exact whole and at offsets (REST).
- A server without MLSD (as vsftpd) is listed with LIST, read by libcurl's
  parser: sizes exact, one MLSD refused and then one LIST a directory; a
  file's date is its first read's (LIST's minutes are no validator).
- Reads of several files at once never hold more than three connections.
- TLS is required by default: a plain server refuses the mount's listing
  with a line that says so; --ftp-tls off reads it; with AUTH TLS and
  --cacert everything, the login included, is encrypted; `ftps://` (TLS
  from the first byte) lists and reads the same.
- The password (URL or ~/.netrc) never shows in a log or a command line.
"""

import errno
import os
import shutil
import tempfile
import threading
from pathlib import Path

import pytest

import harness
from ftpserver import MAX_PER_IP, FTPServer
from harness import data_of, read_range, read_whole

TREE = {
    "one.bin": 1_000_003,
    "two words.bin": 70_000,
    "café.bin": 9_000,
    "Season 1/ep 1.bin": 300_000,
    "Season 1/ep 2.bin": 400_000,
    "Season 1/ep 3.bin": 500_000,
    "Season 1/ep 4.bin": 600_000,
}


@pytest.fixture
def served():
    root = Path(tempfile.mkdtemp(prefix="mediafs-ftp-"))
    for i, (rel, size) in enumerate(sorted(TREE.items())):
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data_of(size, 700 + i))
        os.utime(path, (1_700_000_000 + i * 7_211, 1_700_000_000 + i * 7_211))
    yield root
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def home(tmp_path, monkeypatch):
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    return home


@pytest.fixture
def plain(tmp_path, served, home):
    server = FTPServer(tmp_path / "ftp", served).start()
    yield server
    server.stop()


@pytest.fixture
def tls(tmp_path, served, home):
    server = FTPServer(tmp_path / "ftps", served, tls=True).start()
    yield server
    server.stop()


ARGS = ("--timeout", "10")


def test_a_plain_tree_mounts_with_sizes_and_times_one_mlsd_each_and_reads_byte_exact(mount, plain, served):
    m = mount(plain.url("/"), extra=(*ARGS, "--ftp-tls", "off"))
    listed = {p.name: p.stat() for p in m.mountpoint.iterdir()}
    assert sorted(listed) == sorted(p.name for p in served.iterdir())
    for name, st in listed.items():
        if (served / name).is_file():
            original = (served / name).stat()
            assert (st.st_size, int(st.st_mtime)) == (original.st_size, int(original.st_mtime)), name
    inner = {p.name: p.stat().st_size for p in (m.mountpoint / "Season 1").iterdir()}
    assert inner == {name.split("/")[1]: size for name, size in TREE.items() if name.startswith("Season 1/")}
    assert len(plain.commands("MLSD")) == 2 and not plain.commands("RETR"), plain.lines()[-20:]
    data = (served / "one.bin").read_bytes()
    for offset, size in [(999_000, 3_003), (0, 1), (500_000, 131_072)]:
        assert read_range(m.path("one.bin"), offset, size) == data[offset:offset + size], (offset, size)
    assert plain.commands("REST"), "ranges are asked with REST"
    for rel in TREE:
        assert read_whole(m.path(rel)) == (served / rel).read_bytes(), rel


def test_a_server_without_mlsd_is_listed_with_list_and_reads_byte_exact(mount, tmp_path, served, home):
    server = FTPServer(tmp_path / "ftp-nomlsd", served, mlsd=False).start()
    try:
        m = mount(server.url("/"), extra=(*ARGS, "--ftp-tls", "off"))
        listed = {p.name: p.stat().st_size for p in m.mountpoint.iterdir()}
        assert listed.keys() == {p.name for p in served.iterdir()}
        for name, size in listed.items():
            if (served / name).is_file():
                assert size == (served / name).stat().st_size, name
        inner = {p.name: p.stat().st_size for p in (m.mountpoint / "Season 1").iterdir()}
        assert inner == {name.split("/")[1]: size for name, size in TREE.items() if name.startswith("Season 1/")}
        assert len(server.commands("MLSD")) == 1, "refused once, then remembered"
        assert len(server.commands("LIST")) == 2 and not server.commands("RETR"), server.lines()[-20:]
        assert "has no MLSD" in m.stderr()
        for rel in TREE:
            assert read_whole(m.path(rel)) == (served / rel).read_bytes(), rel
        # LIST gives no time to the second: a file's first answer (MDTM)
        # names its version, and its date is the server's from then on.
        original = int((served / "one.bin").stat().st_mtime)
        harness.wait_until(lambda: int(os.stat(m.path("one.bin")).st_mtime) == original,
                           "the read's MDTM date to be the file's")
        assert "changed on the server" not in m.stderr()
    finally:
        server.stop()


def test_reads_of_many_files_at_once_hold_at_most_three_connections(mount, plain, served):
    m = mount(plain.url("/"), extra=(*ARGS, "--ftp-tls", "off"))
    names = [rel for rel in TREE if rel.startswith("Season 1/")] + ["one.bin", "two words.bin", "café.bin"]
    results = {}

    def read(rel):
        results[rel] = read_whole(m.path(rel))
    threads = [threading.Thread(target=read, args=(rel,)) for rel in names]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert all(results.get(rel) == (served / rel).read_bytes() for rel in names)
    assert not any("-> 421 " in line for line in plain.lines()), "the server never refused a connection"
    assert peak_connections(plain) <= MAX_PER_IP


def test_tls_is_required_by_default_and_a_plain_server_is_refused_saying_so(mount, plain):
    m = mount(plain.url("/"), extra=ARGS)
    with pytest.raises(OSError):
        os.listdir(m.mountpoint)
    harness.wait_for_stderr(m, "TLS")
    assert not plain.commands("PASS"), "no password was sent in clear"


def test_explicit_tls_with_cacert_lists_and_reads_and_encrypts_the_login(mount, tls, served):
    m = mount(tls.url("/"), extra=(*ARGS, "--cacert", str(tls.cert)))
    assert read_whole(m.path("Season 1/ep 2.bin")) == (served / "Season 1" / "ep 2.bin").read_bytes()
    commands = [line.split("<- ")[1].split()[0] for line in tls.lines() if "<- " in line]
    assert commands.index("AUTH") < commands.index("PASS"), "AUTH TLS before the password"
    assert tls.commands("PROT"), "the data connections are encrypted too"


def test_implicit_tls_ftps_lists_and_reads_byte_exact_with_no_auth_command(mount, tmp_path, served, home):
    server = FTPServer(tmp_path / "implicit", served, implicit=True).start()
    try:
        m = mount(server.url("/", scheme="ftps"), extra=(*ARGS, "--cacert", str(server.cert)))
        assert sorted(os.listdir(m.mountpoint)) == sorted({rel.split("/")[0] for rel in TREE})
        assert m.path("one.bin").stat().st_size == TREE["one.bin"]
        assert read_range(m.path("one.bin"), 500_000, 4096) == (served / "one.bin").read_bytes()[500_000:504_096]
        commands = [line.split("<- ")[1].split()[0] for line in server.lines() if "<- " in line]
        # The server refuses USER and PASS before its TLS is up: a login
        # at all says it was encrypted; no AUTH, as TLS came first.
        assert "PASS" in commands and "AUTH" not in commands, commands
        assert server.commands("PROT"), "the data connections are encrypted too"
    finally:
        server.stop()


def test_the_password_from_netrc_logs_in_and_shows_nowhere(mount, plain, served, home):
    (home / ".netrc").write_text(f"machine 127.0.0.1 login {plain.user} password {plain.password}\n")
    m = mount(plain.url("/", with_password=False), extra=(*ARGS, "--ftp-tls", "off", "--netrc"))
    assert read_whole(m.path("café.bin")) == (served / "café.bin").read_bytes()
    assert plain.commands("PASS")
    assert plain.password not in m.stderr()
    assert plain.password.encode() not in Path(f"/proc/{m.pid}/cmdline").read_bytes()


def test_a_url_password_is_masked_on_the_command_line(mount, plain, served):
    m = mount(plain.url("/"), extra=(*ARGS, "--ftp-tls", "off"))
    assert read_whole(m.path("two words.bin")) == (served / "two words.bin").read_bytes()
    assert plain.password.encode() not in Path(f"/proc/{m.pid}/cmdline").read_bytes()
    assert plain.password not in m.stderr()


def test_a_file_gone_from_the_server_is_an_error_naming_the_host(mount, plain, served):
    m = mount(plain.url("/"), extra=(*ARGS, "--ftp-tls", "off"))
    assert m.path("two words.bin").stat().st_size == 70_000
    (served / "two words.bin").unlink()
    with pytest.raises(OSError) as caught:
        read_range(m.path("two words.bin"), 0, 4096)
    assert caught.value.errno in (errno.ENOENT, errno.EIO)
    harness.wait_for_stderr(m, f"127.0.0.1:{plain.port}")


def peak_connections(server):
    """The most connections open at once, from the log's opened and closed lines."""
    open_now = peak = 0
    for line in server.lines():
        if "FTP session opened" in line:
            open_now += 1
            peak = max(peak, open_now)
        elif "FTP session closed" in line:
            open_now -= 1
    return peak
