"""`--metrics ADDR:PORT`: the daemon's Prometheus text at GET /metrics.

The output is parsed with prometheus_client's own exposition parser. The
network bytes counter is held to the server's count of body bytes sent;
counters only grow; histogram buckets are cumulative. A bad or busy
address fails the mount command before anything is mounted, and the
responder is gone once the mount is.
"""

import os
import socket
import subprocess
import urllib.error
import urllib.request

from prometheus_client.parser import text_string_to_metric_families

import harness
from harness import data_of, free_port, mount_one, read_whole

MiB = 1024 * 1024


def scrape(port):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        assert response.status == 200
        assert response.headers["Content-Type"].startswith("text/plain; version=0.0.4")
        return response.read().decode()


def samples(text):
    """{(sample name, labels as a sorted tuple): value}, and the families by name."""
    families = {f.name: f for f in text_string_to_metric_families(text)}
    values = {}
    for family in families.values():
        for s in family.samples:
            values[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return values, families


def value(values, name, **labels):
    return values[(name, tuple(sorted(labels.items())))]


def test_network_bytes_match_what_the_server_sent_after_a_cold_read(mount, srv):
    port = free_port()
    data = data_of(6 * MiB + 12_345, 1)
    srv.add("a.bin", data)
    path = mount(srv.url("a.bin"), extra=["-o", f"metrics=127.0.0.1:{port}"]).path("a.bin")
    # Before the lookup: its probe brings the first bytes.
    before, _ = samples(scrape(port))
    assert read_whole(path) == data
    srv.wait_idle(30)
    after, families = samples(scrape(port))
    sent = srv.bytes_sent()
    received = (value(after, "mediafs_network_received_bytes_total")
                - value(before, "mediafs_network_received_bytes_total"))
    assert sent >= len(data)
    assert abs(received - sent) <= 0.01 * sent, f"mediafs counted {received} bytes, the server sent {sent}"
    assert value(after, "mediafs_http_responses_total", **{"class": "2xx"}) >= len(harness.gets(srv))
    assert value(after, "mediafs_cache_used_bytes") == len(data)
    assert value(after, "mediafs_cache_entries") == 1
    assert value(after, "mediafs_cache_limit_bytes") > 0
    assert value(after, "mediafs_probe_duration_seconds_count") >= 1
    assert value(after, "mediafs_read_wait_seconds_count") >= 1
    for name, kind in [("mediafs_network_received_bytes", "counter"), ("mediafs_http_responses", "counter"),
                       ("mediafs_transfers_in_flight", "gauge"), ("mediafs_read_wait_seconds", "histogram"),
                       ("mediafs_evictions", "counter"), ("mediafs_retries", "counter"),
                       ("mediafs_passthrough_opens", "counter"), ("mediafs_cache_read_bytes", "counter")]:
        assert families[name].type == kind, name
        assert families[name].documentation, f"{name} has no HELP"


def test_counters_only_grow_and_histogram_buckets_are_cumulative(mount, srv):
    port = free_port()
    data = data_of(3 * MiB, 2)
    srv.add("gone.bin", b"x" * 1000)
    m, path = mount_one(mount, srv, "a.bin", data, extra=["--metrics", f"127.0.0.1:{port}"])
    first, _ = samples(scrape(port))
    assert read_whole(path) == data
    with open(path, "rb") as f:  # cached bytes, read again from the daemon or the kernel
        f.seek(MiB)
        assert f.read(4096) == data[MiB:MiB + 4096]
    srv.remove("gone.bin")
    second, families = samples(scrape(port))
    for (name, labels), v in first.items():
        if families[name_family(name, families)].type in ("counter", "histogram"):
            assert second[(name, labels)] >= v, f"{name}{dict(labels)} went from {v} to {second[(name, labels)]}"
    for family in families.values():
        if family.type != "histogram":
            continue
        buckets = [(float(s.labels["le"]), s.value) for s in family.samples if s.name.endswith("_bucket")]
        assert buckets == sorted(buckets, key=lambda b: b[0]), f"{family.name}: buckets out of order"
        counts = [c for _, c in buckets]
        assert counts == sorted(counts), f"{family.name}: buckets not cumulative: {counts}"
        assert buckets[-1][0] == float("inf")
        count = next(s.value for s in family.samples if s.name.endswith("_count"))
        assert buckets[-1][1] == count
    assert value(second, "mediafs_read_wait_seconds_count") > value(first, "mediafs_read_wait_seconds_count")


def name_family(sample_name, families):
    for suffix in ("_bucket", "_count", "_sum", "_total", ""):
        base = sample_name[: -len(suffix)] if suffix and sample_name.endswith(suffix) else sample_name
        if base in families:
            return base
    raise KeyError(sample_name)


def test_a_missing_file_and_a_retried_failure_show_as_4xx_5xx_and_retries(mount, srv):
    port = free_port()
    data = data_of(2 * MiB, 3)
    m, path = mount_one(mount, srv, "a.bin", data, extra=["--metrics", f"127.0.0.1:{port}"])
    srv.add("b.bin", data)
    srv.set_fault("a.bin", "status", status=503, times=1)
    assert read_whole(path) == data  # the first GET fails, the read retries
    values, _ = samples(scrape(port))
    assert value(values, "mediafs_http_responses_total", **{"class": "5xx"}) >= 1
    assert value(values, "mediafs_retries_total") >= 1


def test_unmount_stops_the_responder_and_the_daemon_exits_cleanly(mount, srv):
    port = free_port()
    m, path = mount_one(mount, srv, "a.bin", data_of(100_000, 4), extra=["--metrics", f"127.0.0.1:{port}"])
    scrape(port)
    idle = socket.create_connection(("127.0.0.1", port), timeout=5)  # a client that never sends its request
    try:
        assert m.unmount() == 0
    finally:
        idle.close()
    try:
        urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5)
        raise AssertionError("the responder still answers after unmount")
    except urllib.error.URLError as e:
        assert isinstance(e.reason, ConnectionRefusedError), e


