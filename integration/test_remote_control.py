"""rclone's remote control on `--rc`, driven by `rclone rc` itself (the
client the gateways' docs show) and by plain HTTP where the test needs the
status: `vfs/refresh` and `vfs/forget` list a directory again and the name
is there (or gone) when the call returns; bad credentials and paths outside
the mount do nothing. The listing is an in-process FaultServer's index,
whose request log says what reached the server; the same calls against
Apache's mod_dav and S3 (moto) show the change to stat and ls at once
(the kernel told, decision 0051), each one listing at the server."""

import base64
import json
import os
import shutil
import subprocess
import urllib.error
import urllib.request

import pytest

from harness import free_port, index_html, mediafs

PASSWORD = "rc-secret-4f1"


@pytest.fixture(autouse=True)
def rclone_installed():
    if shutil.which("rclone") is None or shutil.which("htpasswd") is None:
        pytest.fail("rclone or htpasswd not found: run scripts/install-deps.sh")


def serve(srv, names):
    for name in names:
        srv.add(f"media/{name}", name.encode() * 10)
    srv.add("media/", index_html(sorted(names)).encode(), content_type="text/html")


def listing_gets(srv):
    return sum(1 for r in srv.requests if r.method == "GET" and r.path == "/media/")


@pytest.fixture
def rc_mount(mount, srv, tmp_path):
    serve(srv, ["a.mkv", "b.mkv"])
    secret = tmp_path / "rc-pass"
    secret.write_text(PASSWORD + "\n")
    secret.chmod(0o600)
    port = free_port()
    m = mount(srv.url("media/"), extra=["--timeout", "10", "--rc", f"127.0.0.1:{port}", "--rc-user", "gateway",
                                        "--rc-pass-file", str(secret)])
    assert sorted(os.listdir(m.mountpoint)) == ["a.mkv", "b.mkv"]
    return m, f"http://127.0.0.1:{port}/"


def rclone_rc(url, *args, password=PASSWORD):
    r = subprocess.run(["rclone", "rc", "--url", url, "--user", "gateway", "--pass", password, *args],
                       capture_output=True, text=True, timeout=60,
                       env={k: v for k, v in os.environ.items() if not k.startswith("RCLONE_")})
    return r.returncode, r.stdout, r.stderr


def post(url, command, body=None, user="gateway", password=PASSWORD):
    request = urllib.request.Request(url + command, data=json.dumps(body or {}).encode(), method="POST",
                                     headers={"Content-Type": "application/json"})
    if user is not None:
        token = base64.b64encode(f"{user}:{password}".encode()).decode()
        request.add_header("Authorization", "Basic " + token)
    try:
        with urllib.request.urlopen(request, timeout=60) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode(errors="replace")


def test_core_version_and_pid_through_rclone_rc(rc_mount):
    m, url = rc_mount
    code, out, err = rclone_rc(url, "core/version")
    assert code == 0, err
    assert json.loads(out)["version"].startswith("mediafs "), out
    code, out, err = rclone_rc(url, "core/pid")
    assert code == 0 and json.loads(out)["pid"] == m.pid, (out, err)
    code, out, err = rclone_rc(url, "rc/noop", "x=1")
    assert code == 0 and json.loads(out) == {"x": "1"}, (out, err)


def test_vfs_refresh_shows_a_file_the_server_added_when_it_returns(rc_mount, srv):
    m, url = rc_mount
    serve(srv, ["a.mkv", "b.mkv", "c.mkv"])
    # Within --dir-cache-time the old listing is believed.
    assert "c.mkv" not in os.listdir(m.mountpoint)
    code, out, err = rclone_rc(url, "vfs/refresh")
    assert code == 0, err
    assert json.loads(out) == {"result": {"": "OK"}}, out
    assert sorted(os.listdir(m.mountpoint)) == ["a.mkv", "b.mkv", "c.mkv"]
    assert open(m.path("c.mkv"), "rb").read() == b"c.mkv" * 10


def test_vfs_forget_of_a_removed_file_drops_it_at_once_even_when_it_was_most_of_the_directory(rc_mount, srv):
    m, url = rc_mount
    serve(srv, [])
    code, out, err = rclone_rc(url, "vfs/forget", "file=a.mkv", "file2=b.mkv")
    assert code == 0, err
    assert sorted(json.loads(out)["forgotten"]) == ["a.mkv", "b.mkv"], out
    # The gateway said so: no doubt of an empty listing (--listing-doubt).
    assert os.listdir(m.mountpoint) == []


def test_bad_credentials_get_401_and_nothing_is_done(rc_mount, srv):
    m, url = rc_mount
    serve(srv, ["a.mkv", "b.mkv", "c.mkv"])
    before = listing_gets(srv)
    code, out, err = rclone_rc(url, "vfs/refresh", password="wrong")
    assert code != 0 and "401" in err, (code, out, err)
    status, _ = post(url, "vfs/forget", {"file": "a.mkv"}, user=None)
    assert status == 401
    assert listing_gets(srv) == before, "an unauthenticated call reached the server"
    assert "c.mkv" not in os.listdir(m.mountpoint)
    assert PASSWORD not in m.stderr() and "wrong" not in m.stderr()


