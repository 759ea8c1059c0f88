"""`s3://bucket/prefix/` sources against a real S3 API: moto in server mode
behind s3proxy.CheckingProxy, which recomputes every request's SigV4
signature with botocore's signer and refuses mismatches, unknown keys,
wrong or expired tokens and wrong regions as S3 does. The proxy records
what it received, so the tests count list requests, HEADs and ranged GETs
from the server's side, not from what mediafs says about itself.
"""

import errno
import os
import urllib.parse
from concurrent.futures import ThreadPoolExecutor
import zlib

import pytest

from harness import data_of, mediafs, read_range, read_whole, wait_for_stderr, wait_until, xget, xset
from s3proxy import CheckingProxy, MotoServer, own_aws_environment

KEY_ID = "AKIDMEDIAFSTEST"
SECRET = "s3cr3t/with+odd=chars"
REGION = "us-east-1"
MANY = 1_005
TOP_SIZE = 3 * 1024 * 1024 + 17

NAMES = ["with space.bin", "hash#1.bin", "100%.bin", "café ☕.bin", "plus+amp&eq=.bin", "semi;colon.bin"]


def body(key, size=None):
    return data_of(size if size is not None else 1000 + len(key) * 37, zlib.crc32(key.encode()))


OBJECTS = {
    "top.bin": body("top.bin", TOP_SIZE),
    "shows/": b"",  # the folder marker some tools write
    "shows/a/ep1.bin": body("shows/a/ep1.bin", 300_001),
    "shows/a/ep2.bin": body("shows/a/ep2.bin"),
    "shows/b/sub/deep.bin": body("shows/b/sub/deep.bin"),
    "names/../up.bin": body("names/../up.bin"),
    **{f"names/{name}": body(name) for name in NAMES},
    **{f"many/f{i:04d}.bin": body(f"many/f{i:04d}.bin", 10 + i % 7) for i in range(MANY)},
}


@pytest.fixture(scope="module")
def s3():
    moto = MotoServer()
    proxy = CheckingProxy(moto.port, region=REGION)
    try:
        client = moto.client()
        client.create_bucket(Bucket="media")
        with ThreadPoolExecutor(8) as pool:
            list(pool.map(lambda item: client.put_object(Bucket="media", Key=item[0], Body=item[1]), OBJECTS.items()))
        client.create_bucket(Bucket="public-media")
        client.put_object(Bucket="public-media", Key="open.bin", Body=body("open.bin"), ACL="public-read")
        proxy.public.add("public-media")
        proxy.add_key(KEY_ID, SECRET)
        proxy.backend = client   # for a test that changes an object
        yield proxy
    finally:
        proxy.stop()
        moto.stop()


@pytest.fixture
def s3_mount(s3, mount, monkeypatch, tmp_path):
    """s3_mount(*sources, key=(id, secret) or None, extra=()) -> Mount, with
    the AWS variables of this process replaced by the test's own."""
    own_aws_environment(monkeypatch, tmp_path)

    def make(*sources, key=(KEY_ID, SECRET), extra=(), endpoint=True, cache_dir=None):
        if key:
            own_aws_environment(monkeypatch, tmp_path, key)
        s3.clear()
        return mount(*sources, extra=[*(["--s3-endpoint", s3.url] if endpoint else []), "--timeout", "10",
                                      *extra], cache_dir=cache_dir)
    return make


def listed_errno(path):
    with pytest.raises(OSError) as caught:
        os.listdir(path)
    return caught.value.errno


def test_nested_prefixes_are_directories_and_the_folder_marker_is_skipped(s3_mount):
    m = s3_mount("s3://media/shows/")
    assert sorted(os.listdir(m.mountpoint)) == ["a", "b"]
    assert sorted(os.listdir(m.path("a"))) == ["ep1.bin", "ep2.bin"]
    assert os.listdir(m.path("b/sub")) == ["deep.bin"]
    assert read_whole(m.path("b/sub/deep.bin")) == OBJECTS["shows/b/sub/deep.bin"]


def test_one_prefix_is_the_mount_root_and_keeps_an_added_name_through_its_refresh(s3, s3_mount):
    m = s3_mount("s3://media/shows/a/")
    assert sorted(os.listdir(m.mountpoint)) == ["ep1.bin", "ep2.bin"]
    assert "user.mediafs.refresh" in os.listxattr(m.mountpoint)
    os.setxattr(m.mountpoint, "user.mediafs.add", f"{s3.url}/public-media/open.bin".encode())
    xset(m.mountpoint, "refresh", "1")
    assert sorted(os.listdir(m.mountpoint)) == ["ep1.bin", "ep2.bin", "open.bin"]
    assert read_whole(m.path("open.bin")) == body("open.bin")
    with pytest.raises(OSError) as refused:
        os.setxattr(m.mountpoint, "user.mediafs.remove", b"ep1.bin")
    assert refused.value.errno == errno.EROFS
    os.setxattr(m.mountpoint, "user.mediafs.remove", b"open.bin")
    wait_until(lambda: sorted(os.listdir(m.mountpoint)) == ["ep1.bin", "ep2.bin"], "open.bin to go")


