"""The bench's scenarios, each registered here and nowhere else: the name
`--only` takes, and the module and function that run it with the Bench
(bench/rig.py), in the order they run and report.

A scenario's module is imported when it runs: sources needs boto3, moto and
Apache, which the others do not.
"""
import importlib

SCENARIOS = {
    "seq": ("seq", "run"),                  # 1-2: sequential, cold then warm
    "random": ("randomreads", "run"),       # 3: random 4 KiB reads
    "ffprobe": ("media", "ffprobe"),        # 4: ffprobe, cold
    "seek": ("media", "seek"),              # 5: seek to 90 s + 1 s decode, cold
    "bwlimit": ("bwlimit", "run"),          # 7: --bwlimit 8M
    "wan": ("wan", "run"),                  # issue 12's rows behind a link emulator
    "scale": ("scale", "run"),              # 8: many entries, list file and listing
    "sources": ("sources", "run"),          # WebDAV and S3 sources
    "hls": ("hls", "run"),                  # an HLS VOD behind the link emulator
    "mediaserver": ("mediaserver", "run"),  # a player beside a library scan
    "background": ("background", "run"),    # a player beside background jobs, their budgets
    "archives": ("archives", "run"),        # a film in RAR volumes and a ZIP
    "sftp": ("sftp", "run"),                # sftp:// beside sshfs and rclone :sftp:, behind the link emulator
}
NAMES = tuple(SCENARIOS)


def run(name, bench):
    module, function = SCENARIOS[name]
    getattr(importlib.import_module(module), function)(bench)
