"""HLS and DASH video on demand as one file, against real media: ffmpeg
cuts a synthetic clip into MPEG-TS segments, fMP4 segments, one byte-range
file, a master playlist with two variants and an audio rendition, AES-128
segments, and DASH MPDs (SegmentTemplate by number over a timeline, by time,
by a fixed duration); an nginx of this
module's own serves them and logs every request. Through the mount the file
is the concatenated segments to the byte, ffprobe and a full decode agree
with ffmpeg reading the playlist URL itself, a read mid-file asks only for
the segments it covers, and a remount stats with no request."""

import hashlib
import json
import os
import shutil
import subprocess
import threading
from pathlib import Path

import pytest

import harness
from conftest import Nginx, _video_codec, made_once
from harness import index_html, read_range, read_whole, run, xset

MOUNT_ARGS = ("--timeout", "10")
SECONDS = 40
SEGMENT_SECONDS = 2


def ffmpeg(*args):
    subprocess.run(["ffmpeg", "-hide_banner", "-loglevel", "error", "-y", *map(str, args)], check=True, timeout=300)


def clip_inputs():
    return ["-f", "lavfi", "-i", f"testsrc=duration={SECONDS}:size=320x240:rate=25",
            "-f", "lavfi", "-i", f"sine=frequency=440:duration={SECONDS}"]


def hls_args(*extra):
    return ["-f", "hls", "-hls_time", SEGMENT_SECONDS, "-hls_playlist_type", "vod", *extra]


@pytest.fixture(scope="module")
def fixtures(tmp_path_factory):
    """ts/, fmp4/, single/ and master/ playlists with their segments: encoded
    once for all workers (conftest.made_once), copied for this worker's
    server, since tests add playlists of their own beside them."""
    if shutil.which("ffmpeg") is None:
        pytest.fail("ffmpeg not found: run scripts/install-deps.sh")
    root = tmp_path_factory.mktemp("hls") / "media"
    shutil.copytree(made_once("hls-media", make_media), root)
    return root


def make_media(root):
    video = [*_video_codec(), "-g", 25]
    for name in ("ts", "fmp4", "single", "master", "aes", "aesseq", "dash"):
        (root / name).mkdir()
    ffmpeg(*clip_inputs(), "-c:v", *video, "-c:a", "aac",
           *hls_args("-hls_segment_filename", root / "ts/seg%03d.ts"), root / "ts/index.m3u8")
    ffmpeg(*clip_inputs(), "-c:v", *video, "-c:a", "aac",
           *hls_args("-hls_segment_type", "fmp4", "-hls_segment_filename", root / "fmp4/seg%03d.m4s"),
           root / "fmp4/index.m3u8")
    ffmpeg(*clip_inputs(), "-c:v", *video, "-c:a", "aac", *hls_args("-hls_flags", "single_file"),
           root / "single/index.m3u8")
    ffmpeg(*clip_inputs(), "-map", "0:v", "-map", "0:v", "-map", "1:a", "-c:v", *video,
           "-b:v:0", "800k", "-s:v:0", "320x240", "-b:v:1", "200k", "-s:v:1", "160x120", "-c:a", "aac",
           "-var_stream_map", "v:0,agroup:aud v:1,agroup:aud a:0,agroup:aud,language:en",
           "-master_pl_name", "master.m3u8",
           *hls_args("-hls_segment_filename", root / "master/s%v_%03d.ts"), root / "master/stream_%v.m3u8")
    # AES-128 by ffmpeg (IV in the tag), the key served beside the segments.
    (root / "aes/key.bin").write_bytes(os.urandom(16))
    (root / "aes/keyinfo").write_text(f"key.bin\n{root / 'aes/key.bin'}\n")
    ffmpeg(*clip_inputs(), "-c:v", *video, "-c:a", "aac",
           *hls_args("-hls_key_info_file", root / "aes/keyinfo", "-hls_segment_filename", root / "aes/seg%03d.ts"),
           root / "aes/index.m3u8")
    # AES-128 without IV attributes: each segment's IV is its media sequence
    # number, from 7 on; encrypted here, from the clear TS segments.
    write_sequence_encrypted(root / "ts/index.m3u8", root / "aesseq", first_sequence=7)
    dash = root / "dash"
    ffmpeg(*clip_inputs(), "-c:v", *video, "-c:a", "aac", "-f", "dash", "-seg_duration", SEGMENT_SECONDS,
           "-adaptation_sets", "id=0,streams=v id=1,streams=a", dash / "number.mpd")
    ffmpeg(*clip_inputs()[:4], "-c:v", *video, "-f", "dash", "-seg_duration", SEGMENT_SECONDS,
           "-init_seg_name", "t-init-$RepresentationID$.m4s", "-media_seg_name", "t-$RepresentationID$-$Time$.m4s",
           dash / "time.mpd")
    ffmpeg(*clip_inputs()[:4], "-c:v", *video, "-f", "dash", "-seg_duration", SEGMENT_SECONDS, "-use_timeline", 0,
           "-init_seg_name", "d-init-$RepresentationID$.m4s", "-media_seg_name", "d-$RepresentationID$-$Number%05d$.m4s",
           dash / "duration.mpd")