def test_a_path_outside_the_mount_is_an_error_and_nothing_is_listed(rc_mount, srv):
    m, url = rc_mount
    before = listing_gets(srv)
    status, body = post(url, "vfs/forget", {"file": "../../etc/passwd"})
    assert status == 400 and "outside the mount" in body, (status, body)
    status, body = post(url, "vfs/forget", {"dir": "no/such/dir"})
    assert status == 404 and "no such directory" in body, (status, body)
    status, body = post(url, "vfs/refresh", {"dir": "../x"})
    assert status == 200 and body["result"] == {"../x": "../x: a path outside the mount"}, body
    status, body = post(url, "vfs/nothing")
    assert status == 404 and "couldn't find method" in body, body
    assert listing_gets(srv) == before


def test_an_htpasswd_file_of_bcrypt_entries_lets_its_users_in(mount, srv, tmp_path):
    serve(srv, ["a.mkv"])
    htpasswd = tmp_path / "htpasswd"
    subprocess.run(["htpasswd", "-cbB", str(htpasswd), "gateway", PASSWORD], check=True, capture_output=True)
    port = free_port()
    m = mount(srv.url("media/"), extra=["--rc", f"127.0.0.1:{port}", "--rc-htpasswd", str(htpasswd)])
    url = f"http://127.0.0.1:{port}/"
    assert post(url, "core/pid")[1] == {"pid": m.pid}
    assert post(url, "core/pid", password="nope")[0] == 401


@pytest.mark.parametrize("args,says", [
    (["--rc", "127.0.0.1:{port}"], "--rc-user"),
    (["--rc", "0.0.0.0:{port}", "--rc-no-auth"], "loopback"),
    (["--rc", "127.0.0.1:{port}", "--rc-pass", "x"], "ps"),
    (["--rc-no-auth"], "need --rc"),
    (["--rc", "127.0.0.1:{port}", "--rc-user", "u"], "MEDIAFS_RC_PASS"),
])
def test_a_remote_control_without_a_way_to_authenticate_is_refused(fuse, tmp_path, args, says):
    port = free_port()
    r = mediafs("mount", "-f", "--cache-dir", tmp_path / "c", *[a.format(port=port) for a in args],
                "http://127.0.0.1:9/media/", tmp_path)
    assert r.returncode == 2 and says in r.stderr, r.stderr


def test_a_recursive_refresh_lists_every_directory_below_and_probes_no_file(rc_mount, srv):
    m, url = rc_mount
    srv.add("media/sub/x.mkv", b"x" * 10)
    srv.add("media/sub/", index_html(["x.mkv"]).encode(), content_type="text/html")
    srv.add("media/", index_html(["a.mkv", "b.mkv", "sub/"]).encode(), content_type="text/html")
    assert post(url, "vfs/refresh")[0] == 200
    assert os.listdir(m.path("sub")) == ["x.mkv"]
    srv.add("media/sub/y.mkv", b"y" * 10)
    srv.add("media/sub/", index_html(["x.mkv", "y.mkv"]).encode(), content_type="text/html")
    # The listing's own background probe of its entry (ls -l's), done first.
    srv.wait_for(lambda log: any(r.path == "/media/sub/x.mkv" and r.done for r in log), timeout=30)
    srv.wait_idle(30)
    srv.clear_log()
    code, out, err = rclone_rc(url, "vfs/refresh", "recursive=true")
    assert code == 0 and json.loads(out) == {"result": {"": "OK"}}, (out, err)
    asked = sorted(r.path for r in srv.requests)
    assert asked == ["/media/", "/media/sub/"], f"a recursive refresh asked for {asked}"
    assert sorted(os.listdir(m.path("sub"))) == ["x.mkv", "y.mkv"]


def test_the_remote_control_from_mount_options_as_fstab_gives_them(mount, srv):
    serve(srv, ["a.mkv"])
    port = free_port()
    m = mount(srv.url("media/"), extra=["-o", f"rc=127.0.0.1:{port},rc_no_auth"])
    assert post(f"http://127.0.0.1:{port}/", "core/pid", user=None) == (200, {"pid": m.pid})


def rc_args(tmp_path):
    """--rc on a free loopback port with the test's password file: (args, url)."""
    secret = tmp_path / "rc-pass"
    secret.write_text(PASSWORD + "\n")
    secret.chmod(0o600)
    port = free_port()
    return (["--timeout", "10", "--rc", f"127.0.0.1:{port}", "--rc-user", "gateway", "--rc-pass-file", str(secret)],
            f"http://127.0.0.1:{port}/")


def notified(m):
    from harness import xget
    return json.loads(xget(m.mountpoint, "stats"))["kernel_entry_notifications"]


