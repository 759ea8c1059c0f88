"""The bench's SFTP scenario (`--only sftp`): issue 56's rows. A real OpenSSH
sshd on loopback (integration/sshserver.py: its own config, host key and
authorized key) behind bench/linkem.py at 100 ms / 50 Mbit/s; through the
same link, each cold (fresh mount, fresh cache, the page cache dropped):

- mediafs `sftp://` beside `sshfs` and `rclone mount :sftp: --vfs-cache-mode
  full`, on the WAN scenario's five media rows (ffprobe of the mp4 and the
  mkv, the first 3 s of the mp4, a seek to 90 s in each);
- `cat` of 32 MiB through each, and OpenSSH's own `sftp` get of it;
- mount + `ls -l` of a directory of 2,000 files;
- `seq256`: `cat` of 256 MiB through a second link at 100 ms / 400 Mbit/s
  (above what one SSH channel's 2 MB window carries: 160 Mbit/s), beside
  `curl` of the same file from nginx through a third emulator of that link:
  the emulator's own ceiling on this machine, measured in the same run.

Every tool gets the same files, the same link and the same host key in a
known_hosts of the link's port; rclone and sshfs log in with the same key.
Registered in bench/scenarios.py; the media are rig's (DATA).
"""
import os
import shutil
import subprocess
import sys
import time

import rig
import wan as W

sys.path.insert(0, os.path.join(rig.REPO, "integration"))
from sshserver import OpenSSHServer  # noqa: E402  (the tests' own sshd, reused)

RTT_MS, MBIT = 100, 50
RUNS = 3
MANY = 2000
TOOLS = ("mediafs", "sshfs", "rclone")
ROWS = (("ffprobe_mp4", "mp4", W.ffprobe), ("ffprobe_mkv", "mkv", W.ffprobe), ("first3s", "mp4", W.first3s),
        ("seek_mp4", "mp4", W.seek), ("seek_mkv", "mkv", W.seek))
GOAL_MEDIA = 0.80
GOAL_SEQ = 0.9
GOAL_LISTING = 0.5
FAST_MBIT = 400
FAST_MIB = 256
GOAL_FAST_SSHFS, GOAL_FAST_RCLONE = 2.0, 1.2


def run(b):
    b.parts["sftp"] = SFTPBench(b)
    b.parts["sftp"].run()


