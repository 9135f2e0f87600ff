"""Reports: Markdown and HTML content, and the HTML page rendered in headless Chromium with its figures loaded."""
from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from cuda_agent.bench.outcome import TaskOutcome
from cuda_agent.bench.report_pages import write_report
from cuda_agent.bench.results import BenchResults, load_results, save_results

pytest.importorskip("matplotlib")


def _results() -> BenchResults:
    tasks = {"L1/1_a": 1, "L1/2_b": 1, "L1/3_c": 1, "L2/1_d": 2, "L3/1_e": 3}
    outcomes = [
        TaskOutcome("L1/1_a", 1, True, 2.0, 1.5, 1.0, 0.75, 0.5, "timed", solution="L1_1_a",
                    trajectory="traj/L1_1_a.json"),
        TaskOutcome("L1/2_b", 1, False, stage="rule_violation", rules_fired=("stale_output",), solution="L1_2_b"),
        TaskOutcome("L2/1_d", 2, True, 1.2, 0.9, 1.2, 0.9, 1.0, "timed", solution="L2_1_d"),
        TaskOutcome("L3/1_e", 3, False, stage="build_failed", error="kernels/x.cu:3: error"),
    ]
    return BenchResults.build("unit", tasks, outcomes, {"gpu": "test"})


def test_markdown_has_paper_table_links_and_missing_tasks(tmp_path: Path) -> None:
    files = write_report(_results(), tmp_path / "rep", link_base=tmp_path / "sols")
    md = files.markdown.read_text()
    assert "| Overall | this run (2/5 correct) | 40.0% | 40.0% | 20.0% |" in md
    assert "| Overall | CUDA Agent (paper, Table 1) | 98.8% | 98.4% | 96.8% | 2.60x | 2.11x |" in md
    assert "| Level 3 | this run (0/5 correct)" not in md and "| Level 3 | this run (0/1 correct)" in md
    assert "[kernel](../sols/L1_1_a)" in md and "[trajectory](../sols/traj/L1_1_a.json)" in md
    assert re.search(r"\| L1/3_c \| 1 \| missing \| no \|", md)
    assert "stale_output" in md
    assert "![Speedup distributions per level](speedups.png)" in md
    for fig in files.figures:
        assert fig.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    html = files.html.read_text()
    assert html.count("data:image/png;base64,") == 2 and "src='speedups.png'" not in html


def test_results_round_trip_keeps_task_list(tmp_path: Path) -> None:
    res = _results()
    back = load_results(save_results(res, tmp_path / "r.json"))
    assert back.tasks == res.tasks and back.outcomes == res.outcomes and back.missing == ["L1/3_c"]


def _chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


@pytest.mark.slow
def test_html_renders_in_headless_chromium_with_real_images(tmp_path: Path) -> None:
    browser = _chromium()
    if browser is None:
        pytest.skip("chromium not installed (apt-get install -y chromium)")
    files = write_report(_results(), tmp_path / "rep")
    flags = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
             "--disable-component-update", "--disable-sync", "--no-first-run", "--virtual-time-budget=5000"]
    url = files.html.resolve().as_uri()
    dom = subprocess.run([*flags, f"--user-data-dir={tmp_path / 'p1'}", "--dump-dom", url], capture_output=True,
                         text=True, timeout=120).stdout
    match = re.search(r'<p id="image-check" data-loaded="(\d+)">([^<]*)</p>', dom)
    assert match, dom[-2000:]
    assert match.group(1) == "2"
    sizes = dict(re.findall(r"(figure-\d)=(\d+x\d+):true", match.group(2)))
    assert set(sizes) == {"figure-0", "figure-1"}
    import matplotlib.image as mpimg

    for name, fig in zip(("figure-0", "figure-1"), files.figures):
        height, width = mpimg.imread(fig).shape[:2]
        assert sizes[name] == f"{width}x{height}"  # the browser decoded exactly the embedded PNGs

    shot = tmp_path / "shot.png"
    subprocess.run([*flags, f"--user-data-dir={tmp_path / 'p2'}", "--window-size=1200,2000",
                    f"--screenshot={shot}", url], capture_output=True, timeout=120)
    pixels = mpimg.imread(shot)
    assert pixels.shape[0] == 2000 and pixels.shape[1] == 1200
    figure_band = pixels[700:1500, :, :3]  # the figures sit below the two tables
    colourful = ((abs(figure_band[..., 0] - figure_band[..., 2]) > 0.2)).mean()
    assert colourful > 0.005, "no coloured plot pixels where the figures should be"
