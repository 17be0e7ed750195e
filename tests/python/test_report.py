"""Reports: the self-contained HTML report (rendered in headless Chromium), the statistics
behind it, histograms pooled across repeats, `sojourn.load`, the Flent export and the rough
edges a new user met (docs/reports.md, docs/statistics.md)."""
from __future__ import annotations

import gzip
import json
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import sojourn
from sojourn.analysis import stats

ROOT = Path(__file__).resolve().parents[2]
EX = ROOT / "experiments" / "examples"
AGE = ROOT / "experiments" / "repro" / "age-based"


def cli(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "sojourn", *args], capture_output=True, text=True, cwd=cwd)


def chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        p = shutil.which(name)
        if p:
            return p
    return None


# Seed 000's 1 Gb/s set-up, shortened: a discipline and its age-based variant, 2 repeats.
SWEEP = f"""
name = "report-test"
base = "{AGE / 'age-1g.toml'}"
repeats = 2
link = "nic"
set = {{ duration = "6s", warmup = "1s", "record.interval" = "100ms", "record.flows" = true }}

[[variant]]
name = "pfifo"
set = {{ "topology.links[0].qdisc" = "pfifo" }}

[[variant]]
name = "age-pfifofast"
set = {{ "topology.links[0].qdisc" = "pfifo_fast", "classifier" = [{{ at = "client", hook = "output", map = [{{ upto = 6331208, priority = "1:6" }}, {{ priority = "1:0" }}] }}] }}
"""


@pytest.fixture(scope="module")
def sweep_dir(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("rep")
    (d / "s.sweep.toml").write_text(SWEEP)
    r = cli("sweep", str(d / "s.sweep.toml"), "--out", str(d / "out"), "--jobs", "2", "--quiet")
    assert r.returncode == 0, r.stderr
    r = cli("compare", str(d / "out"), "--plots")
    assert r.returncode == 0, r.stderr
    return d / "out"


def render(page: Path, tmp: Path) -> tuple[str, dict, Path]:
    """Opens the page in headless Chromium: (status, detail, screenshot)."""
    exe = chromium()
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             "--window-size=1280,3000", "--virtual-time-budget=15000"]
    dom = subprocess.run([exe, *flags, f"--user-data-dir={tmp / 'prof1'}", "--dump-dom", page.as_uri()],
                         capture_output=True, text=True, timeout=120)
    shot = tmp / "shot.png"
    subprocess.run([exe, *flags, f"--user-data-dir={tmp / 'prof2'}", f"--screenshot={shot}", page.as_uri()],
                   capture_output=True, text=True, timeout=120)
    status = re.search(r'data-report-status="([a-z]+)"', dom.stdout)
    detail = re.search(r'data-report-detail="([^"]*)"', dom.stdout)
    det = json.loads(detail.group(1).replace("&quot;", '"')) if detail else {}
    return (status.group(1) if status else "missing"), det, shot


# ------------------------------------------------------------------------------------
# the report
# ------------------------------------------------------------------------------------


def test_compare_writes_a_self_contained_report(sweep_dir):
    page = (sweep_dir / "report.html").read_text()
    # No network access needed: no external script, stylesheet or image.
    assert not re.search(r'<(script|link|img)[^>]+(src|href)="https?://', page)
    assert "Plotly" in page  # plotly.js is embedded
    for section in ("summary", "pairs", "timeseries", "classes", "fct-cdf", "sojourn-cdf", "fct-size", "lorenz", "ellipsis", "box", "about"):
        assert f"id='{section}'" in page, section
    # Completed/started counts and both intervals are in the summary table.
    assert "completed / sized" in page and "CI across repeats" in page and "over flows (too narrow)" in page
    # The experiment as run and the versions.
    assert "age-1g.toml" in page and "plotly" in page and "sojourn engine" in page


@pytest.mark.skipif(chromium() is None, reason="no Chromium on this machine (.ci/run installs Debian's chromium)")
def test_report_renders_in_chromium(sweep_dir, tmp_path):
    status, detail, shot = render(sweep_dir / "report.html", tmp_path)
    assert status == "ok", detail
    assert detail["plots"] >= 8 and detail["empty"] == [] and detail["errors"] == [] and detail["images"] == []
    from PIL import Image

    im = np.asarray(Image.open(shot).convert("L"), dtype=float)
    assert im.shape[1] == 1280 and im.std() > 10  # a page with content, not a blank screenshot


