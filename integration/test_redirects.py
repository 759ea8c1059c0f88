"""What a redirect may carry. Credentials (Authorization, Cookie and
Proxy-Authorization, from --header, --config, ~/.netrc or user:pass@) and
per-host config headers go only to the scheme, host and port of the URL
asked for: for file transfers, probes, directory listings and remote
playlists alike. Also: `[host]` and `[host:port]` sections, the redirect
limit, redirects to other schemes, and signed URLs' secrets never shown.

Each test looks at what the other server received: FaultServer records every
request's headers. "Another origin" is `localhost` on the same server (the
first URL says 127.0.0.1) or a second server on another port.
"""

import base64
import errno
import os

import pytest

import harness
from faultserver import FaultServer
from harness import autoindex_html, data_of, mediafs, read_whole, run, wait_for_stderr, xget

KiB = 1024
WAIT = 30.0
MOUNT_ARGS = ("--timeout", "10")
SECRET = "s3cr3t-Pa55"
CREDENTIAL_HEADERS = {"Authorization", "Cookie", "Proxy-Authorization", "X-Api-Key"}
SECRET_HEADERS = ("--header", f"Authorization: Bearer {SECRET}",
                  "--header", f"Cookie: session={SECRET}",
                  "--header", f"Proxy-Authorization: Basic {SECRET}",
                  "--header", "X-Plain: plain")


def basic(user, password):
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


def secret_config(tmp_path):
    config = tmp_path / "secret.conf"
    config.write_text(f"[127.0.0.1]\nX-Api-Key: {SECRET}\n")
    return ("--config", config)


class Elsewhere:
    """Another origin for srv's redirects: what it serves and what it got."""

    def __init__(self, srv, second):
        self.srv, self.second = srv, second
        self.base = second.base_url if second else f"http://localhost:{srv.port}/"

    def add(self, name, data, **kw):
        (self.second or self.srv).add(name, data, **kw)

    def requests(self, timeout=WAIT):
        if self.second:
            return self.second.wait_idle(timeout)
        return [r for r in self.srv.wait_idle(timeout) if r.headers.get("Host", "").startswith("localhost")]


@pytest.fixture(params=["hostname", "port"])
def elsewhere(request, srv):
    second = FaultServer().start() if request.param == "port" else None
    try:
        yield Elsewhere(srv, second)
    finally:
        if second:
            second.stop()


def first_host_requests(srv, path):
    return [r for r in srv.wait_idle(WAIT)
            if r.path == path and r.headers.get("Host", "").startswith("127.0.0.1")]


def assert_got_every_credential(requests, what):
    assert requests, f"no request for {what}"
    for r in requests:
        assert r.headers.get("Authorization") == f"Bearer {SECRET}", (what, r.headers)
        assert r.headers.get("Cookie") == f"session={SECRET}", (what, r.headers)
        assert r.headers.get("Proxy-Authorization") == f"Basic {SECRET}", (what, r.headers)
        assert r.headers.get("X-Api-Key") == SECRET, (what, r.headers)


def assert_got_no_credential(requests, what):
    """The redirect was followed, with the plain --header, and nothing secret."""
    followed = [r for r in requests if r.path.startswith("/_real/")]
    assert followed, f"the redirect of {what} was not followed: {[r.path for r in requests]}"
    assert all(r.headers.get("X-Plain") == "plain" for r in followed), [r.headers for r in followed]
    leaks = [(r.method, r.path, r.headers) for r in requests
             if CREDENTIAL_HEADERS & set(r.headers) or SECRET in str(r.headers)]
    assert not leaks, f"{what}: credentials sent to another origin after a redirect: {leaks}"


# ---------------------------------------------------------------- another origin gets nothing secret

def test_a_file_redirected_to_another_origin_gets_no_credentials(mount, srv, tmp_path, elsewhere):
    name = "moved.bin"
    srv.add(name, data_of(100 * KiB, 90))
    elsewhere.add(name, srv.data(name))
    srv.set_fault(name, "redirect", code=302, to=elsewhere.base)
    m = mount(srv.url(name), extra=(*MOUNT_ARGS, *SECRET_HEADERS, *secret_config(tmp_path)))
    assert read_whole(m.path(name)) == srv.data(name)
    # The lookup's probe is a ranged GET that brings the whole file.
    assert {r.method for r in first_host_requests(srv, f"/{name}")} == {"GET"}
    assert_got_every_credential(first_host_requests(srv, f"/{name}"), name)
    assert_got_no_credential(elsewhere.requests(), name)
    assert SECRET not in m.stderr()


