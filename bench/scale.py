"""Scenario 8 (`--only scale`): many entries. N small files (10,000 and
100,000 by default) mounted as a list file and as nginx's autoindex listing,
the daemon under `ulimit -n 1024`: mount, cold and warm `ls -l` (every entry
checked for its size), RSS, reads checked, and `ls -l` after a remount on the
same cache; rclone on the listing beside it, and curl's HEAD of every entry
as the list file's floor. The scale files are also the sources scenario's
and bench/motoserve.py's.
"""
import os
import random
import shutil
import subprocess
import time

import rig

SCALE_NOFILE = 1024  # the daemon's descriptor limit (soft and hard) in the scale scenario
SCALE_READS = 300    # random files read and checked per scale mount


def run(b):
    b.parts["scale"] = ScaleBench(b)
    b.parts["scale"].run()


# -- the scale files
def scale_size(i):
    return 64 + (i * 37) % 2000


def scale_content(i):
    name = f"f{i:06d}.bin\n".encode()
    size = scale_size(i)
    return (name * (size // len(name) + 1))[:size]


def scale_data(n):
    """`n` small files of distinct sizes and contents in DATA/scale-N/ (kept between runs)."""
    d = os.path.join(rig.DATA, f"scale-{n}")
    done = d + ".done"
    if not os.path.exists(done):
        rig.log(f"generating {n} small files in {d}")
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d)
        for i in range(n):
            with open(os.path.join(d, f"f{i:06d}.bin"), "wb") as f:
                f.write(scale_content(i))
        open(done, "w").close()
    return d


def ls_l(path, n, expected_dir=True):
    """`ls -l` of `path`: seconds, and a check that every one of the `n` entries is there with its size."""
    t0 = time.perf_counter()
    done = subprocess.run(["ls", "-l", "--time-style=+%s", path], capture_output=True, text=True,
                          timeout=rig.MOUNT_DEADLINE)
    dt = time.perf_counter() - t0
    errors = done.stderr.splitlines()
    if done.returncode != 0:
        raise RuntimeError(f"ls -l {path} failed after {dt:.0f} s, {len(errors)} errors, first: "
                           + "; ".join(errors[:3]))
    out = done.stdout
    sizes = {}
    for line in out.splitlines()[1:]:
        fields = line.split(None, 6)
        if len(fields) == 7:
            sizes[fields[6]] = int(fields[4])
    wrong = [i for i in range(n) if sizes.get(f"f{i:06d}.bin") != scale_size(i)]
    if wrong or len(sizes) != n:
        first = f" (first: f{wrong[0]:06d}.bin)" if wrong else ""
        raise RuntimeError(f"ls -l {path}: {len(sizes)} entries of {n}, {len(wrong)} missing or with a "
                           f"wrong size{first}")
    return dt


def scale_reads(path, n):
    rng = random.Random(n)
    for i in rng.sample(range(n), min(SCALE_READS, n)):
        with open(os.path.join(path, f"f{i:06d}.bin"), "rb") as f:
            if f.read() != scale_content(i):
                raise RuntimeError(f"{path}/f{i:06d}.bin: wrong bytes")


class ScaleBench:
    def __init__(self, b):
        self.b = b
        self.figures = {}  # "scale_<kind>_<n>" -> {tool: figures}

    def run(self):
        for n in self.b.scale_entries:
            d = scale_data(n)
            for kind in ("list", "listing"):
                key = f"scale_{kind}_{n}"
                self.b.guarded(key, "mediafs",
                               lambda n=n, d=d, kind=kind, key=key: self.scale_mediafs(n, d, kind, key))
                if kind == "listing" and "rclone" in self.b.tools:
                    self.b.guarded(key, "rclone", lambda n=n, d=d, key=key: self.scale_rclone(n, d, key))
            self.b.guarded(f"scale_list_{n}", "curl", lambda n=n, d=d: self.scale_heads(n, d))

    def scale_heads(self, n, d):
        """The floor under a cold `ls -l` of entries whose sizes nothing gives (a list file; an
        HTML index other than nginx's, which writes each file's length): curl's own multi
        interface sending a HEAD for every entry, 6 at a time on reused connections (as many as
        mediafs's background probes), with nothing else running."""
        name = os.path.basename(d)
        cfg = os.path.join(rig.WORK, f"heads-{n}.cfg")
        with open(cfg, "w") as f:
            for i in range(n):
                f.write(f'url = "http://127.0.0.1:{self.b.nginx.port}/{name}/f{i:06d}.bin"\n'
                        'output = "/dev/null"\n')
        m = self.b.nginx.mark()
        t0 = time.perf_counter()
        subprocess.run(["curl", "-sf", "--no-progress-meter", "-I", "--parallel", "--parallel-max", "6", "-K", cfg],
                       check=True, timeout=rig.MOUNT_DEADLINE, capture_output=True)
        dt = time.perf_counter() - t0
        heads = len(self.b.nginx.since(m))
        os.unlink(cfg)
        if heads != n:
            raise RuntimeError(f"curl --parallel sent {heads} HEADs for {n} entries")
        self.b.put(f"scale_list_{n}_mount_ls_s", "curl", dt)
        self.b.ceilings[f"scale_heads_{n}_s"] = dt

    def scale_mediafs(self, n, d, kind, key):
        name = os.path.basename(d)
        cache = self.b.fresh_dir(f"cache-{key}")
        mp = self.b.mountpoint("mediafs")
        if kind == "list":
            source = os.path.join(rig.WORK, f"{key}.list")
            with open(source, "w") as f:
                for i in range(n):
                    f.write(f"f{i:06d}.bin\thttp://127.0.0.1:{self.b.nginx.port}/{name}/f{i:06d}.bin\n")
        else:
            source = f"http://127.0.0.1:{self.b.nginx.port}/{name}/"
        # A list file's entries are the root's names; so are one index's.
        listed = mp
        argv = [self.b.binary, "mount", "-f", "--cache-dir", cache, "--timeout", "30", source, mp]
        fig = {}

        def requests(since):
            entries = self.b.nginx.since(since)
            return len(entries), entries

        m = self.b.nginx.mark()
        with rig.Mount("mediafs", argv, mp, f"mediafs-{key}.log", self.b, nofile=SCALE_NOFILE,
                       exit_wait=300) as mnt:
            fig["mount_s"] = mnt.mount_s
            fig["mount_requests"], _ = requests(m)
            fig["rss_mounted_kib"] = rig.memory_kib(mnt.proc.pid).get("VmRSS")
            m = self.b.nginx.mark()
            fig["ls_cold_s"] = ls_l(listed, n)
            fig["ls_cold_requests"], entries = requests(m)
            self.b.record_server(key + "_cold_ls", "mediafs", entries)
            mem = rig.memory_kib(mnt.proc.pid)
            fig["rss_kib"], fig["hwm_kib"] = mem.get("VmRSS"), mem.get("VmHWM")
            fig["ls_warm_s"] = ls_l(listed, n)
            scale_reads(listed, n)
            fig["reads_right"] = min(SCALE_READS, n)
            fig["descriptors"] = len(os.listdir(f"/proc/{mnt.proc.pid}/fd"))
        fig["unmount_s"] = mnt.unmount_s
        # Right after the unmount: everything must come from the cache's metadata.
        m = self.b.nginx.mark()
        with rig.Mount("mediafs", argv, mp, f"mediafs-{key}-remount.log", self.b, nofile=SCALE_NOFILE,
                       exit_wait=300) as mnt:
            fig["remount_s"] = mnt.mount_s
            fig["ls_remount_s"] = ls_l(listed, n)
            fig["ls_remount_requests"], entries = requests(m)
            self.b.record_server(key + "_remount_ls", "mediafs", entries)
            fig["rss_remount_kib"] = rig.memory_kib(mnt.proc.pid).get("VmRSS")
        log_text = open(os.path.join(rig.WORK, f"mediafs-{key}.log"), errors="replace").read()
        if "Too many open files" in log_text or "without caching" in log_text:
            self.b.notes.append(f"{key}: the daemon log mentions running out of descriptors or caching")
        self.figures.setdefault(key, {})["mediafs"] = fig
        self.b.put(f"{key}_rss_mib", "mediafs", fig["rss_kib"] / 1024 if fig["rss_kib"] else None)
        self.b.put(f"{key}_mount_ls_s", "mediafs", fig["mount_s"] + fig["ls_cold_s"])
        self.b.put(f"{key}_remount_requests", "mediafs", fig["ls_remount_requests"])
        shutil.rmtree(cache, ignore_errors=True)

    def scale_rclone(self, n, d, key):
        name = os.path.basename(d)
        cache = self.b.fresh_dir(f"cache-{key}-rclone")
        mp = self.b.mountpoint("rclone")
        argv = ["rclone", "mount", ":http:", mp, "--http-url", f"http://127.0.0.1:{self.b.nginx.port}/{name}/",
                "--vfs-cache-mode", "full", "--cache-dir", cache, "--read-only"]
        fig = {}
        for phase in ("", "_remount"):
            m = self.b.nginx.mark()
            with rig.Mount("rclone", argv, mp, f"rclone-{key}{phase}.log", self.b, exit_wait=60) as mnt:
                if not phase:
                    fig["mount_s"] = mnt.mount_s
                fig[f"ls{phase or '_cold'}_s"] = ls_l(mp, n)
                count = len(self.b.nginx.since(m))
                fig[f"ls{phase or '_cold'}_requests"] = count
                mem = rig.memory_kib(mnt.proc.pid)
                if not phase:
                    fig["rss_kib"], fig["hwm_kib"] = mem.get("VmRSS"), mem.get("VmHWM")
                    scale_reads(mp, n)
                    fig["reads_right"] = min(SCALE_READS, n)
        self.figures.setdefault(key, {})["rclone"] = fig
        self.b.put(f"{key}_rss_mib", "rclone", fig["rss_kib"] / 1024 if fig["rss_kib"] else None)
        self.b.put(f"{key}_mount_ls_s", "rclone", fig["mount_s"] + fig["ls_cold_s"])
        self.b.put(f"{key}_remount_requests", "rclone", fig["ls_remount_requests"])
        shutil.rmtree(cache, ignore_errors=True)

    def report(self):
        if not self.figures:
            return
        cols = [("mount s", "mount_s", "{:.2f}"), ("mount req", "mount_requests", "{}"),
                ("ls -l cold s", "ls_cold_s", "{:.2f}"), ("cold req", "ls_cold_requests", "{}"),
                ("RSS MiB", "rss_kib", "mib"), ("HWM MiB", "hwm_kib", "mib"),
                ("RSS mounted MiB", "rss_mounted_kib", "mib"), ("ls -l warm s", "ls_warm_s", "{:.2f}"),
                ("unmount s", "unmount_s", "{:.2f}"), ("ls -l remount s", "ls_remount_s", "{:.2f}"),
                ("remount req", "ls_remount_requests", "{}"), ("reads right", "reads_right", "{}"),
                ("fds", "descriptors", "{}")]
        headers = ["scale", "tool"] + [c[0] for c in cols]
        table = []
        for key, tools in self.figures.items():
            for tool, fig in tools.items():
                cells = [key, tool]
                for _, k, fmt in cols:
                    x = fig.get(k)
                    cells.append("-" if x is None else f"{x / 1024:.1f}" if fmt == "mib" else fmt.format(x))
                table.append(cells)
        widths = [max(len(str(r[i])) for r in table + [headers]) for i in range(len(headers))]
        line = lambda cells: " | ".join(str(c).ljust(w) for c, w in zip(cells, widths))  # noqa: E731
        print()
        print(f"scale (daemon under ulimit -n {SCALE_NOFILE} for mediafs; RSS = VmRSS after the cold ls -l; "
              f"remount = mounted again right after the unmount, same cache):")
        print(line(headers))
        print("-+-".join("-" * w for w in widths))
        for cells in table:
            print(line(cells))
        for key, tools in self.figures.items():
            mf, rc = tools.get("mediafs"), tools.get("rclone")
            if mf and mf.get("rss_kib") and mf.get("rss_mounted_kib"):
                n = int(key.rsplit("_", 1)[1])
                print(f"  {key}: {mf['rss_kib'] * 1024 / n:.0f} B of RSS per entry after ls -l, "
                      f"{mf['rss_mounted_kib'] * 1024 / n:.0f} B mounted")
            if mf and rc:
                a, b = mf["mount_s"] + mf["ls_cold_s"], rc["mount_s"] + rc["ls_cold_s"]
                print(f"  {key}: mount + cold ls -l, mediafs/rclone = {a:.2f}/{b:.2f} s = {a / b:.2f}×")
