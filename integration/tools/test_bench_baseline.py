"""bench/baseline.py, the bench's comparison with its committed baseline:
which figures it judges, which way is better, and that a figure 10% worse
is a REGRESSION line. Pure data, no mount."""

import io
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
import baseline  # noqa: E402

BENCH = Path(__file__).resolve().parents[2] / "bench"


def run(rows=None, wan=None):
    return {"rows": rows or [], "wan": wan}


def row(key, mediafs, curl=1.0):
    return {"key": key, "values": {"mediafs": mediafs, "curl": curl, "rclone": None}}


def cell(s, requests, nbytes):
    return {"cold": {"s": s, "requests": requests, "bytes": nbytes}}


def test_a_figure_ten_percent_worse_either_way_is_a_regression_and_other_tools_are_not_judged():
    base = run([row("cold_seq_mbps", 1000), row("ffprobe_mp4_s", 1.0), row("random_requests", 100, curl=5)],
               {"links": {"100ms/50Mbit": {"probe_mkv": {"mediafs": cell(0.6, 4, 1000), "rclone": cell(0.6, 4, 1)}}}})
    now = run([row("cold_seq_mbps", 850), row("ffprobe_mp4_s", 1.05), row("random_requests", 100, curl=50)],
              {"links": {"100ms/50Mbit": {"probe_mkv": {"mediafs": cell(0.6, 8, 1000), "rclone": cell(9.0, 99, 1)}}}})
    regressions, improvements, missing = baseline.compare(base, now)
    paths = {p for p, *_ in regressions}
    assert paths == {"rows/cold_seq_mbps/mediafs", "wan/links/100ms/50Mbit/probe_mkv/mediafs/cold/requests"}, regressions
    assert improvements == [] and missing == []
    out = io.StringIO()
    baseline.report(base, now, out=out)
    lines = [line for line in out.getvalue().splitlines() if line.startswith("REGRESSION")]
    assert len(lines) == 2 and "4 -> 8 (+100% worse)" in out.getvalue(), out.getvalue()


def test_better_figures_are_improvements_and_a_figure_in_one_run_only_is_listed_not_judged():
    base = run([row("cold_seq_mbps", 1000), row("seek_mkv_s", 2.0)])
    now = run([row("cold_seq_mbps", 1500), row("warm_same_mbps", 9000)])
    regressions, improvements, missing = baseline.compare(base, now)
    assert regressions == []
    assert [p for p, *_ in improvements] == ["rows/cold_seq_mbps/mediafs"]
    assert missing == ["rows/seek_mkv_s/mediafs", "rows/warm_same_mbps/mediafs"]


def test_a_whole_runs_peak_rss_is_judged_only_against_a_run_of_the_same_scenarios_and_each_scenarios_own_peak_always():
    base = {"rows": [row("peak_rss_mib", 100)], "scenarios": ["seq", "scale"],
            "peak_rss_by_scenario": {"seq": {"mediafs": 20, "rclone": 900}, "scale": {"mediafs": 100}}}
    # The same scenarios, the peak 20% higher: a regression, and scale's own.
    same = {"rows": [row("peak_rss_mib", 120)], "scenarios": ["seq", "scale"],
            "peak_rss_by_scenario": {"seq": {"mediafs": 20, "rclone": 2000}, "scale": {"mediafs": 120}}}
    regressions, _, _ = baseline.compare(base, same)
    assert {p for p, *_ in regressions} == {"rows/peak_rss_mib/mediafs", "peak_rss_by_scenario/scale/mediafs"}
    # One scenario more (sources' S3 listing peaks higher): its peak is not
    # the old run's; scale's own is judged and did not move.
    more = {"rows": [row("peak_rss_mib", 140)], "scenarios": ["seq", "scale", "sources"],
            "peak_rss_by_scenario": {"seq": {"mediafs": 20}, "scale": {"mediafs": 104}, "sources": {"mediafs": 140}}}
    regressions, _, missing = baseline.compare(base, more)
    assert regressions == [] and missing == ["peak_rss_by_scenario/sources/mediafs"], (regressions, missing)
    out = io.StringIO()
    baseline.report(base, more, out=out)
    assert "not judged: rows/peak_rss_mib/mediafs" in out.getvalue() and "REGRESSION" not in out.getvalue()
    # A baseline that does not list its scenarios (Dec 4's): not judged either.
    assert baseline.compare({"rows": [row("peak_rss_mib", 100)]}, same)[0] == []


def test_the_committed_baseline_is_a_bench_run_with_mediafs_figures():
    doc = json.loads((BENCH / "baseline.json").read_text())
    figures = baseline.figures(doc)
    assert len(figures) >= 20, sorted(figures)
    # Compared with itself: nothing changed.
    assert baseline.compare(doc, doc)[:2] == ([], [])
