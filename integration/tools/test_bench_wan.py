"""bench/wan.py's report of the two link models: the media rows of each
model side by side with their peers, and the ratios it prints computed from
the cells it was given. Pure data, no mount, no link."""

import contextlib
import io
import sys
import types
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
import linkem  # noqa: E402
import wan  # noqa: E402


def bench():
    return types.SimpleNamespace(tools=["mediafs", "curl", "rclone"], results={}, args=None,
                                 mp4="/d/video-g60.mp4", mkv="/d/video-g60.mkv")


def filled(w, seconds):
    """Each model's cells: seconds[model][tool] for every media row, cold."""
    plain = "100 ms / 50 Mbit/s"
    for model, suffix in (("paced", ""), ("slowstart", ", slow start")):
        link = plain + suffix
        w.model_of[link] = (model, plain)
        for row in wan.MEDIA_ROWS:
            for tool, s in seconds[model].items():
                w.put(link, row, tool, "cold", s, [])


def test_both_models_are_printed_side_by_side_with_the_five_rows_summed_against_the_best_peer():
    w = wan.WanBench(bench(), quick=True)
    w.seq_file = "/d/random-32MiB.bin"
    filled(w, {"paced": {"mediafs": 0.5, "rclone": 1.0, "direct": 2.0},
               "slowstart": {"mediafs": 1.2, "rclone": 1.0, "direct": 0.8}})
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        w.report_models()
    text = out.getvalue()
    assert "| paced" in text and "| slowstart" in text
    assert "0.50 / 1.00 / 2.00 (0.50×)" in text      # the best peer under paced is rclone
    assert "1.20 / 1.00 / 0.80 (1.50×)" in text      # under slow start, ffmpeg's own client
    assert "2.50 vs best 5.00 (0.50×); vs rclone 5.00 (0.50×)" in text
    assert "6.00 vs best 4.00 (1.50×); vs rclone 5.00 (1.20×)" in text
    assert w.json()["models"] == {"100 ms / 50 Mbit/s": "paced", "100 ms / 50 Mbit/s, slow start": "slowstart"}


def test_one_model_alone_prints_no_side_by_side_table():
    w = wan.WanBench(bench(), quick=True, models=("slowstart",))
    w.seq_file = "/d/random-32MiB.bin"
    filled(w, {"paced": {"mediafs": 0.5}, "slowstart": {"mediafs": 0.5}})
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        w.report_models()
    assert out.getvalue() == ""


def test_the_sequential_limit_under_slow_start_adds_a_round_trip_per_window_below_the_links_bytes_per_trip():
    rate, rtt = 50e6 / 8, 0.1
    paced = wan.expected_seq_s(rtt, rate, "paced")
    assert paced == 2 * rtt + wan.SEQ_BYTES / rate
    # Six windows (14,600 bytes doubling to 467,200) are below 625,000 bytes a round trip.
    sent = sum(linkem.INIT_WINDOW << k for k in range(6))
    assert wan.expected_seq_s(rtt, rate, "slowstart") == 2 * rtt + 6 * rtt + (wan.SEQ_BYTES - sent) / rate