def write_sequence_encrypted(clear_playlist, out, first_sequence):
    key = os.urandom(16)
    (out / "k").write_bytes(key)
    lines = ["#EXTM3U", "#EXT-X-TARGETDURATION:2", f"#EXT-X-MEDIA-SEQUENCE:{first_sequence}",
             "#EXT-X-PLAYLIST-TYPE:VOD", '#EXT-X-KEY:METHOD=AES-128,URI="k"']
    for n, name in enumerate(segment_names(clear_playlist)):
        iv = (first_sequence + n).to_bytes(16, "big")
        (out / name).write_bytes(aes_cbc(key, iv, (clear_playlist.parent / name).read_bytes(), encrypt=True))
        lines += ["#EXTINF:2,", name]
    (out / "index.m3u8").write_text("\n".join([*lines, "#EXT-X-ENDLIST", ""]))


def aes_cbc(key, iv, data, *, encrypt):
    """AES-128-CBC with PKCS#7 by Python's cryptography, else openssl(1)."""
    try:
        from cryptography.hazmat.primitives import padding
        from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
    except ImportError:
        out = subprocess.run(["openssl", "enc", "-aes-128-cbc", "-e" if encrypt else "-d", "-K", key.hex(),
                              "-iv", iv.hex()], input=data, capture_output=True, check=True)
        return out.stdout
    cipher = Cipher(algorithms.AES(key), modes.CBC(iv))
    if encrypt:
        padder = padding.PKCS7(128).padder()
        worker = cipher.encryptor()
        return worker.update(padder.update(data) + padder.finalize()) + worker.finalize()
    worker = cipher.decryptor()
    unpadder = padding.PKCS7(128).unpadder()
    return unpadder.update(worker.update(data) + worker.finalize()) + unpadder.finalize()


@pytest.fixture(scope="module")
def media_server(tmp_path_factory, fixtures):
    # Directories listed, as a library's are: a VOD found in one is its file.
    yield from Nginx.serving(tmp_path_factory.mktemp("hls-nginx"), fixtures, autoindex=True)


@pytest.fixture
def hls(media_server):
    """The module's nginx, running, with an empty log."""
    return media_server.ready()


def playlist_parts(playlist: Path):
    """The bytes of a media playlist's parts (init segment, then segments,
    byte ranges honoured), in order: what the file must equal."""
    parts = []
    byte_range = None
    for line in playlist.read_text().splitlines():
        if line.startswith("#EXT-X-MAP:"):
            uri = line.split('URI="', 1)[1].split('"', 1)[0]
            parts.append((playlist.parent / uri).read_bytes())
        elif line.startswith("#EXT-X-BYTERANGE:"):
            length, offset = line.split(":", 1)[1].split("@")
            byte_range = (int(offset), int(length))
        elif line and not line.startswith("#"):
            data = (playlist.parent / line).read_bytes()
            if byte_range:
                data = data[byte_range[0]:byte_range[0] + byte_range[1]]
            parts.append(data)
            byte_range = None
    return parts


def decrypted_parts(playlist: Path):
    """The plain bytes of an AES-128 media playlist's segments, in order,
    decrypted here: key from the tag's URI, IV from the tag or the media
    sequence number."""
    parts, key, iv, sequence = [], None, None, 0
    for line in playlist.read_text().splitlines():
        if line.startswith("#EXT-X-MEDIA-SEQUENCE:"):
            sequence = int(line.split(":", 1)[1])
        elif line.startswith("#EXT-X-KEY:"):
            key = (playlist.parent / line.split('URI="', 1)[1].split('"', 1)[0]).read_bytes()
            iv = bytes.fromhex(line.split("IV=0x", 1)[1][:32]) if "IV=0x" in line else None
        elif line and not line.startswith("#"):
            parts.append(aes_cbc(key, iv or sequence.to_bytes(16, "big"), (playlist.parent / line).read_bytes(),
                                 encrypt=False))
            sequence += 1
    return parts


def segment_requests(server):
    """Requests other than for playlists."""
    return [e for e in server.log() if not e.uri.endswith(".m3u8")]


def ffprobe(path_or_url):
    out = run("ffprobe", "-v", "error", "-show_entries", "format=duration:stream=codec_type,codec_name,width,height",
              "-of", "json", path_or_url, timeout=120)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def framemd5(path_or_url, *options, duration=None, position="input"):
    """The decoded frames' checksums (stream, size, hash per frame: the
    timestamps' columns are left out, as an HLS demuxer and a file demuxer
    may number them from different origins). `options` go before the input
    (a seek) or, with position="output", after it (a -map)."""
    limit = ["-t", str(duration)] if duration else []
    before, after = (options, ()) if position == "input" else ((), options)
    out = run("ffmpeg", "-hide_banner", "-loglevel", "error", *before, "-i", path_or_url, *after, *limit,
              "-f", "framemd5", "-", timeout=300)
    assert out.returncode == 0, out.stderr
    rows = [line.split(",") for line in out.stdout.splitlines() if line and not line.startswith("#")]
    return [(r[0].strip(), r[4].strip(), r[5].strip()) for r in rows]


CASES = {"ts": "index.ts", "fmp4": "index.mp4", "single": "index.ts"}