def test_ls_l_sends_list_requests_only_with_sizes_and_dates_from_the_listing(s3, s3_mount):
    m = s3_mount("s3://media/")
    root = m.mountpoint
    for name in os.listdir(root / "shows" / "a"):
        st = os.stat(root / "shows" / "a" / name)
        assert st.st_size == len(OBJECTS[f"shows/a/{name}"])
        assert st.st_mtime > 1_600_000_000
    assert os.stat(root / "top.bin").st_size == TOP_SIZE
    assert s3.requests(method="HEAD") == []
    assert s3.requests(list_only=False) == [], "only list requests before any read"
    lists = s3.requests(list_only=True)
    assert lists and all(r.signed and r.status == 200 and r.query["delimiter"] == "/" for r in lists)
    assert sorted(r.query.get("prefix", "") for r in lists) == ["", "shows/", "shows/a/"]


def test_a_remount_lists_from_the_saved_listing_when_the_server_refuses_it(s3, s3_mount, tmp_path):
    # Each directory's last listing is kept in the cache: after a remount
    # `ls -l` answers from it, here while every request the server sees is
    # refused (the remount's key is wrong), so no answer came from it.
    cache = tmp_path / "cache-s3-remount"
    m = s3_mount("s3://media/shows/", cache_dir=cache)
    first = {name: os.stat(m.path(f"a/{name}")).st_size for name in os.listdir(m.path("a"))}
    assert first and m.unmount() == 0
    m = s3_mount("s3://media/shows/", key=(KEY_ID, "not-the-secret"), cache_dir=cache)
    again = {name: os.stat(m.path(f"a/{name}")).st_size for name in os.listdir(m.path("a"))}
    assert again == first, m.stderr()
    assert all(r.status == 403 for r in s3.requests()), [(r.method, r.status) for r in s3.requests()]


