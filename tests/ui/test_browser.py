"""The dashboard in a real browser (Debian's chromium, driven by Playwright) against real
local runs that train the tiny MPT of runspecs/mpt-tiny-local.yaml, shortened.

Run A trains, then waits at two gates (files the tests create), so that a test can watch
its log grow and its status change while the page is open. Run B trains a little less,
for the compare view. Both train at once, once for the module. Each test saves a
screenshot of its page under its tmp_path.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from tests.conftest import needs
from tests.ui.browser import BLUE, COUNT_PIXELS_JS, RED, chromium_path, dashboard, server_log
from tests.ui.conftest import Runs

pytestmark = [pytest.mark.train, pytest.mark.slow, pytest.mark.timeout(900)]

REPO = Path(__file__).resolve().parents[2]
CHROMIUM = chromium_path()
if CHROMIUM is None:
    pytest.skip(
        "Debian's chromium is not installed (apt-get install -y chromium; .ci/run installs it)", allow_module_level=True
    )
needs("playwright.sync_api", reason="needs playwright (the dev extra), which drives chromium")
needs("composer", reason="the runs train the tiny MPT: needs the train extra")

TRAIN_SECONDS = 600  # the bound on both runs' training on a busy 2-core machine
UI_SECONDS = 30  # the bound on the page showing a change


def wait_for(path: Path) -> str:
    return f"for t in $(seq 1 6000); do [ -e {path} ] && break; sleep 0.1; done\n"


@dataclass
class Trained:
    runs: Runs
    a: str
    b: str
    gate1: Path
    gate2: Path
    url: str


def tiny_spec(work: Path, name: str, steps: int, lr: float, after: str = "") -> Path:
    spec = yaml.safe_load((REPO / "runspecs" / "mpt-tiny-local.yaml").read_text())
    spec["name"] = name
    spec["parameters"].update(max_duration=f"{steps}ba", eval_interval=f"{steps // 2}ba", save_interval=f"{steps}ba")
    spec["parameters"]["optimizer"]["lr"] = lr
    spec["command"] = f'echo "ui-test: training"\n{spec["command"]} || exit $?\n{after}'
    path = work / f"{name}.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


@pytest.fixture(scope="module")
def trained(module_runs: Runs) -> Iterator[Trained]:
    from launcher.data.convert import convert
    from launcher.data.synthetic import write_number_say
    from launcher.data.tokenizer import train_tokenizer

    work = module_runs.cwd
    data = work / "out" / "number-say"
    write_number_say(data / "train.jsonl", 1500, seed=0)
    write_number_say(data / "val.jsonl", 150, seed=1)
    tok = train_tokenizer([str(data / "train.jsonl")], 512, data / "tokenizer")
    for split in ("train", "val"):
        convert([str(data / f"{split}.jsonl")], str(data / "mds"), str(tok), 64, split=split)

    gate1, gate2 = work / "gate-1", work / "gate-2"
    after = (
        'echo "ui-test: waiting for gate 1"\n'
        + wait_for(gate1)
        + 'echo "ui-test: gate 1 opened"\n'
        + wait_for(gate2)
        + 'echo "ui-test: done"\n'
    )
    a = module_runs.submit("tiny-a", tiny_spec(work, "ui-tiny-a", 24, 3.0e-3, after).read_text())
    b = module_runs.submit("tiny-b", tiny_spec(work, "ui-tiny-b", 12, 1.0e-3).read_text())
    with dashboard(module_runs.home, "--no-token") as url:
        yield Trained(module_runs, a, b, gate1, gate2, url)
        gate1.touch()
        gate2.touch()
        for name in (a, b):
            module_runs.wait_status(name, {"COMPLETED", "FAILED", "STOPPED"}, timeout=TRAIN_SECONDS)


@pytest.fixture
def page(chromium) -> Iterator[object]:
    # Playwright's wait_for_function polls with eval, which the dashboard's CSP forbids:
    # these tests bypass it; test_the_pages_work_under_their_content_security_policy does not.
    context = chromium.new_context(viewport={"width": 1280, "height": 900}, bypass_csp=True)
    p = context.new_page()
    p.set_default_timeout(UI_SECONDS * 1000)
    yield p
    context.close()


def log_text(page) -> str:
    return page.locator("#log").text_content() or ""


def mark_page(page) -> None:
    """A marker that a reload would wipe: the tests check the page updated in place."""
    page.evaluate("window.__notReloaded = true")


def not_reloaded(page) -> bool:
    return page.evaluate("window.__notReloaded === true")


def test_run_page_log_shows_lines_as_they_arrive(trained: Trained, page, tmp_path: Path) -> None:
    page.goto(trained.url + f"runs/{trained.a}")
    mark_page(page)
    # Training lines stream in while the run trains, up to the line before gate 1.
    page.wait_for_function(
        "document.getElementById('log').textContent.includes('ui-test: waiting for gate 1')",
        timeout=TRAIN_SECONDS * 1000,
    )
    text = log_text(page)
    # The trainer's progress lines are shown; its metric records (the charts') are not.
    assert "ui-test: training" in text and "[train] step 20/24 · loss " in text
    assert "@@launcher.metrics" not in text
    assert "gate 1 opened" not in text
    trained.gate1.touch()
    page.wait_for_function("document.getElementById('log').textContent.includes('ui-test: gate 1 opened')")
    assert not_reloaded(page)
    assert log_text(page).count("ui-test: training") == 1  # no line repeated
    assert page.locator("#run-status").text_content() == "RUNNING"
    page.check("#log-raw")  # the records too
    page.wait_for_function("document.getElementById('log').textContent.includes('@@launcher.metrics')")
    assert log_text(page).count("ui-test: training") == 1
    page.screenshot(path=str(tmp_path / "run-log.png"), full_page=True)


def test_runs_page_status_turns_completed_without_reload(trained: Trained, page, tmp_path: Path) -> None:
    trained.gate1.touch()
    page.goto(trained.url)
    row = page.locator(f'tr[data-run="{trained.a}"]')
    assert row.locator(".status").text_content() == "RUNNING"
    assert page.locator(f'tr[data-run="{trained.b}"]').count() == 1
    page.screenshot(path=str(tmp_path / "runs-running.png"), full_page=True)
    mark_page(page)
    trained.gate2.touch()
    page.wait_for_function(
        f"document.querySelector('tr[data-run=\"{trained.a}\"] .status').textContent === 'COMPLETED'"
    )
    assert not_reloaded(page)
    assert "1 × cpu" in row.text_content()
    page.screenshot(path=str(tmp_path / "runs-completed.png"), full_page=True)


def test_loss_chart_draws_the_training_loss(trained: Trained, page, tmp_path: Path) -> None:
    trained.gate1.touch()
    trained.gate2.touch()
    trained.runs.wait_status(trained.a, {"COMPLETED"}, timeout=TRAIN_SECONDS)
    page.goto(trained.url + f"runs/{trained.a}")
    chart = page.locator('.chart[data-metric="loss/train/total"]')
    try:
        chart.locator("canvas").wait_for()
    except Exception as e:  # say what the page said instead of a bare timeout
        raise AssertionError(
            f"no chart; the page's note: {page.locator('#chart-note').text_content()!r}; "
            f"the dashboard's stderr:\n{server_log(trained.url)[-6000:]}"
        ) from e
    assert int(chart.get_attribute("data-points")) == 2 * 24  # raw and smoothed, every step
    legend = chart.locator(".u-legend").text_content()
    assert "loss/train/total" in legend and "loss/train/total (smoothed)" in legend
    assert page.evaluate(COUNT_PIXELS_JS, [chart.locator("canvas").element_handle(), list(BLUE)]) > 200
    metrics = page.locator("#metric-list").text_content()
    assert "metrics/eval/LanguageCrossEntropy" in metrics  # every metric can be chosen
    assert page.locator('#metric-list input[value="loss/train/total"]').is_checked()
    page.locator("#log-scale").check()
    chart.locator("canvas").wait_for()
    page.screenshot(path=str(tmp_path / "run-chart.png"), full_page=True)


def test_compare_view_overlays_two_runs(trained: Trained, page, tmp_path: Path) -> None:
    for name in (trained.a, trained.b):
        trained.gate1.touch()
        trained.gate2.touch()
        trained.runs.wait_status(name, {"COMPLETED"}, timeout=TRAIN_SECONDS)
    page.goto(trained.url)
    for name in (trained.a, trained.b):
        page.locator(f'tr[data-run="{name}"] input.pick').check()
    page.locator("#compare-selected").click()
    page.wait_for_url("**/compare?runs=*")
    chart = page.locator("#compare .chart")
    chart.locator("canvas").wait_for()
    page.wait_for_function("document.querySelector('#compare .chart').dataset.lines !== undefined")
    assert set(chart.get_attribute("data-lines").split("\n")) == {trained.a, trained.b}
    legend = chart.locator(".u-legend").text_content()
    assert trained.a in legend and trained.b in legend
    canvas = chart.locator("canvas").element_handle()
    assert page.evaluate(COUNT_PIXELS_JS, [canvas, list(BLUE)]) > 100
    assert page.evaluate(COUNT_PIXELS_JS, [canvas, list(RED)]) > 100
    assert chart.get_attribute("data-metric") == "loss/train/total"
    # Two animation frames: the chart's last frame is painted before the screenshot.
    page.evaluate(
        "() => { window.frames_seen = 0; const next = () => ++window.frames_seen < 2 && "
        "requestAnimationFrame(next); requestAnimationFrame(next); }"
    )
    page.wait_for_function("window.frames_seen >= 2", timeout=10_000)
    page.screenshot(path=str(tmp_path / "compare.png"), full_page=True)


def test_the_pages_work_under_their_content_security_policy(trained: Trained, chromium) -> None:
    """The pages' scripts run under the CSP every response carries (script-src 'self', no
    inline script, styles set through the DOM): the run page streams its log, draws its
    chart, and no violation is reported."""
    context = chromium.new_context(viewport={"width": 1280, "height": 900})
    try:
        p = context.new_page()
        p.set_default_timeout(UI_SECONDS * 1000)
        said: list[str] = []
        p.on("console", lambda m: said.append(m.text))
        p.on("pageerror", lambda e: said.append(str(e)))
        p.goto(trained.url)
        p.locator(f'tr[data-run="{trained.a}"]').wait_for()
        p.goto(trained.url + f"runs/{trained.a}")
        p.locator("#log", has_text="ui-test: training").wait_for()
        p.locator(".chart canvas").first.wait_for()
        assert not [m for m in said if "Content Security Policy" in m or "Refused to" in m], said
    finally:
        context.close()