@pytest.mark.parametrize("kind", sorted(CASES))
def test_a_vod_playlist_is_one_file_equal_to_its_segments_in_order(mount, hls, fixtures, kind):
    playlist = fixtures / kind / "index.m3u8"
    expected = b"".join(playlist_parts(playlist))
    m = mount(hls.url(f"{kind}/index.m3u8"), extra=MOUNT_ARGS)
    assert os.listdir(m.mountpoint) == [CASES[kind]], m.stderr()
    assert os.stat(m.path(CASES[kind])).st_size == len(expected)
    probes = segment_requests(hls)
    if kind == "single":
        assert probes == [], "a byte-range playlist needs no request per segment for its size"
    else:
        assert {e.uri for e in probes} == {f"/{kind}/{Path(p).name}" for p in segment_names(playlist)}
        assert len(probes) <= len(segment_names(playlist)), f"one request per part at most: {probes}"
        assert all(e.sent <= 1 for e in probes), "length probes carry no body"
    data = read_whole(m.path(CASES[kind]))
    assert hashlib.sha256(data).hexdigest() == hashlib.sha256(expected).hexdigest()
    assert all(e.range.startswith("bytes=") for e in segment_requests(hls) if e.method == "GET" and e.sent > 1)


def test_a_stat_by_name_alone_asks_only_for_the_lengths(mount, hls, fixtures):
    """The bench's stat: a lookup with no listing before it. Its loader is
    made from the name and URL alone; it fetched the file's first 512 KiB
    beside the lengths (a GET more than one per part)."""
    playlist = fixtures / "ts" / "index.m3u8"
    m = mount(hls.url("ts/index.m3u8"), extra=MOUNT_ARGS)
    assert os.stat(m.path("index.ts")).st_size == len(b"".join(playlist_parts(playlist)))
    m.unmount()
    hls.wait_quiet(quiet=0.5)
    probes = segment_requests(hls)
    assert len(probes) <= len(segment_names(playlist)), f"one request per part at most: {probes}"
    assert all(e.sent <= 1 for e in probes), f"a stat fetches none of the file's bytes: {probes}"


def segment_names(playlist):
    names = []
    for line in playlist.read_text().splitlines():
        if line.startswith("#EXT-X-MAP:"):
            names.append(line.split('URI="', 1)[1].split('"', 1)[0])
        elif line and not line.startswith("#"):
            names.append(line)
    return names


@pytest.mark.parametrize("kind", ["ts", "fmp4"])
def test_ffprobes_lookup_sizes_the_vod_with_the_heads_it_reads_next(mount, hls, fixtures, kind):
    """Decision 0062: ffprobe's lookup of a cold VOD learns each segment's
    length from a ranged GET of its head, not a HEAD, where the probe reads
    that head next: every fMP4 segment (the MP4 demuxer reads each moof)
    and a TS file's first. The walk over the moofs then asks nothing more
    of them: each head is asked for once, by the request that sized it."""
    playlist = fixtures / kind / "index.m3u8"
    names = [Path(p).name for p in segment_names(playlist)]
    m = mount(hls.url(f"{kind}/index.m3u8"), extra=MOUNT_ARGS)
    probed = ffprobe(str(m.path(CASES[kind])))
    assert abs(float(probed["format"]["duration"]) - SECONDS) < 0.5, probed
    hls.wait_quiet(quiet=0.3)
    requests = segment_requests(hls)
    by_name = {name: [e for e in requests if e.uri == f"/{kind}/{name}"] for name in names}
    with_head = names if kind == "fmp4" else names[:1]
    for name in with_head:
        first = by_name[name][0]
        assert (first.method, first.range) == ("GET", "bytes=0-36863"), (name, by_name[name])
        assert not any(e.method == "HEAD" for e in by_name[name]), (name, by_name[name])
    for name in names[len(with_head):]:
        assert [e.method for e in by_name[name]][:1] == ["HEAD"], (name, by_name[name])
    for name in with_head:
        again = [e for e in by_name[name][1:] if e.span()[0] < 36864]
        assert again == [], f"{name}'s head asked twice: {by_name[name]}"
    # What the probe left of the heads is served to the reads that follow.
    expected = b"".join(playlist_parts(playlist))
    assert hashlib.sha256(read_whole(m.path(CASES[kind]))).hexdigest() == hashlib.sha256(expected).hexdigest()


@pytest.mark.parametrize("kind", ["ts", "fmp4"])
def test_ffprobe_and_a_full_decode_through_the_mount_agree_with_ffmpeg_on_the_playlist(mount, hls, kind):
    m = mount(hls.url(f"{kind}/index.m3u8"), extra=MOUNT_ARGS)
    path = str(m.path(CASES[kind]))
    probed = ffprobe(path)
    assert abs(float(probed["format"]["duration"]) - SECONDS) < 0.5, probed
    assert sorted(s["codec_type"] for s in probed["streams"]) == ["audio", "video"], probed
    video = next(s for s in probed["streams"] if s["codec_type"] == "video")
    assert (video["width"], video["height"]) == (320, 240)
    through_mount = framemd5(path)
    direct = framemd5(hls.url(f"{kind}/index.m3u8"))
    assert len(through_mount) >= SECONDS * 25
    assert through_mount == direct