@pytest.mark.skipif(chromium() is None, reason="no Chromium on this machine (.ci/run installs Debian's chromium)")
def test_the_page_check_fails_on_an_empty_plot_and_a_script_error(tmp_path):
    """The in-page check must be able to fail: a plot without data and a thrown error."""
    import plotly
    import plotly.graph_objects as go
    import plotly.offline

    from sojourn.analysis import htmlreport as H

    empty = go.Figure(go.Scatter(x=[], y=[])).to_html(full_html=False, include_plotlyjs=False, div_id="plot-e")
    page = (f"<html><head>{H.ERROR_TRAP}<script>{plotly.offline.get_plotlyjs()}</script></head><body>"
            f"<div class='plot' id='e-box'>{empty}</div><script>throw new Error('boom');</script>{H.SELF_CHECK}</body></html>")
    f = tmp_path / "broken.html"
    f.write_text(page)
    status, detail, _ = render(f, tmp_path)
    assert status == "error"
    assert detail["empty"] == ["e-box"] and any("boom" in e for e in detail["errors"])


def test_run_writes_the_report_by_default(tmp_path):
    r = cli("run", str(EX / "cbr-fifo-overload.toml"), "--out", str(tmp_path / "o"), "--quiet", "--duration", "6s")
    assert r.returncode == 0, r.stderr
    for f in ("report.html", "report.md", "histograms.parquet", "experiment.json"):
        assert (tmp_path / "o" / f).exists(), f
    r = cli("run", str(EX / "cbr-fifo-overload.toml"), "--out", str(tmp_path / "n"), "--quiet", "--duration", "6s", "--no-report")
    assert r.returncode == 0 and not (tmp_path / "n" / "report.html").exists()


def test_report_command_and_bad_input(sweep_dir, tmp_path):
    r = cli("report", str(sweep_dir / "runs" / "pfifo" / "seed-1"), "-o", str(tmp_path / "one.html"))
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "one.html").stat().st_size > 100_000
    r = cli("report", str(tmp_path / "nothing-here"))
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "nothing-here" in r.stderr


def test_paired_styles():
    """A discipline and its age-based variant share a colour (variant dashed); seed 000's 13
    configurations get 7 distinct families, every family its own colour."""
    from sojourn.analysis.pairs import styles

    names = ["pfifo", "age-pfifofast", "codel", "age-prio-codel", "fq_codel", "age-prio-fq_codel", "pie", "age-prio-pie",
             "fq_pie", "age-prio-fq_pie", "cake", "age-cake", "age-cake-strict"]
    st = styles(names)
    assert st["age-pfifofast"].colour == st["pfifo"].colour and st["age-pfifofast"].dash == "dash"
    assert st["age-prio-codel"].colour == st["codel"].colour and st["codel"].dash == "solid"
    assert st["age-cake-strict"].colour == st["cake"].colour
    assert len({s.colour for s in st.values()}) == 6  # pfifo, codel, fq_codel, pie, fq_pie, cake


# ------------------------------------------------------------------------------------
# statistics
# ------------------------------------------------------------------------------------


def test_hist_quantiles_by_hand():
    # 4 samples: 1 in [0,10), 1 in [10,20), 2 in [20,30). Nearest rank of the median is 2:
    # the end of the second bucket; of P99 rank 4: the end of the third.
    lo, hi, c = [0, 10, 20], [10, 20, 30], [1, 1, 2]
    assert stats.hist_quantiles(lo, hi, c, (0.5, 0.99)) == [20.0, 30.0]
    # Pooling two repeats is adding counts: duplicates of a bucket merge.
    assert stats.hist_quantiles(lo + [20], hi + [30], c + [4], (0.5,)) == [pytest.approx(20 + 10 * (4 - 2) / 6)]
    x, y = stats.hist_cdf(lo, hi, c)
    assert list(x) == [10, 20, 30] and list(y) == [0.25, 0.5, 1.0]


def test_repeat_gain_pairs_repeats_by_seed():
    # Each repeat of the variant is exactly half its base's: paired, every resample has
    # gain −50 %, so the interval collapses; unpaired, the spread of the repeats shows.
    a, b = [1.0, 2.0, 3.0, 4.0], [2.0, 4.0, 6.0, 8.0]
    p = stats.repeat_gain(a, b, paired=True)
    assert p["gain"] == pytest.approx(-0.5) and p["lo"] == pytest.approx(-0.5) and p["hi"] == pytest.approx(-0.5)
    u = stats.repeat_gain(a, b, paired=False)
    assert u["lo"] < -0.6 and u["hi"] > -0.3
    assert np.isnan(stats.repeat_gain([1.0], [2.0])["lo"])  # one repeat: no interval


