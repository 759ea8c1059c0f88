"""The bench's sources scenario (`--only sources`): WebDAV and S3 sources,
mediafs beside rclone's webdav and s3 backends on the same loopback servers,
with the floors both stand on measured in the same run.

- dav: a 10,000-file folder (the scale files) on Apache httpd + mod_dav:
  mount + cold `ls -l`, the requests Apache logged by method, RSS; then a
  remount with Apache stopped, answered from the saved listing.
- s3: a 100,000-object prefix on moto behind the signature-checking proxy
  of the tests (integration/s3proxy.py: every request's SigV4 recomputed
  with botocore's signer): mount + cold `ls -l`, list requests and any
  other, RSS; then a remount whose key the proxy refuses (every request
  answered 403), answered from the saved listing.
- s3 seq: a cold sequential read of a 128 MiB object through signed ranges,
  beside `curl --aws-sigv4` downloading it to a file on the cache's
  filesystem (download-and-store) through the same proxy; the bytes the
  proxy passed on ÷ the file.
Limits: one PROPFIND of the folder by curl; the 100 list pages by boto3
straight from moto, one after another as a continuation token demands.
Registered in bench/scenarios.py; uses bench/rig.py's mounts and the scale
scenario's files and ls -l check.
"""
import json
import os
import subprocess
import sys
import time

import rig
import scale

# integration/'s, on the path once rig is imported
from davservers import ApacheDav
from s3proxy import CheckingProxy, MotoServer, clean_env

DAV_ENTRIES = 10_000
S3_ENTRIES = 100_000
SEQ_BYTES = 128 * rig.MiB
KEY_ID, SECRET, REGION = "AKIDMEDIAFSBENCH", "bench/secret+key=", "us-east-1"
BUCKET = "bench"
MOTOSERVE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "motoserve.py")


def run(b):
    b.parts["sources"] = SourcesBench(b)
    b.parts["sources"].run()


def filled_moto(spec):
    """moto, filled by bench/motoserve.py from `spec` before it answers;
    stopped by its pid (and by itself when the bench's end of its stdin
    closes)."""
    path = os.path.join(rig.WORK, "moto-spec.json")
    with open(path, "w") as f:
        json.dump(spec, f)
    return MotoServer(filler=[sys.executable, MOTOSERVE, path], log=os.path.join(rig.WORK, "moto.log"))