def test_a_seek_to_the_middle_decodes_and_asks_only_for_the_segments_it_covers(mount, hls, fixtures):
    playlist = fixtures / "ts/index.m3u8"
    parts = playlist_parts(playlist)
    names = segment_names(playlist)
    m = mount(hls.url("ts/index.m3u8"), extra=MOUNT_ARGS)
    path = m.path("index.ts")
    os.stat(path)
    hls.wait_quiet(quiet=0.3)
    hls.clear_log()
    # A read a little way into the segment at the middle: 64 KiB.
    middle = len(parts) // 2
    start = sum(len(p) for p in parts[:middle]) + 1000
    expected = b"".join(parts)[start:start + 65536]
    assert read_range(path, start, 65536) == expected
    gets = [e for e in hls.wait_log(lambda es: any(e.method == "GET" for e in es), "the read's GET")
            if e.method == "GET"]
    assert {e.method for e in hls.log()} == {"GET"}, "lengths were known: no probe"
    asked = [names.index(e.uri.rsplit("/", 1)[1]) for e in gets]
    # The loader's readahead may reach forward; back, only to the page the
    # read starts in (FADV_RANDOM: no kernel readahead).
    assert min(asked) >= middle - 1, asked
    assert all(e.range.startswith("bytes=") for e in gets), gets
    for e in gets:
        if names.index(e.uri.rsplit("/", 1)[1]) == middle - 1:
            first = int(e.range[len("bytes="):].split("-")[0])
            assert len(parts[middle - 1]) - first <= 4096, (e, "read back too far")
    # A decode from 20 s: frames come, and equal ffmpeg's own from the playlist.
    seeked = framemd5(str(path), "-ss", "20", duration=1)
    assert len([r for r in seeked if r[0] == "0"]) >= 20, seeked
    assert seeked == framemd5(hls.url("ts/index.m3u8"), "-ss", "20", duration=1)