def test_every_page_of_a_large_prefix_is_followed(s3, s3_mount):
    m = s3_mount("s3://media/many/")
    names = os.listdir(m.mountpoint)
    assert len(names) == MANY and len(set(names)) == MANY
    lists = s3.requests(list_only=True)
    assert len(lists) == -(-MANY // 1000) == 2
    assert "continuation-token" not in lists[0].query and lists[1].query["continuation-token"]
    assert os.stat(m.path("f1004.bin")).st_size == len(OBJECTS["many/f1004.bin"])
    assert s3.requests(method="HEAD") == []


def test_names_with_spaces_hash_percent_unicode_and_dots_read_byte_exact(s3, s3_mount):
    m = s3_mount("s3://media/names/")
    assert sorted(os.listdir(m.mountpoint)) == sorted([*NAMES, "_.."])
    for name in NAMES:
        assert read_whole(m.path(name)) == OBJECTS[f"names/{name}"], name
    assert read_whole(m.path("_../up.bin")) == OBJECTS["names/../up.bin"]
    paths = {urllib.parse.unquote(r.path) for r in s3.requests(list_only=False)}
    assert "/media/names/../up.bin" in paths, "the key sent as it is, not resolved as a path"
    assert all(r.status in (200, 206) for r in s3.requests())


def test_reads_are_signed_ranged_gets_and_byte_exact(s3, s3_mount):
    m = s3_mount("s3://media/", extra=["--no-passthrough"])
    data = OBJECTS["top.bin"]
    assert read_range(m.path("top.bin"), 1_000_003, 4096) == data[1_000_003:1_004_099]
    assert read_whole(m.path("top.bin")) == data
    reads = [r for r in s3.requests(list_only=False) if r.path == "/media/top.bin"]
    assert reads and all(r.method == "GET" and r.signed and r.range.startswith("bytes=") for r in reads)
    assert all(r.status == 206 for r in reads), [(r.range, r.status) for r in reads]
    # No secret in what the mount shows of itself.
    shown = mediafs("status", str(m.mountpoint), "--json").stdout + m.stderr()
    for path in (m.mountpoint, m.path("top.bin")):
        shown += "".join(os.getxattr(path, name).decode(errors="replace") for name in os.listxattr(path))
    assert "mediafs" in shown and SECRET not in shown and KEY_ID not in shown


def test_a_refreshed_listing_with_another_etag_changes_the_file_with_no_open(s3, s3_mount):
    # The same size, most likely the same second: only the ETag (the
    # body's MD5) tells the versions apart.
    key = "changing/film.bin"
    old, new = data_of(1_000_000, 501), data_of(1_000_000, 502)
    s3.backend.put_object(Bucket="media", Key=key, Body=old)
    m = s3_mount("s3://media/changing/")
    path = m.path("film.bin")
    assert read_whole(path) == old
    assert xget(path, "complete") == "1", m.stderr()
    s3.backend.put_object(Bucket="media", Key=key, Body=new)
    s3.clear()
    xset(m.mountpoint, "refresh", "1")
    assert xget(path, "cached_bytes") == "0", m.stderr()
    assert s3.requests(list_only=False) == [], "changed by the listing alone, with no open"
    assert len(s3.requests(list_only=True)) == 1
    assert "its listing shows ETag" in m.stderr()
    assert read_whole(path) == new, "a mix of two versions, or the old one"
    assert all(r.path == "/media/changing/film.bin" and r.method == "GET" for r in s3.requests(list_only=False))


def test_a_wrong_key_is_eacces_naming_the_directory_and_the_credentials_sent(s3_mount):
    m = s3_mount("s3://media/shows/", key=("AKIDUNKNOWN", SECRET))
    assert listed_errno(m.mountpoint) == errno.EACCES
    assert wait_for_stderr(m, "s3://media/shows/: access denied listing the directory, signed with "
                              "AWS_ACCESS_KEY_ID from the environment")
    assert "InvalidAccessKeyId" in m.stderr()
    assert SECRET not in m.stderr()


def test_a_wrong_secret_fails_the_signature_check(s3_mount):
    m = s3_mount("s3://media/shows/", key=(KEY_ID, "not-the-secret"))
    assert listed_errno(m.mountpoint) == errno.EACCES
    assert wait_for_stderr(m, "SignatureDoesNotMatch")
    assert "not-the-secret" not in m.stderr()


def test_anonymous_lists_a_public_bucket_and_is_told_when_a_private_one_refuses(s3, s3_mount):
    m = s3_mount("s3://public-media/", "s3://media/shows/", key=None)
    # Two prefixes: a directory each in the root.
    assert sorted(os.listdir(m.mountpoint)) == ["public-media", "shows"]
    assert os.listdir(m.path("public-media")) == ["open.bin"]
    assert read_whole(m.path("public-media/open.bin")) == body("open.bin")
    assert not any(r.signed for r in s3.requests())
    assert listed_errno(m.path("shows")) == errno.EACCES
    assert wait_for_stderr(m, "no credentials were sent")


def test_a_wrong_region_names_the_region_the_server_gave(s3_mount):
    m = s3_mount("s3://media/shows/", extra=["--s3-region", "eu-west-3"])
    with pytest.raises(OSError):
        os.listdir(m.mountpoint)
    assert wait_for_stderr(m, f"bucket 'media' is in region '{REGION}', not 'eu-west-3': "
                              f"mount with --s3-region {REGION}")


def test_a_missing_bucket_says_so(s3_mount):
    m = s3_mount("s3://no-such-bucket/")
    # At the root, ENOENT would read as an empty directory.
    assert listed_errno(m.mountpoint) == errno.EIO
    with pytest.raises(OSError) as caught:
        os.stat(m.path("anything.bin"))
    assert caught.value.errno == errno.ENOENT
    assert wait_for_stderr(m, "no bucket 'no-such-bucket'")


def test_session_keys_from_a_profile_are_reread_when_the_file_changes(s3, s3_mount, monkeypatch, tmp_path):
    credentials = tmp_path / "credentials"
    config = tmp_path / "config"
    credentials.write_text(f"# rotated by a helper\n[work]\naws_access_key_id = AKIDSESSION\n"
                           f"aws_secret_access_key = {SECRET}\naws_session_token = token-one\n")
    config.write_text(f"[profile work]\nregion = {REGION}\ns3 =\n  endpoint_url = {s3.url}\n")
    s3.add_key("AKIDSESSION", SECRET, token="token-one")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(credentials))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(config))
    m = s3_mount("s3://media/shows/", key=None, endpoint=False, extra=["--s3-profile", "work"])
    assert sorted(os.listdir(m.mountpoint)) == ["a", "b"]
    assert all(r.signed for r in s3.requests())
    # The token expires; the helper writes the next one into the file.
    s3.expire("AKIDSESSION")
    s3.add_key("AKIDSESSION", SECRET, token="token-two")
    credentials.write_text(f"[work]\naws_access_key_id = AKIDSESSION\naws_secret_access_key = {SECRET}\n"
                           f"aws_session_token = token-two\n")
    s3.clear()
    assert read_whole(m.path("a/ep2.bin")) == OBJECTS["shows/a/ep2.bin"]
    xset(m.mountpoint, "refresh", "1")
    wait_until(lambda: s3.requests(list_only=True), "a refresh")
    wait_until(lambda: all(r.status for r in s3.requests(list_only=True)), "its answer")
    assert all(r.status in (200, 206) for r in s3.requests()), [(r.path, r.status) for r in s3.requests()]
    assert "token-one" not in m.stderr() and "token-two" not in m.stderr() and SECRET not in m.stderr()