def test_other_paths_get_404(mount, srv):
    port = free_port()
    mount_one(mount, srv, "a.bin", data_of(1000, 5), extra=["--metrics", f"127.0.0.1:{port}"])
    try:
        urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics/more", timeout=5)
        raise AssertionError("/metrics/more answered 200")
    except urllib.error.HTTPError as e:
        assert e.code == 404


def run_mount(mediafs_bin, args, mountpoint, tmp_path):
    """`mediafs mount -f ARGS MOUNTPOINT`; if it wrongly mounts, unmount and stop it."""
    proc = subprocess.Popen([str(mediafs_bin), "mount", "-f", "--cache-dir", str(tmp_path / "cache"),
                             *args, str(mountpoint)],
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        output, _ = proc.communicate(timeout=20)
        return proc.returncode, output.decode(errors="replace")
    except subprocess.TimeoutExpired:
        harness.fusermount_unmount(mountpoint)
        harness.stop_popen(proc, timeout=0)
        return None, "still running"


def test_a_bad_metrics_address_fails_before_mounting(fuse, mediafs_bin, srv, tmp_path):
    srv.add("a.bin", b"x" * 1000)
    mountpoint = tmp_path / "mnt"
    mountpoint.mkdir()
    for bad in ["127.0.0.1", "127.0.0.1:0", "127.0.0.1:70000", "300.1.1.1:9100", "example.com:9100", "[::1:9100"]:
        code, output = run_mount(mediafs_bin, ["--metrics", bad, srv.url("a.bin")], mountpoint, tmp_path)
        assert code not in (None, 0), f"--metrics {bad} was accepted:\n{output}"
        assert "--metrics" in output and bad in output, output
        assert not harness.is_mounted(mountpoint)


def test_a_metrics_port_in_use_fails_before_mounting_naming_it(fuse, mediafs_bin, srv, tmp_path):
    srv.add("a.bin", b"x" * 1000)
    mountpoint = tmp_path / "mnt"
    mountpoint.mkdir()
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        code, output = run_mount(mediafs_bin, ["-o", f"metrics=127.0.0.1:{port}", srv.url("a.bin")],
                                 mountpoint, tmp_path)
    assert code not in (None, 0), output
    assert f"127.0.0.1:{port}" in output and "in use" in output, output
    assert not harness.is_mounted(mountpoint)
    assert not os.listdir(mountpoint)