def test_a_remount_stats_with_no_request_and_reads_from_the_cache_with_the_server_stopped(mount, hls, fixtures, tmp_path):
    expected = b"".join(playlist_parts(fixtures / "fmp4/index.m3u8"))
    cache = tmp_path / "shared-cache"
    first = mount(hls.url("fmp4/index.m3u8"), extra=MOUNT_ARGS, cache_dir=cache)
    assert read_whole(first.path("index.mp4")) == expected
    first.unmount()
    hls.wait_quiet(quiet=0.3)
    hls.clear_log()
    second = mount(hls.url("fmp4/index.m3u8"), extra=(*MOUNT_ARGS, "--revalidate", "never"), cache_dir=cache)
    assert os.stat(second.path("index.mp4")).st_size == len(expected)
    # The playlist is read from its saved copy, and again in the background.
    harness.wait_until(lambda: hls.log(), "the playlist read again in the background")
    assert [e.uri for e in hls.log()] == ["/fmp4/index.m3u8"], "the stat asked for nothing: only the playlist, again"
    hls.stop()
    assert read_whole(second.path("index.mp4")) == expected
    assert read_range(second.path("index.mp4"), len(expected) // 2, 4096) == expected[len(expected) // 2:][:4096]


def test_a_master_playlist_is_its_highest_variant_with_its_audio_rendition_beside_it(mount, hls, fixtures):
    m = mount(hls.url("master/master.m3u8"), extra=MOUNT_ARGS)
    names = sorted(os.listdir(m.mountpoint))
    assert names == ["master.audio-en.ts", "master.ts"], (names, m.stderr())
    video = ffprobe(str(m.path("master.ts")))
    assert [(s["width"], s["height"]) for s in video["streams"] if s["codec_type"] == "video"] == [(320, 240)]
    assert read_whole(m.path("master.ts")) == b"".join(playlist_parts(fixtures / "master/stream_0.m3u8"))
    audio = ffprobe(str(m.path("master.audio-en.ts")))
    assert [s["codec_type"] for s in audio["streams"]] == ["audio"]
    assert read_whole(m.path("master.audio-en.ts")) == b"".join(playlist_parts(fixtures / "master/stream_2.m3u8"))


def test_hls_variant_lowest_and_a_height_choose_another_variant(mount, hls, fixtures):
    for choice, size, playlist in (("lowest", (160, 120), "stream_1"), ("240", (320, 240), "stream_0"),
                                   ("200", (160, 120), "stream_1")):
        m = mount(hls.url("master/master.m3u8"), extra=(*MOUNT_ARGS, "--hls-variant", choice))
        video = ffprobe(str(m.path("master.ts")))
        assert [(s["width"], s["height"]) for s in video["streams"] if s["codec_type"] == "video"] == [size], choice
        assert os.stat(m.path("master.ts")).st_size == sum(map(len, playlist_parts(fixtures / f"master/{playlist}.m3u8")))
        m.unmount()


def test_a_list_file_line_naming_a_playlist_is_its_vod(mount, hls, fixtures, tmp_path):
    listing = tmp_path / "list.txt"
    listing.write_text(f"Talk\t{hls.url('single/index.m3u8')}\n")
    m = mount(listing, extra=MOUNT_ARGS)
    assert os.listdir(m.mountpoint) == ["Talk.ts"]
    assert read_whole(m.path("Talk.ts")) == (fixtures / "single/index.ts").read_bytes()


def refused(tmp_path, *sources, extra=()):
    mp = tmp_path / "refused-mnt"
    mp.mkdir(exist_ok=True)
    try:
        r = run(harness.MEDIAFS_BIN, "mount", "-f", "--cache-dir", tmp_path / "refused-cache", *MOUNT_ARGS, *extra,
                *sources, mp, timeout=30)
    finally:
        if harness.is_mounted(mp):
            harness.fusermount_unmount(mp)
            pytest.fail(f"{sources} were mounted, not refused")
    return r.returncode, r.stdout + r.stderr


@pytest.mark.parametrize("text,words", [
    ("#EXTM3U\n#EXT-X-TARGETDURATION:2\n#EXTINF:2,\n/ts/seg000.ts\n", ["live", "hostile.m3u8"]),
    ("#EXTM3U\n#EXTINF:2,\n#EXT-X-BYTERANGE:99999999999999999999999@0\n/single/index.ts\n#EXT-X-ENDLIST\n",
     ["hostile.m3u8:3", "byte range"]),
    ("#EXTM3U\n#EXTINF:2,\n#EXT-X-BYTERANGE:-10@0\n/single/index.ts\n#EXT-X-ENDLIST\n", ["hostile.m3u8:3"]),
    ("#EXTM3U\n#EXTINF:2,\n#EXT-X-BYTERANGE:4611686018427387903@4611686018427387903\n/single/index.ts\n"
     "#EXT-X-ENDLIST\n", ["hostile.m3u8:3"]),
    ("#EXTM3U\n#EXT-X-KEY:METHOD=SAMPLE-AES,URI=\"k\",KEYFORMAT=\"com.apple.streamingkeydelivery\"\n"
     "#EXTINF:2,\n/ts/seg000.ts\n#EXT-X-ENDLIST\n", ["SAMPLE-AES", "com.apple.streamingkeydelivery"]),
])
def test_a_live_or_hostile_playlist_is_refused_with_a_message_naming_it(hls, fixtures, tmp_path, text, words):
    (fixtures / "hostile.m3u8").write_text(text)
    status, out = refused(tmp_path, hls.url("hostile.m3u8"))
    assert status == 1, (status, out)
    for word in words:
        assert word in out, out


def test_a_byte_range_past_the_served_file_fails_that_read_with_eio_and_the_mount_lives_on(mount, hls, fixtures):
    size = (fixtures / "single/index.ts").stat().st_size
    (fixtures / "past.m3u8").write_text(
        "#EXTM3U\n#EXT-X-PLAYLIST-TYPE:VOD\n#EXTINF:2,\n#EXT-X-BYTERANGE:1000@0\n/single/index.ts\n"
        f"#EXTINF:2,\n#EXT-X-BYTERANGE:5000000@{size - 1000}\n/single/index.ts\n")
    m = mount(hls.url("past.m3u8"), hls.url("single/index.m3u8"), extra=("--timeout", "5", "--retries", "0"))
    names = sorted(os.listdir(m.mountpoint))
    assert names == ["index.ts", "past.ts"], names
    assert os.stat(m.path("past.ts")).st_size == 5_001_000
    with pytest.raises(OSError) as raised:
        read_range(m.path("past.ts"), 2000, 65536)
    assert raised.value.errno == 5
    assert read_whole(m.path("index.ts")) == (fixtures / "single/index.ts").read_bytes()
    assert m.proc.poll() is None


@pytest.mark.parametrize("kind", ["aes", "aesseq"])
def test_an_aes128_vod_is_its_decrypted_segments_read_from_anywhere(mount, hls, fixtures, kind):
    playlist = fixtures / kind / "index.m3u8"
    parts = decrypted_parts(playlist)
    expected = b"".join(parts)
    key = next((fixtures / kind).glob("k*")).read_bytes() if kind == "aesseq" else (fixtures / "aes/key.bin").read_bytes()
    m = mount(hls.url(f"{kind}/index.m3u8"), extra=MOUNT_ARGS)
    path = m.path("index.ts")
    assert os.stat(path).st_size == len(expected)
    # The stat: per segment a HEAD and one 32-byte GET of its last two
    # cipher blocks (besides the lookup's first bytes, as for any file).
    names = segment_names(playlist)
    tails = [e for e in segment_requests(hls) if e.method == "GET" and e.sent == 32]
    assert sorted(e.uri for e in tails) == sorted(f"/{kind}/{n}" for n in names), tails
    for e in tails:
        size = (playlist.parent / e.uri.rsplit("/", 1)[1]).stat().st_size
        assert e.range == f"bytes={size - 32}-{size - 1}", e
    hls.clear_log()
    # Cold reads mid-segment and mid-block first, then across a boundary.
    middle = sum(len(p) for p in parts[:len(parts) // 2]) + 1001
    boundary = sum(len(p) for p in parts[:3]) - 5000
    assert read_range(path, middle, 9999) == expected[middle:middle + 9999]
    assert read_range(path, boundary, 10000) == expected[boundary:boundary + 10000]
    assert read_whole(path) == expected
    assert framemd5(str(path), duration=4) == framemd5(hls.url(f"{kind}/index.m3u8"), duration=4)
    # The key is in no file of the cache and no log line, raw or in hex.
    for file in m.cache_dir.rglob("*"):
        if file.is_file():
            data = file.read_bytes()
            assert key not in data and key.hex().encode() not in data, file
    assert key.hex() not in m.stderr()


def test_a_key_on_another_origin_is_refused_before_it_is_fetched(hls, fixtures, tmp_path):
    other = hls.url("aes/key.bin").replace("127.0.0.1", "localhost")
    text = (fixtures / "aes/index.m3u8").read_text().replace('URI="key.bin"', f'URI="{other}"')
    (fixtures / "aes/elsewhere.m3u8").write_text(text)
    status, out = refused(tmp_path, hls.url("aes/elsewhere.m3u8"))
    assert status == 1, out
    assert "origin" in out, out
    logged = hls.wait_log(lambda es: es, "the playlist's request")
    assert [e.uri for e in logged] == ["/aes/elsewhere.m3u8"], "the key was not asked for"


# ---------------------------------------------------------------- DASH

def dash_files(root, init, pattern):
    """An MPD's init segment then its media segments, by segment order
    (number, or time, as the template names them)."""
    segments = sorted(root.glob(pattern), key=lambda p: int(p.stem.rsplit("-", 1)[1]))
    return [(root / init).read_bytes(), *(p.read_bytes() for p in segments)]


@pytest.mark.parametrize("mpd,init,pattern", [
    ("number", "init-stream0.m4s", "chunk-stream0-*.m4s"),
    ("time", "t-init-0.m4s", "t-0-*.m4s"),
    ("duration", "d-init-0.m4s", "d-0-*.m4s"),
])
def test_a_static_mpd_is_its_video_representation_as_one_fragmented_mp4(mount, hls, fixtures, tmp_path, mpd, init,
                                                                         pattern):
    expected = b"".join(dash_files(fixtures / "dash", init, pattern))
    m = mount(hls.url(f"dash/{mpd}.mpd"), extra=MOUNT_ARGS)
    names = sorted(os.listdir(m.mountpoint))
    assert names == ([f"{mpd}.audio-1.mp4", f"{mpd}.mp4"] if mpd == "number" else [f"{mpd}.mp4"]), (names, m.stderr())
    path = m.path(f"{mpd}.mp4")
    assert os.stat(path).st_size == len(expected)
    middle = len(expected) // 2 + 777
    assert read_range(path, middle, 30000) == expected[middle:middle + 30000]
    assert read_whole(path) == expected
    probed = ffprobe(str(path))
    assert abs(float(probed["format"]["duration"]) - SECONDS) < 0.5, probed
    if mpd == "time":
        # ffmpeg's own DASH client (5.x/6.x) starts a $Time$ template one
        # segment late and asks for one past the end (seen in nginx's log):
        # compare with the segments concatenated on local disk instead.
        local = tmp_path / "time.mp4"
        local.write_bytes(expected)
        reference = framemd5(str(local))
    else:
        reference = framemd5(hls.url(f"dash/{mpd}.mpd"), "-map", "0:v", position="output")
    assert framemd5(str(path)) == reference
    assert len(reference) == SECONDS * 25
    if mpd == "number":
        audio = b"".join(dash_files(fixtures / "dash", "init-stream1.m4s", "chunk-stream1-*.m4s"))
        assert read_whole(m.path("number.audio-1.mp4")) == audio
        assert framemd5(str(m.path("number.audio-1.mp4"))) == framemd5(hls.url("dash/number.mpd"), "-map", "0:a",
                                                                     position="output")


def test_a_dynamic_mpd_is_refused_as_live(hls, fixtures, tmp_path):
    text = (fixtures / "dash/number.mpd").read_text().replace('type="static"', 'type="dynamic"')
    (fixtures / "dash/live.mpd").write_text(text)
    status, out = refused(tmp_path, hls.url("dash/live.mpd"))
    assert status == 1, out
    assert "live" in out and "live.mpd" in out, out


def served_vod(srv, sizes, prefix="", name="vod", seed=100):
    """A VOD of MPEG-TS segments of `sizes` bytes (made-up bytes: mediafs
    never parses a segment) on the test's FaultServer, as
    `{prefix}{name}.m3u8` and its `{prefix}{name}-seg{i}.ts`; returns the
    file's bytes and its parts' offsets."""
    lines = ["#EXTM3U", "#EXT-X-VERSION:3", "#EXT-X-TARGETDURATION:2", "#EXT-X-PLAYLIST-TYPE:VOD"]
    parts, offsets = [], [0]
    for i, size in enumerate(sizes):
        data = harness.data_of(size, seed=seed + i)
        srv.add(f"{prefix}{name}-seg{i}.ts", data, content_type="video/mp2t")
        parts.append(data)
        offsets.append(offsets[-1] + size)
        lines += ["#EXTINF:2.0,", f"{name}-seg{i}.ts"]
    lines.append("#EXT-X-ENDLIST")
    srv.add(f"{prefix}{name}.m3u8", ("\n".join(lines) + "\n").encode(), content_type="application/vnd.apple.mpegurl")
    return b"".join(parts), offsets


def test_a_read_across_a_segment_boundary_asks_for_both_segments_at_once(mount, srv):
    """Each part is its own request: a read that ends in the next segment
    does not wait for the first segment's bytes before asking for the
    next's (one round trip, not one per segment). The server holds the
    first segment's answer: the second's request must come all the same."""
    data, offsets = served_vod(srv, [300_000, 300_000, 300_000])
    m = mount(srv.url("vod.m3u8"), extra=MOUNT_ARGS)
    path = m.path("vod.ts")
    assert os.stat(path).st_size == len(data)
    srv.set_fault("vod-seg0.ts", "hold")
    srv.clear_log()
    start = offsets[1] - 20_000
    result = {}
    reader = threading.Thread(target=lambda: result.update(got=read_range(path, start, 40_000)))
    reader.start()
    try:
        srv.wait_for(lambda _: srv.held("vod-seg0.ts") >= 1, timeout=10)
        asked = srv.wait_for(lambda reqs: [r for r in reqs if r.method == "GET" and r.name == "vod-seg1.ts"],
                             timeout=10)
        assert asked, "seg1's request waited for seg0's held answer"
    finally:
        srv.release("vod-seg0.ts")
        reader.join(30)
    assert result.get("got") == data[start:start + 40_000]


def test_a_walk_from_segment_start_to_segment_start_fetches_the_next_heads_ahead(mount, srv):
    """A reader that jumps from inside one segment to the start of the next
    walks the segments (the MP4 demuxer indexing a fragmented MP4): the
    heads of the following segments are asked for before it reads them,
    each about the size of its read, never a segment whole."""
    sizes = [400_000] * 8
    data, offsets = served_vod(srv, sizes)
    m = mount(srv.url("vod.m3u8"), extra=MOUNT_ARGS)
    path = m.path("vod.ts")
    assert os.stat(path).st_size == len(data)
    srv.clear_log()
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)
        assert os.pread(fd, 32768, 0) == data[:32768]
        assert os.pread(fd, 32768, offsets[1]) == data[offsets[1]:offsets[1] + 32768]
        ahead = srv.wait_for(lambda reqs: {r.name for r in reqs if r.method == "GET"} >= {"vod-seg2.ts", "vod-seg7.ts"},
                             timeout=10)
        assert ahead, f"no head fetched ahead of the walk: {[(r.name, r.range) for r in srv.requests]}"
    finally:
        os.close(fd)
    srv.wait_idle()
    for r in srv.requests:
        if r.method == "GET" and r.name not in ("vod-seg0.ts", "vod-seg1.ts"):
            first, last = (int(x) for x in r.range[len("bytes="):].split("-"))
            # A head, or the end of the page that holds the next one's start.
            head = first == 0 and last < 200_000
            page = last == sizes[0] - 1 and last - first < 4096
            assert head or page, f"a head, not a segment: {r.name} {r.range}"
    # What was fetched ahead is what the walk's next reads get.
    assert read_range(path, offsets[2], 32768) == data[offsets[2]:offsets[2] + 32768]


def test_a_vod_found_in_a_directory_listing_is_its_file_and_a_refresh_brings_its_new_version(mount, srv):
    """A listed directory's HLS playlist is its VOD's one file, beside the
    listing's other files; an M3U of files and a live playlist stay the
    plain files the listing shows. A refresh that finds the playlist
    changed serves the new version whole, never a byte of the old one."""
    data, _ = served_vod(srv, [200_000, 150_000, 100_000], prefix="media/", name="talk")
    notes = harness.data_of(5_000, seed=7)
    srv.add("media/notes.bin", notes)
    srv.add("media/songs.m3u", b"#EXTM3U\n#EXTINF:3,One\nnotes.bin\n")
    live = b"#EXTM3U\n#EXT-X-TARGETDURATION:2\n#EXTINF:2,\ntalk-seg0.ts\n"
    srv.add("media/live.m3u8", live)
    listed = ["live.m3u8", "notes.bin", "songs.m3u", "talk-seg0.ts", "talk-seg1.ts", "talk-seg2.ts", "talk.m3u8"]
    srv.add("media/", index_html(listed).encode(), content_type="text/html")
    m = mount(srv.url("media/"), extra=MOUNT_ARGS)
    names = sorted(os.listdir(m.mountpoint))
    assert names == sorted(["talk.ts", *[n for n in listed if n != "talk.m3u8"]]), m.stderr()
    assert os.stat(m.path("talk.ts")).st_size == len(data)
    assert read_whole(m.path("talk.ts")) == data
    assert read_whole(m.path("notes.bin")) == notes
    assert read_whole(m.path("live.m3u8")) == live
    assert "live HLS playlist" in m.stderr(), m.stderr()
    srv.wait_idle()
    asked = {r.name for r in srv.requests if r.method == "GET" and r.range}
    assert {"media/talk-seg0.ts", "media/talk-seg1.ts", "media/talk-seg2.ts"} <= asked, asked
    # The playlist changes: other segments, other lengths.
    new, _ = served_vod(srv, [120_000, 90_000], prefix="media/", name="talk", seed=300)
    srv.clear_log()
    xset(m.mountpoint, "refresh", "1")
    assert os.stat(m.path("talk.ts")).st_size == len(new)
    assert read_whole(m.path("talk.ts")) == new
    srv.wait_idle()
    assert all(r.name != "media/talk-seg2.ts" for r in srv.requests), "the old version's segment was asked for"


def test_vods_in_an_nginx_library_are_their_files_beside_its_segments(mount, hls, fixtures):
    """nginx's own autoindex of a library of VODs: each HLS playlist and
    DASH MPD in a listed directory is its VOD's file, ffprobe reads them
    through the mount, and the segments stay the plain files listed."""
    m = mount(hls.url(""), extra=MOUNT_ARGS)
    library = Path(m.mountpoint)
    ts = sorted(os.listdir(library / "ts"))
    assert "index.ts" in ts and "index.m3u8" not in ts and "seg000.ts" in ts, (ts, m.stderr())
    expected = b"".join(playlist_parts(fixtures / "ts" / "index.m3u8"))
    assert read_whole(library / "ts" / "index.ts") == expected
    dash = sorted(os.listdir(library / "dash"))
    assert {"number.mp4", "number.audio-1.mp4", "time.mp4", "duration.mp4"} <= set(dash), (dash, m.stderr())
    # (A refused MPD another test wrote here stays its plain file.)
    assert not {"number.mpd", "time.mpd", "duration.mpd"} & set(dash), dash
    for path in (library / "ts" / "index.ts", library / "dash" / "number.mp4"):
        probed = ffprobe(str(path))
        assert abs(float(probed["format"]["duration"]) - SECONDS) < 0.5, (path, probed)
    master = sorted(os.listdir(library / "master"))
    assert "master.ts" in master and "master.audio-en.ts" in master, (master, m.stderr())


# ------------------------------------------------------------ offline remounts

def tree(root):
    """{relative path: bytes} of every file under root, read through the mount."""
    files = {}
    for directory, _, names in os.walk(root):
        for name in names:
            path = Path(directory) / name
            files[str(path.relative_to(root))] = read_whole(path)
    return files


@pytest.mark.parametrize("playlist", ["ts/index.m3u8", "master/master.m3u8", "dash/number.mpd"])
def test_a_vod_remounts_with_its_server_gone_and_is_read_again_when_it_returns(mount, hls, fixtures, tmp_path,
                                                                             playlist):
    """A VOD read whole (a media playlist whose segment lengths took a probe
    each, a master with its audio rendition, a DASH MPD), unmounted, its
    server stopped: the remount has the same names, sizes and bytes from
    the cache and the saved playlists; the server back, the playlists are
    read again in the background and found unchanged."""
    cache = tmp_path / "shared-cache"
    first = mount(hls.url(playlist), extra=MOUNT_ARGS, cache_dir=cache)
    before = tree(first.mountpoint)
    assert len(before) >= (2 if "ts/" not in playlist else 1) and all(before.values()), before.keys()
    first.unmount()
    hls.stop()
    second = mount(hls.url(playlist), extra=(*MOUNT_ARGS, "--dir-cache-time", "1"), cache_dir=cache)
    assert sorted(os.listdir(second.mountpoint)) == sorted(before)
    for name, data in before.items():
        assert os.stat(second.path(name)).st_size == len(data), name
    assert tree(second.mountpoint) == before
    assert "from its saved copy" in second.stderr(), second.stderr()
    assert harness.wait_for_stderr(second, "server unreachable: serving the saved copy"), second.stderr()
    hls.start()
    assert harness.wait_for_stderr(second, "read again: unchanged", timeout=20), second.stderr()
    hls.wait_log(lambda es: any(playlist in e.uri for e in es), "the playlist read again")
    assert tree(second.mountpoint) == before


def test_an_encrypted_vod_remounted_offline_serves_what_is_cached_and_is_readable_again_once_its_key_comes(
        mount, hls, fixtures, tmp_path):
    """Keys are never saved: offline, the AES-128 VOD mounts from its saved
    playlist (its plain lengths, learned with the key, saved too) and says
    once that its key cannot be fetched; its reads fail with EIO, never
    with cipher text. Its server back, the background read fetches the key
    and the file reads as the decrypted segments."""
    expected = b"".join(decrypted_parts(fixtures / "aes/index.m3u8"))
    cache = tmp_path / "shared-cache"
    first = mount(hls.url("aes/index.m3u8"), extra=MOUNT_ARGS, cache_dir=cache)
    assert os.stat(first.path("index.ts")).st_size == len(expected)
    first.unmount()
    hls.stop()
    second = mount(hls.url("aes/index.m3u8"), extra=(*MOUNT_ARGS, "--dir-cache-time", "1", "--timeout", "2"),
                   cache_dir=cache)
    assert os.stat(second.path("index.ts")).st_size == len(expected)
    with pytest.raises(OSError) as failed:
        read_range(second.path("index.ts"), len(expected) - 4096, 4096)
    assert failed.value.errno == 5, failed.value
    assert second.stderr().count("its key cannot be fetched") == 1, second.stderr()
    hls.start()
    assert harness.wait_for_stderr(second, "read again: unchanged", timeout=20), second.stderr()
    assert read_range(second.path("index.ts"), len(expected) - 4096, 4096) == expected[-4096:], second.stderr()


def test_the_vods_a_listing_found_are_there_at_once_after_a_remount_with_the_server_gone(mount, hls, fixtures,
                                                                                       tmp_path):
    """A listed directory's VODs are saved with its listing: the remount
    with nginx stopped shows each VOD's file at once, every byte cached."""
    cache = tmp_path / "shared-cache"
    # One directory source: its entries at the mountpoint.
    first = mount(hls.url("ts/"), extra=MOUNT_ARGS, cache_dir=cache)
    listed = Path(first.mountpoint)
    assert "index.ts" in os.listdir(listed), first.stderr()
    data = read_whole(listed / "index.ts")
    names = sorted(os.listdir(listed))
    first.unmount()
    hls.stop()
    second = mount(hls.url("ts/"), extra=MOUNT_ARGS, cache_dir=cache)
    listed = Path(second.mountpoint)
    assert sorted(os.listdir(listed)) == names, second.stderr()
    assert os.stat(listed / "index.ts").st_size == len(data)
    assert read_whole(listed / "index.ts") == data