def test_pooled_histogram_matches_the_packet_log(tmp_path):
    """The engine's exported buckets give the per-packet percentile of the packet log (the
    exact order statistic) within the histogram's stated 0.8 %."""
    r = sojourn.run(EX / "cbr-fifo-overload.toml", duration="4s",
                    overrides={"record.packets": ["bottleneck"], "warmup": "0s"})
    pk = r.packets
    soj = np.sort(pk.loc[(pk["link"] == "bottleneck") & (pk["event"] == "dequeue"), "sojourn_ms"].to_numpy())
    h = r.histograms
    h = h[h["link"] == "bottleneck"]
    assert int(h["count"].sum()) == soj.size
    for q in (0.5, 0.9, 0.99):
        exact = soj[int(np.ceil(q * soj.size)) - 1]
        got = stats.hist_quantiles(h["lo_ns"], h["hi_ns"], h["count"], (q,))[0] * 1e-6
        assert got == pytest.approx(exact, rel=1 / 128), q


def test_throughput_has_no_false_zero_at_the_warmup_boundary():
    """12 Mbit/s of CBR into 10 Mbit/s keeps the link busy: every throughput sample is the
    link rate, including the first one after the warm-up resets the counters."""
    r = sojourn.run(EX / "cbr-fifo-overload.toml", duration="4s", overrides={"warmup": "2s", "record.interval": "100ms"})
    s = r.series("bottleneck", "throughput_bps")
    s = s[s.index >= 0.5]  # after the queue filled
    assert len(s) > 30
    assert s.min() == pytest.approx(10e6, rel=0.02) and s.max() == pytest.approx(10e6, rel=0.02)


# ------------------------------------------------------------------------------------
# sojourn.load and the Flent export
# ------------------------------------------------------------------------------------


def test_load_gives_one_tidy_frame_with_typed_parameters(tmp_path):
    sweep = tmp_path / "rates.sweep.toml"
    sweep.write_text(f"""
name = "rates"
base = "{EX / 'cbr-fifo-overload.toml'}"
repeats = 2
set = {{ duration = "2s", warmup = "0s" }}
[[axis]]
key = "topology.bottleneck.rate"
values = ["8Mbit", "20Mbit"]
""")
    r = cli("sweep", str(sweep), "--out", str(tmp_path / "o"), "--quiet")
    assert r.returncode == 0, r.stderr
    runs = sojourn.load(tmp_path / "o", what="runs")
    assert len(runs) == 4 and list(runs["seed"]) == [1, 2, 1, 2]
    col = [c for c in runs.columns if c not in ("point", "seed") and runs[c].dtype == float and set(runs[c]) == {8e6, 20e6}]
    assert col, runs.dtypes  # the swept rate is a number of bit/s
    flows = sojourn.load(tmp_path / "o")
    assert {"point", "seed", col[0], "fct_s", "after_warmup"} <= set(flows.columns)
    ts = sojourn.load(tmp_path / "o" / "runs" / runs["point"][0] / "seed-1", what="timeseries")
    assert {"time_s", "entity", "metric", "value", "point", "seed"} <= set(ts.columns)
    with pytest.raises(FileNotFoundError):
        sojourn.load(tmp_path / "missing")


def test_flent_export_is_read_by_flent(sweep_dir, tmp_path):
    run = sweep_dir / "runs" / "pfifo" / "seed-1"
    r = cli("flent", str(run), "-o", str(tmp_path / "x.flent.gz"))
    assert r.returncode == 0, r.stderr
    obj = json.loads(gzip.open(tmp_path / "x.flent.gz", "rt").read())
    assert obj["version"] == 4 and obj["metadata"]["NAME"] == "tcp_1up"
    ts = pd.read_parquet(run / "timeseries.parquet")
    th = ts[(ts["entity"].astype(str) == "nic") & (ts["metric"].astype(str) == "throughput_bps")]
    up = dict(zip(obj["x_values"], obj["results"]["TCP upload"]))
    for t, v in zip(th["time_s"], th["value"]):
        assert up[t] == pytest.approx(v / 1e6)
    resultset = pytest.importorskip("flent.resultset", reason="flent not installed (pip install '.[test]' brings it)")
    rs = resultset.load(str(tmp_path / "x.flent.gz"))
    assert "TCP upload" in rs.series_names and "Ping (ms) ICMP" in rs.series_names and len(rs) > 0


# ------------------------------------------------------------------------------------
# rough edges
# ------------------------------------------------------------------------------------


def test_threshold_help_is_its_own():
    for flag in ("--help", "-h"):
        r = cli("threshold", flag)
        assert r.returncode == 0 and r.stdout.startswith("usage: sojourn threshold"), r.stdout + r.stderr


def test_compare_help_prints_a_plain_percent_sign():
    r = cli("compare", "--help")
    assert r.returncode == 0 and "95%" in r.stdout and "%%" not in r.stdout


def test_tables_are_not_cut_when_piped(tmp_path):
    r = cli("run", str(EX / "cbr-fifo-overload.toml"), "--out", str(tmp_path / "o"), "--duration", "6s", "--no-report")
    assert r.returncode == 0, r.stderr
    assert "bottleneck" in r.stdout and "…" not in r.stdout