def test_a_listing_redirected_to_another_origin_gets_no_credentials(mount, srv, tmp_path, elsewhere):
    listing = autoindex_html("/priv/", [("a.bin", "a.bin")], sizes={"a.bin": 10 * KiB}).encode()
    srv.add("priv/", listing, content_type="text/html")
    srv.add("priv/a.bin", data_of(10 * KiB, 91))
    elsewhere.add("priv/", listing, content_type="text/html")
    srv.set_fault("priv/", "redirect", code=301, to=elsewhere.base)
    m = mount(srv.url("priv/"), extra=(*MOUNT_ARGS, *SECRET_HEADERS, *secret_config(tmp_path)))
    assert os.listdir(m.mountpoint) == ["a.bin"]
    # The listing's links resolve against the URL asked for: a.bin is the first host's.
    assert read_whole(m.path("a.bin")) == srv.data("priv/a.bin")
    assert_got_every_credential(first_host_requests(srv, "/priv/"), "the listing")
    assert_got_every_credential(first_host_requests(srv, "/priv/a.bin"), "a listed file")
    assert_got_no_credential(elsewhere.requests(), "the listing")


def test_a_remote_playlist_redirected_to_another_origin_gets_no_credentials(mount, srv, tmp_path, elsewhere):
    srv.add("p.bin", data_of(10 * KiB, 92))
    playlist = f"#EXTM3U\n#EXTINF:1,Entry\n{srv.url('p.bin')}\n".encode()
    srv.add("list.m3u", playlist)
    elsewhere.add("list.m3u", playlist)
    srv.set_fault("list.m3u", "redirect", code=307, to=elsewhere.base)
    m = mount(srv.url("list.m3u"), extra=(*MOUNT_ARGS, *SECRET_HEADERS, *secret_config(tmp_path)))
    assert os.listdir(m.mountpoint) == ["Entry.bin"]
    assert read_whole(m.path("Entry.bin")) == srv.data("p.bin")
    assert_got_every_credential(first_host_requests(srv, "/list.m3u"), "the playlist")
    assert_got_no_credential(elsewhere.requests(), "the playlist")


# ---------------------------------------------------------------- the same origin gets everything

def test_a_redirect_within_the_origin_keeps_every_header(mount, srv, tmp_path):
    name = "here.bin"
    srv.add(name, data_of(50 * KiB, 93))
    srv.set_fault(name, "redirect", code=302)
    m = mount(srv.url(name), extra=(*MOUNT_ARGS, *SECRET_HEADERS, *secret_config(tmp_path)))
    assert read_whole(m.path(name)) == srv.data(name)
    followed = first_host_requests(srv, f"/_real/{name}")
    assert {r.method for r in followed} == {"GET"}   # the probe, a ranged GET, brings it all
    assert_got_every_credential(followed, "the redirect target")
    assert all(r.headers.get("X-Plain") == "plain" for r in followed)


@pytest.mark.parametrize("how", ["userinfo", "netrc"])
def test_url_and_netrc_credentials_follow_a_redirect_within_the_origin(mount, srv, tmp_path, monkeypatch, how):
    name = "here.bin"
    srv.add(name, data_of(50 * KiB, 94))
    srv.set_fault(name, "redirect", code=302)
    url, extra = srv.url(name), list(MOUNT_ARGS)
    if how == "userinfo":
        url = url.replace("http://", f"http://erin:{SECRET}@")
    else:
        home = tmp_path / "home"
        home.mkdir()
        (home / ".netrc").write_text(f"machine 127.0.0.1 login erin password {SECRET}\n")
        os.chmod(home / ".netrc", 0o600)
        monkeypatch.setenv("HOME", str(home))
        extra.append("--netrc")
    m = mount(url, extra=extra)
    assert read_whole(m.path(name)) == srv.data(name)
    followed = first_host_requests(srv, f"/_real/{name}")
    assert followed and all(r.headers.get("Authorization") == basic("erin", SECRET) for r in followed), \
        [(r.path, r.headers.get("Authorization")) for r in followed]


# ---------------------------------------------------------------- config sections

def test_a_host_port_section_matches_that_port_only_and_a_host_section_every_port(mount, srv, tmp_path):
    other = FaultServer().start()
    try:
        srv.add("a.bin", data_of(3000, 95))
        other.add("b.bin", data_of(4000, 96))
        config = tmp_path / "ports.conf"
        config.write_text(f"[127.0.0.1:{srv.port}]\nX-This-Port: a\n\n[127.0.0.1]\nX-Any-Port: any\n\n"
                          f"[localhost:{srv.port}]\nX-Other-Name: no\n\n[[::1]:{srv.port}]\nX-V6: no\n")
        m = mount(srv.url("a.bin"), other.url("b.bin"), extra=(*MOUNT_ARGS, "--config", config))
        assert read_whole(m.path("a.bin")) == srv.data("a.bin")
        assert read_whole(m.path("b.bin")) == other.data("b.bin")
        here, there = srv.wait_idle(WAIT), other.wait_idle(WAIT)
        assert here and there
        for r in here:
            assert r.headers.get("X-This-Port") == "a" and r.headers.get("X-Any-Port") == "any", r.headers
        for r in there:
            assert "X-This-Port" not in r.headers and r.headers.get("X-Any-Port") == "any", r.headers
        for r in here + there:
            assert "X-Other-Name" not in r.headers and "X-V6" not in r.headers, r.headers
    finally:
        other.stop()