class SourcesBench:
    def __init__(self, b):
        self.b = b
        self.fig = {}      # key -> {tool: value}
        self.limits = {}

    def put(self, key, tool, value):
        self.fig.setdefault(key, {})[tool] = value

    def run(self):
        self.b.guarded("sources_dav", "mediafs", self.dav)
        self.b.guarded("sources_s3", "mediafs", self.s3)

    # -- WebDAV
    def dav(self):
        n = DAV_ENTRIES
        served = scale.scale_data(n)
        server = ApacheDav(served)
        server.start()
        try:
            url = server.url("open")
            http = url.replace("dav://", "http://")
            t0 = time.perf_counter()
            subprocess.run(["curl", "-sf", "-o", "/dev/null", "-X", "PROPFIND", "-H", "Depth: 1", http],
                           check=True, timeout=300)
            self.limits["dav_propfind_s"] = time.perf_counter() - t0
            cache = self.b.fresh_dir("cache-dav-mediafs")
            mp = self.b.mountpoint("mediafs")
            argv = [self.b.binary, "mount", "-f", "--cache-dir", cache, "--timeout", "60", url, mp]
            server.log.clear()
            with rig.Mount("mediafs", argv, mp, "mediafs-dav.log", self.b, exit_wait=120) as mnt:
                ls_s = scale.ls_l(mp, n)
                self.put("dav_mount_ls_s", "mediafs", mnt.mount_s + ls_s)
                self.put("dav_rss_mib", "mediafs", rig.memory_kib(mnt.proc.pid).get("VmRSS", 0) / 1024)
                self.count_dav(server, "mediafs")
            if "rclone" in self.b.tools:
                self.b.guarded("sources_dav", "rclone", lambda: self.dav_rclone(server, url, n))
            # The remount, with the server gone: the saved listing answers.
            server.stop()
            with rig.Mount("mediafs", argv, mp, "mediafs-dav-remount.log", self.b, exit_wait=120) as mnt:
                self.put("dav_remount_ls_s", "mediafs", mnt.mount_s + scale.ls_l(mp, n))
            self.put("dav_remount_requests", "mediafs", 0)   # Apache was stopped: nothing could answer
        finally:
            server.remove()

    def count_dav(self, server, tool):
        methods = [e[0] for e in server.log.entries()]
        self.put("dav_propfinds", tool, methods.count("PROPFIND"))
        self.put("dav_other_requests", tool, len(methods) - methods.count("PROPFIND"))
        server.log.clear()

    def dav_rclone(self, server, url, n):
        cache = self.b.fresh_dir("cache-dav-rclone")
        mp = self.b.mountpoint("rclone")
        argv = ["rclone", "mount", ":webdav:", mp, "--webdav-url", url.replace("dav://", "http://"),
                "--webdav-vendor", "other", "--vfs-cache-mode", "full", "--cache-dir", cache, "--read-only"]
        with rig.Mount("rclone", argv, mp, "rclone-dav.log", self.b, exit_wait=60) as mnt:
            ls_s = scale.ls_l(mp, n)
            self.put("dav_mount_ls_s", "rclone", mnt.mount_s + ls_s)
            self.put("dav_rss_mib", "rclone", rig.memory_kib(mnt.proc.pid).get("VmRSS", 0) / 1024)
            self.count_dav(server, "rclone")

    # -- S3
    def s3(self):
        n = S3_ENTRIES
        big = os.path.join(rig.DATA, "random-128MiB.bin")
        if not (os.path.exists(big) and os.path.getsize(big) == SEQ_BYTES):
            with open(big + ".tmp", "wb") as f:
                f.write(os.urandom(SEQ_BYTES))
            os.rename(big + ".tmp", big)
        t0 = time.perf_counter()
        moto = filled_moto({"bucket": BUCKET, "many": {"prefix": "many/", "count": n}, "files": {"big/film.bin": big}})
        rig.log(f"moto filled with {n} objects in {time.perf_counter() - t0:.1f} s")
        proxy = CheckingProxy(moto.port, region=REGION)
        proxy.add_key(KEY_ID, SECRET)
        try:
            self.s3_floor(moto, n)
            self.s3_listing(proxy, n)
            if "rclone" in self.b.tools:
                self.b.guarded("sources_s3", "rclone", lambda: self.s3_rclone(proxy, n))
            self.s3_seq(proxy, big)
        finally:
            proxy.stop()
            moto.stop()

    def s3_env(self, secret=SECRET):
        return clean_env(AWS_ACCESS_KEY_ID=KEY_ID, AWS_SECRET_ACCESS_KEY=secret,
                         AWS_SHARED_CREDENTIALS_FILE="/nonexistent", AWS_CONFIG_FILE="/nonexistent")

    def s3_floor(self, moto, n):
        """The 100 pages one after another, by boto3, straight from moto."""
        import boto3
        from botocore.config import Config
        client = boto3.client("s3", endpoint_url=f"http://127.0.0.1:{moto.port}", region_name=REGION,
                              aws_access_key_id="x", aws_secret_access_key="x",
                              config=Config(proxies={}, s3={"addressing_style": "path"}))
        t0, token, count, pages = time.perf_counter(), None, 0, 0
        while True:
            kw = {"Bucket": BUCKET, "Prefix": "many/", "Delimiter": "/", **({"ContinuationToken": token} if token else {})}
            page = client.list_objects_v2(**kw)
            pages, count = pages + 1, count + len(page.get("Contents", []))
            token = page.get("NextContinuationToken")
            if not token:
                break
        if count != n:
            raise RuntimeError(f"boto3 listed {count} objects of {n}")
        self.limits["s3_list_pages"] = pages
        self.limits["s3_list_s"] = time.perf_counter() - t0

    def s3_listing(self, proxy, n):
        cache = self.b.fresh_dir("cache-s3-mediafs")
        mp = self.b.mountpoint("mediafs")
        argv = [self.b.binary, "mount", "-f", "--cache-dir", cache, "--timeout", "60", "--s3-endpoint", proxy.url,
                "--s3-region", REGION, f"s3://{BUCKET}/many/", mp]
        proxy.clear()
        with rig.Mount("mediafs", argv, mp, "mediafs-s3.log", self.b, exit_wait=300,
                       env=self.s3_env()) as mnt:
            ls_s = scale.ls_l(mp, n)
            self.put("s3_mount_ls_s", "mediafs", mnt.mount_s + ls_s)
            self.put("s3_rss_mib", "mediafs", rig.memory_kib(mnt.proc.pid).get("VmRSS", 0) / 1024)
            self.count_s3(proxy, "mediafs")
        # The remount with a key the proxy refuses: whatever it asks is
        # answered 403, so the listing comes from the cache alone.
        proxy.clear()
        with rig.Mount("mediafs", argv, mp, "mediafs-s3-remount.log", self.b, exit_wait=300,
                       env=self.s3_env(secret="not-the-secret")) as mnt:
            self.put("s3_remount_ls_s", "mediafs", mnt.mount_s + scale.ls_l(mp, n))
        self.put("s3_remount_requests", "mediafs", sum(r.status < 400 for r in proxy.requests()))

    def count_s3(self, proxy, tool):
        seen = proxy.requests()
        lists = [r for r in seen if "list-type" in r.query or r.query.get("delimiter") is not None]
        self.put("s3_list_requests", tool, len(lists))
        self.put("s3_other_requests", tool, len(seen) - len(lists))
        if any(r.status >= 400 for r in seen):
            self.b.notes.append(f"sources s3/{tool}: {sum(r.status >= 400 for r in seen)} requests refused")
        proxy.clear()

    def rclone_s3_argv(self, proxy, mp, cache, path):
        return ["rclone", "mount", f":s3:{BUCKET}/{path}", mp, "--s3-provider", "Other", "--s3-endpoint", proxy.url,
                "--s3-region", REGION, "--s3-force-path-style", "--s3-list-version", "2", "--s3-env-auth",
                # Without it rclone HEADs every object for its mtime metadata
                # (100,001 HEADs, over 500 s here): its best, as a user would set it.
                "--use-server-modtime",
                "--vfs-cache-mode", "full", "--cache-dir", cache, "--read-only"]

    def s3_rclone(self, proxy, n):
        cache = self.b.fresh_dir("cache-s3-rclone")
        mp = self.b.mountpoint("rclone")
        proxy.clear()
        with rig.Mount("rclone", self.rclone_s3_argv(proxy, mp, cache, "many"), mp, "rclone-s3.log", self.b,
                       exit_wait=60, env=self.s3_env()) as mnt:
            ls_s = scale.ls_l(mp, n)
            self.put("s3_mount_ls_s", "rclone", mnt.mount_s + ls_s)
            self.put("s3_rss_mib", "rclone", rig.memory_kib(mnt.proc.pid).get("VmRSS", 0) / 1024)
            self.count_s3(proxy, "rclone")

    def s3_seq(self, proxy, big):
        size = os.path.getsize(big)
        expected = open(big, "rb").read()
        url = f"{proxy.url}/{BUCKET}/big/film.bin"
        stored = os.path.join(self.b.fresh_dir("s3-store"), "film.bin")
        best = None
        for _ in range(2):   # best of two, as the plain-HTTP floor is taken
            subprocess.run(["sync"], check=True)
            proxy.clear()
            t0 = time.perf_counter()
            rig.run_waited(["curl", "-sf", "-o", stored, "--aws-sigv4", f"aws:amz:{REGION}:s3",
                            "--user", f"{KEY_ID}:{SECRET}", "-H", "x-amz-content-sha256: UNSIGNED-PAYLOAD", url],
                           timeout=600, env=clean_env())
            dt = time.perf_counter() - t0
            if os.path.getsize(stored) != size:
                raise RuntimeError("curl stored a short file: " + ", ".join(r.refused for r in proxy.requests()))
            best = dt if best is None else min(best, dt)
            os.unlink(stored)
        self.put("s3_seq_mbps", "curl", size / best / rig.MB)
        self.put("s3_seq_server_ratio", "curl", 1.0)
        for tool in ["mediafs"] + (["rclone"] if "rclone" in self.b.tools else []):
            self.b.guarded("sources_s3_seq", tool, lambda tool=tool: self.s3_seq_mount(proxy, tool, size, expected))

    def s3_seq_mount(self, proxy, tool, size, expected):
        cache = self.b.fresh_dir(f"cache-s3-seq-{tool}")
        mp = self.b.mountpoint(tool)
        if tool == "mediafs":
            argv = [self.b.binary, "mount", "-f", "--cache-dir", cache, "--timeout", "60", "--s3-endpoint",
                    proxy.url, "--s3-region", REGION, f"s3://{BUCKET}/big/", mp]
        else:
            argv = self.rclone_s3_argv(proxy, mp, cache, "big")
        # One prefix is the mount's root, for both.
        path = os.path.join(mp, "film.bin")
        rig.drop_caches()
        proxy.clear()
        with rig.Mount(tool, argv, mp, f"{tool}-s3-seq.log", self.b, exit_wait=60, env=self.s3_env()):
            t0 = time.perf_counter()
            with open(path, "rb") as f:
                got = f.read()
            dt = time.perf_counter() - t0
            if got != expected:
                raise RuntimeError(f"{tool}: {len(got)} bytes read, not the object's {size} bytes")
            time.sleep(0.5)
            sent = sum(r.sent for r in proxy.requests())
            gets = [r for r in proxy.requests() if r.method == "GET" and "list-type" not in r.query]
        self.put("s3_seq_mbps", tool, size / dt / rig.MB)
        self.put("s3_seq_server_ratio", tool, sent / size)
        self.put("s3_seq_gets", tool, len(gets))
        if tool == "mediafs":
            self.replay_ranges(proxy, [r.range for r in gets], size)

    def replay_ranges(self, proxy, ranges, size):
        """What the server costs for the ranges mediafs asked: moto reads
        the whole object for every range it answers, so the same GETs by
        curl, one at a time and four at a time, are the floor under a
        reader that splits a file into ranges."""
        url = f"{proxy.url}/{BUCKET}/big/film.bin"
        config = os.path.join(rig.WORK, "s3-ranges.cfg")
        with open(config, "w") as f:
            for r in ranges:
                f.write(f'url = "{url}"\noutput = "/dev/null"\nrange = "{r.removeprefix("bytes=")}"\n')
        for parallel in (1, 4):
            t0 = time.perf_counter()
            subprocess.run(["curl", "-sf", "--parallel", "--parallel-max", str(parallel), "--aws-sigv4",
                            f"aws:amz:{REGION}:s3", "--user", f"{KEY_ID}:{SECRET}",
                            "-H", "x-amz-content-sha256: UNSIGNED-PAYLOAD", "-K", config],
                           check=True, timeout=600, env=clean_env(), capture_output=True)
            self.limits[f"s3_ranges_{parallel}_s"] = time.perf_counter() - t0
        self.limits["s3_ranges"] = len(ranges)
        self.limits["s3_ranges_bytes"] = size

    # -- report
    def value(self, key, tool):
        return self.fig.get(key, {}).get(tool)

    def rows(self):
        v = self.value
        dav_rc, s3_rc, store = v("dav_mount_ls_s", "rclone"), v("s3_mount_ls_s", "rclone"), v("s3_seq_mbps", "curl")
        return [
            (f"WebDAV {DAV_ENTRIES}: mount + cold ls -l s", "dav_mount_ls_s", "{:.2f}", "≤ ½ rclone",
             lambda x: None if dav_rc is None else x <= dav_rc / 2),
            (f"WebDAV {DAV_ENTRIES}: PROPFINDs", "dav_propfinds", "{}", "1", lambda x: x == 1),
            (f"WebDAV {DAV_ENTRIES}: other requests (HEAD, GET)", "dav_other_requests", "{}", "0", lambda x: x == 0),
            (f"WebDAV {DAV_ENTRIES}: RSS MiB after ls -l", "dav_rss_mib", "{:.1f}", "(info)", None),
            (f"WebDAV {DAV_ENTRIES}: remount, Apache stopped: ls -l s", "dav_remount_ls_s", "{:.2f}",
             "answers (0 requests)", lambda x: x is not None),
            (f"S3 {S3_ENTRIES}: mount + cold ls -l s", "s3_mount_ls_s", "{:.2f}", "≤ rclone",
             lambda x: None if s3_rc is None else x <= s3_rc),
            (f"S3 {S3_ENTRIES}: list requests", "s3_list_requests", "{}", f"{-(-S3_ENTRIES // 1000)}",
             lambda x: x == -(-S3_ENTRIES // 1000)),
            (f"S3 {S3_ENTRIES}: other requests", "s3_other_requests", "{}", "0", lambda x: x == 0),
            (f"S3 {S3_ENTRIES}: RSS MiB after ls -l", "s3_rss_mib", "{:.1f}", "≤128", lambda x: x <= 128),
            (f"S3 {S3_ENTRIES}: remount, every request refused: ls -l s", "s3_remount_ls_s", "{:.2f}",
             "answers", lambda x: x is not None),
            (f"S3 {S3_ENTRIES}: remount: requests answered", "s3_remount_requests", "{}", "0", lambda x: x == 0),
            ("S3 cold seq 128 MiB, signed ranges MB/s", "s3_seq_mbps", "{:.1f}", "≥0.9× curl download-and-store",
             lambda x: None if store is None else x >= 0.9 * store),
            ("S3 cold seq: bytes from the server ÷ file", "s3_seq_server_ratio", "{:.3f}", "≤1.02",
             lambda x: x <= 1.02),
            ("S3 cold seq: GETs", "s3_seq_gets", "{}", "(info)", None),
        ]

    def report(self):
        if not self.fig:
            return
        tools = ["mediafs", "curl"] + (["rclone"] if "rclone" in self.b.tools else [])
        headers = ["sources"] + tools + ["goal (mediafs)", "result"]
        table = []
        for label, key, fmt, goal, check in self.rows():
            cells = [label]
            for tool in tools:
                x = self.value(key, tool)
                failed = self.b.failed_for("sources_dav" if key.startswith("dav") else
                                           "sources_s3_seq" if "seq" in key else "sources_s3", tool)
                cells.append("ERROR" if x is None and failed else "-" if x is None else fmt.format(x))
            m = self.value(key, "mediafs")
            verdict = "-" if check is None else "n/a" if m is None else {True: "PASS", False: "MISS",
                                                                         None: "n/a"}[check(m)]
            table.append(cells + [goal, verdict])
        widths = [max(len(r[i]) for r in table + [headers]) for i in range(len(headers))]
        line = lambda cells: " | ".join(c.ljust(w) for c, w in zip(cells, widths))  # noqa: E731
        print()
        print("sources (WebDAV: Apache mod_dav; S3: moto behind the SigV4-checking proxy; curl = download-and-store "
              "with --aws-sigv4 through the same proxy, best of two):")
        print(line(headers))
        print("-+-".join("-" * w for w in widths))
        for cells in table:
            print(line(cells))
        lim = self.limits
        if "dav_propfind_s" in lim:
            print(f"  limits: one PROPFIND of the {DAV_ENTRIES}-file folder by curl {lim['dav_propfind_s']:.2f} s")
        if "s3_list_s" in lim:
            print(f"  limits: the {lim['s3_list_pages']} list pages by boto3 straight from moto (no proxy), one after "
                  f"another: {lim['s3_list_s']:.2f} s; the proxy recomputes each signature on top")
        if "s3_ranges_1_s" in lim:
            mb = lim["s3_ranges_bytes"] / rig.MB
            print(f"  limits: the {lim['s3_ranges']} ranges mediafs asked for, by curl through the proxy: one at a "
                  f"time {lim['s3_ranges_1_s']:.2f} s ({mb / lim['s3_ranges_1_s']:.0f} MB/s), four at a time "
                  f"{lim['s3_ranges_4_s']:.2f} s ({mb / lim['s3_ranges_4_s']:.0f} MB/s): moto reads the whole "
                  f"object for each range")

    def json(self):
        return {"figures": self.fig, "limits": self.limits}