def test_fstab_keys_set_the_endpoint_and_region(s3, s3_mount):
    m = s3_mount("s3://media/shows/a/", endpoint=False, extra=["-o", f"s3_endpoint={s3.url},s3_region={REGION}"])
    assert sorted(os.listdir(m.mountpoint)) == ["ep1.bin", "ep2.bin"]
    assert s3.requests(list_only=True)[0].query["prefix"] == "shows/a/"


def test_an_hls_playlist_in_a_bucket_is_its_vod_file_from_signed_requests(s3, s3_mount):
    """A VOD found in an S3 listing: its playlist, its segments' lengths and
    their bytes are all fetched with the mount's signature."""
    segments = [data_of(150_000, 601), data_of(90_000, 602)]
    playlist = ["#EXTM3U", "#EXT-X-TARGETDURATION:2", "#EXT-X-PLAYLIST-TYPE:VOD"]
    for i, data in enumerate(segments):
        s3.backend.put_object(Bucket="media", Key=f"lectures/talk-{i}.ts", Body=data)
        playlist += ["#EXTINF:2.0,", f"talk-{i}.ts"]
    s3.backend.put_object(Bucket="media", Key="lectures/talk.m3u8",
                          Body=("\n".join([*playlist, "#EXT-X-ENDLIST", ""])).encode())
    m = s3_mount("s3://media/lectures/")
    assert sorted(os.listdir(m.mountpoint)) == ["talk-0.ts", "talk-1.ts", "talk.ts"], m.stderr()
    assert os.stat(m.path("talk.ts")).st_size == sum(map(len, segments))
    assert read_whole(m.path("talk.ts")) == b"".join(segments)
    asked = s3.requests(list_only=False)
    assert {r.path for r in asked} >= {"/media/lectures/talk.m3u8", "/media/lectures/talk-0.ts",
                                       "/media/lectures/talk-1.ts"}, [(r.method, r.path) for r in asked]
    assert all(r.signed for r in asked), [(r.method, r.path) for r in asked if not r.signed]
    assert all(r.range.startswith("bytes=") for r in asked if r.method == "GET" and r.path.endswith(".ts"))


def test_an_archive_in_a_bucket_named_by_its_key_is_the_directory_of_its_members(s3, s3_mount):
    """`s3://bucket/dir/set.part1.rar`: the set's other volumes are found in
    the listing of its prefix (sizes and ETags from it: no HEAD), every
    volume read by signed ranged GETs, the members equal to what unar
    extracted from rarfile's own volumes."""
    from test_archives import SETS, expected_members, fixtures_dir, mounted_files
    fixtures = fixtures_dir()
    # A bucket of its own: the other tests list `media` whole.
    s3.backend.create_bucket(Bucket="archive-media")
    for name in SETS["rar5-vols"]:
        s3.backend.put_object(Bucket="archive-media", Key=f"archives/{name}", Body=(fixtures / "rar" / name).read_bytes())
    s3.backend.put_object(Bucket="archive-media", Key="archives/other.bin", Body=b"not a volume")
    m = s3_mount("s3://archive-media/archives/rar5-vols.part1.rar")
    expected = expected_members(fixtures, "rar5-vols")
    files = mounted_files(m.mountpoint)
    assert sorted(files) == sorted(expected), (sorted(files), m.stderr())
    for path, data in expected.items():
        assert read_whole(files[path]) == data, path
    asked = s3.requests(list_only=False)
    assert all(r.signed for r in asked) and not [r for r in asked if r.method == "HEAD"], \
        [(r.method, r.path) for r in asked]
    assert {r.path for r in asked} == {f"/archive-media/archives/{name}" for name in SETS["rar5-vols"]}, \
        [(r.method, r.path) for r in asked]
    assert all(r.range.startswith("bytes=") for r in asked), [(r.path, r.range) for r in asked]