@pytest.mark.parametrize("section,why", [
    ("[127.0.0.1:99999]", "port must be a number from 1 to 65535"),
    ("[127.0.0.1:]", "port must be a number"),
    ("[::1]", "IPv6 address in brackets"),
    ("[[::1]", "closing ']'"),
    ("[exa mple.org]", "not a host name"),
    ("[user@example.org]", "not a host name"),
])
def test_a_section_that_could_never_match_is_refused_naming_file_and_line(fuse, tmp_path, section, why):
    config = tmp_path / "bad.conf"
    config.write_text(f"# headers\n{section}\nX-A: 1\n")
    mp = tmp_path / "mnt"
    mp.mkdir()
    try:
        r = run(harness.MEDIAFS_BIN, "mount", "-f", "--cache-dir", tmp_path / "cache", "--config", config,
                "http://127.0.0.1:9/x.bin", mp, timeout=30)
    finally:
        if harness.is_mounted(mp):
            harness.fusermount_unmount(mp)
            pytest.fail(f"mounted with the section {section}")
    assert r.returncode != 0
    assert f"{config}:2" in r.stderr and why in r.stderr, r.stderr


# ---------------------------------------------------------------- redirects not followed

def test_a_redirect_loop_fails_the_file_after_ten_redirects(mount, srv):
    name = "loop.bin"
    srv.add(name, data_of(1000, 97))
    srv.set_fault(name, "redirect", code=302, location=srv.url(name))
    m = mount(srv.url(name), extra=(*MOUNT_ARGS, "--retries", "0"))
    with pytest.raises(OSError) as e:
        read_whole(m.path(name))
    assert e.value.errno == errno.EIO
    assert wait_for_stderr(m, "more than 10 redirects"), m.stderr()
    asked = [r for r in srv.wait_idle(WAIT) if r.path == f"/{name}"]
    # Every attempt is the request and ten redirects followed, no more.
    assert asked and len(asked) % 11 == 0, len(asked)


@pytest.mark.parametrize("target", ["ftp://127.0.0.1:9/x.bin", "file:///etc/passwd"])
def test_a_redirect_to_another_scheme_is_refused(mount, srv, target):
    name = "elsewhere.bin"
    srv.add(name, data_of(1000, 98))
    srv.set_fault(name, "redirect", code=302, location=target)
    m = mount(srv.url(name), extra=MOUNT_ARGS)
    with pytest.raises(OSError) as e:
        read_whole(m.path(name))
    assert e.value.errno == errno.EIO
    assert wait_for_stderr(m, "refused (only http and https)"), m.stderr()


# ---------------------------------------------------------------- signed URLs

def test_the_secrets_of_a_signed_url_are_sent_and_never_shown(mount, srv):
    name = "signed.bin"
    srv.add(name, data_of(20 * KiB, 99))
    query = (f"X-Amz-Credential=AKIA%2F{SECRET}&X-Amz-Signature={SECRET}&X-Amz-Security-Token={SECRET}"
             f"&token={SECRET}&part=7")
    url = srv.url(name) + "?" + query
    srv.set_fault(name, "redirect", code=302, location=srv.url(f"_real/{name}") + f"?Signature={SECRET}&p=2")
    m = mount(url, extra=(*MOUNT_ARGS, "-d"))
    assert read_whole(m.path(name)) == srv.data(name)
    recs = srv.wait_idle(WAIT)
    assert any(r.path == f"/{name}?{query}" for r in recs), [r.path for r in recs]
    assert any(r.path.startswith(f"/_real/{name}?Signature={SECRET}") for r in recs), [r.path for r in recs]
    shown = xget(m.path(name), "url")
    assert SECRET not in shown and shown.endswith("part=7") and "X-Amz-Signature=" in shown, shown
    for args in (("status", m.mountpoint), ("status", m.mountpoint, "--json")):
        r = mediafs(*args)
        assert r.returncode == 0 and SECRET not in r.stdout + r.stderr, r.stdout
    log = m.stderr()
    assert "on to " in log and "signed.bin" in log, log
    assert SECRET not in log, log