def refresh_then_forget(m, url, add, remove, clear_log, listings, listed):
    """`vfs/refresh dir=shows` after `add()` put shows/new.mkv (50 bytes) on
    the server, then `vfs/forget file=shows/a.mkv` after `remove()` took
    shows/a.mkv (100 bytes) away: when each call returns the kernel was
    told (the call waits for it), so stat, then ls, see the new state, and
    `listings()` == `listed` for each call. Each name is stat'ed first, so
    the kernel holds it (as missing, or as a file) when the call comes."""
    assert missing(m.path("shows/new.mkv")), "the kernel now holds the name as missing"
    add()
    clear_log()
    before = notified(m)
    code, out, err = rclone_rc(url, "vfs/refresh", "dir=shows")
    assert code == 0 and json.loads(out)["result"] == {"shows": "OK"}, (out, err)
    assert os.stat(m.path("shows/new.mkv")).st_size == 50, "the added name stats when the call returns"
    assert sorted(os.listdir(m.path("shows"))) == ["a.mkv", "new.mkv"], "listed when the call returns"
    assert notified(m) == before + 1, "the kernel was told of the one added name"
    assert listings() == listed, listings()

    assert os.stat(m.path("shows/a.mkv")).st_size == 100
    remove()
    clear_log()
    before = notified(m)
    code, out, err = rclone_rc(url, "vfs/forget", "file=shows/a.mkv")
    assert code == 0 and json.loads(out)["forgotten"] == ["shows/a.mkv"], (out, err)
    assert missing(m.path("shows/a.mkv")), "the removed name is gone to stat when the call returns"
    assert os.listdir(m.path("shows")) == ["new.mkv"], "gone from the listing when the call returns"
    assert notified(m) == before + 1, "the kernel was told of the one removed name"
    assert listings() == listed, listings()


def missing(path):
    """Whether a stat says ENOENT (it leaves the kernel a negative entry)."""
    try:
        os.stat(path)
        return False
    except FileNotFoundError:
        return True


def test_refresh_and_forget_on_apache_webdav_show_at_once_to_stat_and_ls(mount, tmp_path):
    """A gateway adds and removes files on Apache's mod_dav and calls
    rclone's API: when `vfs/refresh` returns, the added name stats (the
    kernel had it cached as missing) and lists; when `vfs/forget` returns,
    the removed one is gone to stat and ls. Each call sent the server one
    listing (a depth-1 PROPFIND) of that directory and nothing else."""
    from davservers import ApacheDav, make_served_dir
    served = make_served_dir()
    server = ApacheDav(served)
    try:
        (served / "shows").mkdir()
        (served / "shows" / "a.mkv").write_bytes(b"a" * 100)
        for path in [served, *served.rglob("*")]:
            path.chmod(0o755 if path.is_dir() else 0o644)
        server.start()
        args, url = rc_args(tmp_path)
        m = mount(server.url("open").replace("http://", "dav://"), extra=args)
        assert os.listdir(m.path("shows")) == ["a.mkv"]
        assert missing(m.path("shows/new.mkv"))
        new = served / "shows" / "new.mkv"
        refresh_then_forget(m, url, add=lambda: (new.write_bytes(b"n" * 50), new.chmod(0o644)),
                            remove=(served / "shows" / "a.mkv").unlink, clear_log=server.log.clear,
                            listings=server.log.propfinds, listed=[("/open/shows/", "1")])
    finally:
        server.remove()
        shutil.rmtree(served, ignore_errors=True)


def test_refresh_and_forget_on_s3_show_at_once_to_stat_and_ls(mount, monkeypatch, tmp_path):
    """The same against S3 (moto behind the signature-checking proxy): one
    list request of the prefix per call."""
    from s3proxy import CheckingProxy, MotoServer, own_aws_environment
    moto = MotoServer()
    proxy = CheckingProxy(moto.port, region="us-east-1")
    try:
        client = moto.client()
        client.create_bucket(Bucket="media")
        client.put_object(Bucket="media", Key="lib/shows/a.mkv", Body=b"a" * 100)
        proxy.add_key("AKIDRCTEST", "s3cr3t")
        own_aws_environment(monkeypatch, tmp_path, ("AKIDRCTEST", "s3cr3t"))
        args, url = rc_args(tmp_path)
        m = mount("s3://media/lib/", extra=["--s3-endpoint", proxy.url, *args])
        assert os.listdir(m.path("shows")) == ["a.mkv"]
        assert missing(m.path("shows/new.mkv"))

        refresh_then_forget(
            m, url, add=lambda: client.put_object(Bucket="media", Key="lib/shows/new.mkv", Body=b"n" * 50),
            remove=lambda: client.delete_object(Bucket="media", Key="lib/shows/a.mkv"), clear_log=proxy.clear,
            listings=lambda: [r.query.get("prefix") for r in proxy.requests(method="GET", list_only=True)],
            listed=["lib/shows/"])
    finally:
        proxy.stop()
        moto.stop()