def test_package_ships_type_information():
    pkg = Path(sojourn.__file__).parent
    assert (pkg / "py.typed").exists()
    stub = (pkg / "_engine.pyi").read_text()
    public = {n for n in dir(sojourn._engine) if not n.startswith("_")}
    declared = set(re.findall(r"^(?:def|class) (\w+)", stub, re.M))
    assert public == declared, (public ^ declared)


def test_validate_shows_the_discipline_as_linux_applies_it():
    """fq_codel quantum 0 is accepted, as by the kernel, which raises it to 256
    (fq_codel_change: max(256, quantum)); validate shows the value that applies."""
    r = cli("validate", str(EX / "cbr-fifo-overload.toml"), "--set", 'topology.bottleneck.qdisc={kind="fq_codel",quantum=0}')
    assert r.returncode == 0, r.stderr
    line = next(x for x in r.stdout.splitlines() if x.strip().startswith("bottleneck"))
    assert "quantum=0" in line and "quantum 256" in line, line


def test_sweep_progress_prints_an_eta_without_a_terminal(monkeypatch, capsys):
    """Plain progress lines (a pipe, a log, CI) carry an ETA from the pace of the runs done
    in this session: 2 of 10 runs (1 cached) done in 60 s -> 8 left at 60 s each = 8 min."""
    from sojourn import sweeps

    clock = [1000.0]
    monkeypatch.setattr(sweeps.time, "monotonic", lambda: clock[0])
    monkeypatch.setattr(sweeps.sys.stderr, "isatty", lambda: False, raising=False)
    d = sweeps._Display(total=10, cached=1, label="t", quiet=False)
    clock[0] += 60.0
    d.set_running(2)  # runs executing now (local workers or cluster workers)
    d.finished("p seed 1", True)
    assert capsys.readouterr().err.strip() == "[2/10] p seed 1; 2 running; ETA 8m00s"


def test_a_live_run_s_warning_is_one_line_in_the_output_and_the_report(tmp_path):
    # What `sojourn emulate` prints and writes when summary.json's emulate.warning is set
    # (crates/sojourn-emu: the run exceeded what the live engine holds); a simulated run
    # dressed as a live one stands in for it.
    from rich.console import Console

    from sojourn.analysis.report import print_run, write_run_report

    res = sojourn.run(EX / "cbr-fifo-overload.toml", duration="6s")
    warning = "this run exceeded what the live engine holds on this machine (the kernel dropped 7 frames before the forwarder read them): [sic]"
    res.summary["engine"] = "emulate"
    res.summary["emulate"] = {"wall_seconds": 2.0, "forwarder_cpu_seconds": 1.0, "kernel": "x", "warning": warning}
    console = Console(width=400, record=True)
    print_run(res, console=console)
    out = [line for line in console.export_text().splitlines() if "warning" in line]
    assert out == [f"warning: {warning}"], out
    md = write_run_report(res, tmp_path).read_text()
    assert f"**Warning:** {warning}" in md.splitlines()


def test_a_large_topology_shows_its_busiest_links_and_counts_the_rest(tmp_path):
    # 40 pairs with a flow each, each held to its 10 Mbit/s access link: the data fills the
    # senders' and the receivers' access links and 400 Mbit/s of the 400-Mbit/s bottleneck;
    # the ACKs (one of ~70 B per two 1,514-B segments: ~2.3 % of the rate) keep the four ACK
    # directions above 1 % busy. 162 busy links, which the terminal table and report.md bound
    # to 24 rows, counting the other 138.
    from rich.console import Console

    from sojourn.analysis.report import print_run, write_run_report

    toml = tmp_path / "forty.toml"
    toml.write_text(
        'duration = "1s"\n[topology]\nkind = "dumbbell"\npairs = 40\n'
        'bottleneck = { rate = "400Mbit", delay = "5ms", qdisc = "fq_codel" }\n'
        'access = { rate = "10Mbit", delay = "1ms" }\n'
        '[transport]\ncc = "cubic"\n[[workload]]\nkind = "bulk"\npairs = "all"\n'
    )
    res = sojourn.run(toml)
    assert len(res.summary["links"]) == 162
    console = Console(width=400, record=True)
    print_run(res, console=console)
    text = console.export_text()
    links_part = text.split("└")[0]  # the links table, before the flows table
    rows = [line for line in links_part.splitlines() if line.startswith("│ ")]
    assert len(rows) == 24, text
    assert "bottleneck" in [r.split("│")[1].strip() for r in rows]
    words = " ".join(text.split())  # the caption wraps to the table's width
    assert "162 links queued, dropped or were busy" in words and "(138 more in summary.json)" in words
    md = write_run_report(res, tmp_path).read_text().splitlines()
    assert len([line for line in md if line.startswith("| ") and not line.startswith("| link")]) == 24
    assert any("(138 more in summary.json)" in line for line in md)