class SFTPBench:
    def __init__(self, b):
        self.b = b
        self.link = f"{RTT_MS} ms / {MBIT} Mbit/s"
        self.results = {}   # row -> tool -> [seconds]

    def run(self):
        if shutil.which("sshfs") is None:
            self.b.notes.append("sshfs not installed: the SFTP scenario's sshfs column skipped (apt-get install sshfs)")
        root = self.b.fresh_dir("sftp-data")
        # Hard links (copies across file systems), not symlinks: sshfs shows a
        # symlink as one, to a path the client would then read locally.
        for name, src in (("video.mp4", self.b.mp4), ("video.mkv", self.b.mkv), ("seq.bin", W.ensure_seq_file())):
            try:
                os.link(src, os.path.join(root, name))
            except OSError:
                shutil.copyfile(src, os.path.join(root, name))
        fast = os.path.join(root, "seq256.bin")
        with open(os.path.join(rig.DATA, "random-1024MiB.bin"), "rb") as src, open(fast, "wb") as out:
            for _ in range(FAST_MIB):
                out.write(src.read(rig.MiB))
        many = os.path.join(root, "many")
        os.makedirs(many)
        for i in range(MANY):
            with open(os.path.join(many, f"episode-{i:04d}.mkv"), "wb") as f:
                f.write(b"x" * (1000 + i))
        server = OpenSSHServer(os.path.join(rig.WORK, "sftp-sshd")).start()
        try:
            # The WAN scenario's emulator, in front of sshd instead of nginx.
            with W.LinkEmulator(server.port, RTT_MS, MBIT) as link:
                self.known_hosts = os.path.join(rig.WORK, "sftp-known-hosts")
                key = " ".join(open(f"{server.host_key}.pub").read().split()[:2])
                with open(self.known_hosts, "w") as f:
                    f.write(f"[127.0.0.1]:{link.port} {key}\n")
                self.server, self.port, self.root = server, link.port, root
                rig.log(f"sftp: sshd behind linkem at {self.link}")
                for row, kind, how in ROWS:
                    for tool in self.tools():
                        self.b.guarded(f"sftp {row}", tool, lambda: self.media_row(row, kind, how, tool))
                for tool in self.tools():
                    self.b.guarded("sftp seq32", tool, lambda: self.timed_mount("seq32", tool, self.cat))
                self.b.guarded("sftp seq32", "sftp", self.sftp_get)
                for tool in self.tools():
                    self.b.guarded("sftp listing", tool, lambda: self.timed_mount("listing", tool, None))
            # The fast link: a second emulator, the same host key at its port.
            with W.LinkEmulator(server.port, RTT_MS, FAST_MBIT) as link:
                with open(self.known_hosts, "a") as f:
                    f.write(f"[127.0.0.1]:{link.port} {key}\n")
                self.port = link.port
                rig.log(f"sftp: sshd behind linkem at {RTT_MS} ms / {FAST_MBIT} Mbit/s")
                for tool in self.tools():
                    self.b.guarded("sftp seq256", tool, lambda: self.timed_mount("seq256", tool, self.cat256))
            self.b.guarded("sftp seq256", "curl", self.link_ceiling)
        finally:
            server.stop()

    def tools(self):
        return [t for t in TOOLS if (t != "sshfs" or shutil.which("sshfs")) and (t != "rclone" or "rclone" in self.b.tools)]

    def mount(self, tool, cache, tag):
        mp = self.b.mountpoint(f"sftp-{tool}")
        key = str(self.server.user_key)
        if tool == "mediafs":
            argv = [self.b.binary, "mount", "-f", "--cache-dir", cache, "--timeout", "30", "--ssh-key", key,
                    "--ssh-known-hosts", self.known_hosts, f"sftp://root@127.0.0.1:{self.port}{self.root}/", mp]
        elif tool == "sshfs":
            argv = ["sshfs", "-f", "-p", str(self.port), "-o",
                    f"IdentityFile={key},UserKnownHostsFile={self.known_hosts},StrictHostKeyChecking=yes,"
                    "BatchMode=yes,ro", f"root@127.0.0.1:{self.root}", mp]
        else:
            argv = ["rclone", "mount", f":sftp:{self.root}", mp, "--sftp-host", "127.0.0.1", "--sftp-port",
                    str(self.port), "--sftp-user", "root", "--sftp-key-file", key, "--sftp-known-hosts-file",
                    self.known_hosts, "--vfs-cache-mode", "full", "--cache-dir", cache, "--read-only",
                    "--config", "/dev/null"]
        return rig.Mount(tool, argv, mp, f"{tool}-sftp-{tag}.log", self.b)

    def put(self, row, tool, seconds):
        self.results.setdefault(row, {}).setdefault(tool, []).append(seconds)

    def media_row(self, row, kind, how, tool):
        for _ in range(RUNS):
            cache = self.b.fresh_dir(f"cache-sftp-{tool}")
            rig.drop_caches_but_tools()
            with self.mount(tool, cache, row) as mnt:
                t = time.perf_counter()
                subprocess.run(how(os.path.join(mnt.mp, f"video.{kind}")), check=True, capture_output=True,
                               timeout=300)
                self.put(row, tool, time.perf_counter() - t)

    @staticmethod
    def cat(mp):
        subprocess.run(["cat", os.path.join(mp, "seq.bin")], check=True, stdout=subprocess.DEVNULL, timeout=600)

    @staticmethod
    def cat256(mp):
        subprocess.run(["cat", os.path.join(mp, "seq256.bin")], check=True, stdout=subprocess.DEVNULL, timeout=900)

    def link_ceiling(self):
        """curl of the same 256 MiB from nginx (HTTP, one connection)
        through an emulator of the fast link: what the emulator carries on
        this machine, for a client that is no bound of its own."""
        name = "sftp-seq256.bin"
        dst = os.path.join(rig.DATA, name)
        if not os.path.exists(dst):
            shutil.copyfile(os.path.join(self.root, "seq256.bin"), dst)
        with W.LinkEmulator(self.b.nginx.port, RTT_MS, FAST_MBIT) as link:
            for _ in range(RUNS):
                rig.drop_caches()
                rig.read_local(dst)
                t = time.perf_counter()
                subprocess.run(["curl", "-s", "-f", "-o", "/dev/null", link.base() + name], check=True, timeout=900)
                self.put("seq256", "curl", time.perf_counter() - t)

    def timed_mount(self, row, tool, then):
        """`seq32`: cat of the 32 MiB once mounted; `listing`: from the
        mount's start to `ls -l` of the 2,000-file directory done."""
        for _ in range(RUNS):
            cache = self.b.fresh_dir(f"cache-sftp-{tool}")
            rig.drop_caches()
            t = time.perf_counter()
            with self.mount(tool, cache, row) as mnt:
                if then is None:
                    out = subprocess.run(["ls", "-l", os.path.join(mnt.mp, "many")], check=True, capture_output=True,
                                         text=True, timeout=600).stdout
                    if out.count("episode-") != MANY:
                        raise RuntimeError(f"{tool}: ls -l shows {out.count('episode-')} of {MANY} files")
                    self.put(row, tool, time.perf_counter() - t)
                else:
                    t = time.perf_counter()
                    then(mnt.mp)
                    self.put(row, tool, time.perf_counter() - t)

    def sftp_get(self):
        for _ in range(RUNS):
            rig.drop_caches()
            out = os.path.join(rig.WORK, "sftp-get.bin")
            batch = os.path.join(rig.WORK, "sftp-batch")
            with open(batch, "w") as f:
                f.write(f"get {self.root}/seq.bin {out}\n")
            t = time.perf_counter()
            subprocess.run(["sftp", "-q", "-b", batch, "-P", str(self.port), "-i", str(self.server.user_key),
                            "-o", f"UserKnownHostsFile={self.known_hosts}", "-o", "StrictHostKeyChecking=yes",
                            "root@127.0.0.1"], check=True, capture_output=True, timeout=600)
            self.put("seq32", "sftp", time.perf_counter() - t)
            os.unlink(out)

    # -- report
    def median(self, row, tool):
        runs = sorted(self.results.get(row, {}).get(tool, []))
        return runs[len(runs) // 2] if runs else None

    def best_peer(self, row, peers=("sshfs", "rclone")):
        times = [self.median(row, p) for p in peers if self.median(row, p) is not None]
        return min(times) if times else None

    def report(self):
        if not self.results:
            return
        print()
        print(f"SFTP (bench/sftp.py): a real sshd behind bench/linkem.py at {self.link}; cold, fresh mount and cache "
              f"each, median of {RUNS}; the media rows as the WAN scenario's; seq32 = cat of 32 MiB once mounted "
              f"(sftp = OpenSSH's own get, login included); listing = mount + ls -l of {MANY} files.")
        print(f"seq256 = cat of {FAST_MIB} MiB once mounted through a second link, {RTT_MS} ms / {FAST_MBIT} Mbit/s "
              f"(curl, in the sftp column: the same file from nginx through that link, the emulator's ceiling).")
        headers = ["row", *TOOLS, "sftp", "mediafs ÷ best peer"]
        table = []
        for row in [r[0] for r in ROWS] + ["seq32", "listing", "seq256"]:
            other = "curl" if row == "seq256" else "sftp"
            cells = [W.secs(self.median(row, t)) if self.median(row, t) is not None else "-" for t in (*TOOLS, other)]
            best = self.best_peer(row, ("sftp",) if row == "seq32" else ("sshfs", "rclone"))
            mine = self.median(row, "mediafs")
            table.append([row, *cells, f"{mine / best:.2f}×" if best and mine else "-"])
        rig.print_table(headers, table)
        print("  goals (mediafs):")
        for text, (fig, ok) in self.goals().items():
            print(f"    goal: {text}: {fig} {'PASS' if ok else 'MISS'}")

    def goals(self):
        out = {}
        rows = [r[0] for r in ROWS]
        mine = [self.median(r, "mediafs") for r in rows]
        best = [self.best_peer(r) for r in rows]
        if all(x is not None for x in mine + best):
            ratio = sum(mine) / sum(best)
            worst = max(m / b for m, b in zip(mine, best))
            out[f"five media rows ≤ {GOAL_MEDIA}× the best of sshfs and rclone, no row above 1.0×"] = (
                f"{sum(mine):.2f} s vs {sum(best):.2f} s = {ratio:.2f}×, worst row {worst:.2f}×",
                ratio <= GOAL_MEDIA and worst <= 1.0)
        m, s = self.median("seq32", "mediafs"), self.median("seq32", "sftp")
        if m and s:
            out[f"cat of 32 MiB ≥ {GOAL_SEQ}× OpenSSH's sftp get (time ≤ get ÷ {GOAL_SEQ})"] = (
                f"{m:.2f} s vs {s:.2f} s", m <= s / GOAL_SEQ)
        m, r = self.median("listing", "mediafs"), self.median("listing", "rclone")
        if m and r:
            out[f"mount + ls -l of {MANY} files ≤ {GOAL_LISTING}× rclone's"] = (f"{m:.2f} s vs {r:.2f} s",
                                                                                 m <= r * GOAL_LISTING)
        m, s, r, c = (self.median("seq256", t) for t in ("mediafs", "sshfs", "rclone", "curl"))
        if m and s:
            rate = lambda t: f"{FAST_MIB * rig.MiB / t / 1e6:.1f} MB/s"  # noqa: E731
            ceiling = f"; the emulator carries {rate(c)} (curl)" if c else ""
            out[f"cat of {FAST_MIB} MiB at {FAST_MBIT} Mbit/s ≥ {GOAL_FAST_SSHFS}× sshfs's rate"] = (
                f"{rate(m)} vs {rate(s)} = {s / m:.2f}×{ceiling}", s / m >= GOAL_FAST_SSHFS)
            if r:
                out[f"cat of {FAST_MIB} MiB at {FAST_MBIT} Mbit/s ≥ {GOAL_FAST_RCLONE}× rclone's rate"] = (
                    f"{rate(m)} vs {rate(r)} = {r / m:.2f}×", r / m >= GOAL_FAST_RCLONE)
        return out

    def json(self):
        return {"link": self.link, "runs": self.results,
                "goals": {k: {"figure": v[0], "status": "PASS" if v[1] else "MISS"} for k, v in self.goals().items()}}
