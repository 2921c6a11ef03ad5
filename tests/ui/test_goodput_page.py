"""The run page shows where a run's wall time went, in a real browser (Debian's chromium):
the goodput line with each part, the GPU-hours and the cost from the profile's price, and a
bar whose segments are as wide as the parts' shares, drawn under the page's CSP.

One cheap local run (a heartbeat, a failure, a retry; no training) for the module.
"""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Iterator

import pytest

from tests.ui.browser import dashboard
from tests.ui.conftest import Runs

PARTS = ("queued", "starting", "productive", "lost", "restarting")


@pytest.fixture(scope="module")
def retried(module_runs: Runs) -> Iterator[tuple[str, str]]:
    """A run whose attempt 1 fails a second after its heartbeat and whose attempt 2
    completes, priced at $4 per GPU-hour; and the dashboard's address."""
    (module_runs.home / "config.yaml").write_text(
        "current: local\nclusters:\n  local:\n    price_per_gpu_hour: {a100_80gb: 4}\n"
    )
    name = module_runs.submit(
        "gp-page",
        """\
        name: gp-page
        compute: {gpus: 2, gpu_type: a100_80gb}
        command: |
          if [ "$LAUNCHER_ATTEMPT" = 1 ]; then launcher-heartbeat 1; sleep 1; exit 1; fi
          launcher-heartbeat 1; echo ok
        scheduling: {max_retries: 1, retry_backoff: {first: 1s}}
        """,
    )
    module_runs.wait_status(name, {"COMPLETED", "FAILED"}, timeout=120)
    with dashboard(module_runs.home, "--no-token") as url:
        yield name, url


def test_the_run_page_shows_the_goodput_parts_cost_and_a_bar_of_their_shares(retried, chromium) -> None:
    name, url = retried
    with urllib.request.urlopen(url + f"api/runs/{name}", timeout=30) as r:
        g = json.load(r)["goodput"]
    assert g["lost"] > 0.5 and g["restarting"] > 0.5 and g["cost"] is not None
    # No bypass_csp: the bar's widths are set as the CSP allows, or they stay zero.
    context = chromium.new_context(viewport={"width": 1280, "height": 900})
    try:
        page = context.new_page()
        page.set_default_timeout(30_000)
        said: list[str] = []
        page.on("console", lambda m: said.append(m.text))
        page.goto(url + f"runs/{name}")
        line = " ".join((page.locator("#goodput").text_content() or "").split())
        share = round(100 * g["goodput"])
        assert line.startswith(f"{share}% productive: "), line
        for part in PARTS:
            assert f"{part} {g[part]:.1f} s" in line, line
        assert f"{g['gpu_hours']:.2f} GPU-hours, ${g['cost']:.2f}" in line, line

        bar = page.locator("#goodput-bar")
        total = bar.bounding_box()["width"]
        for part in PARTS:
            segment = bar.locator(f'[data-part="{part}"]')
            width = segment.bounding_box()["width"] if g[part] > 0 else segment.evaluate("e => e.offsetWidth")
            assert width == pytest.approx(total * g[part] / g["wall"], abs=1.5), (part, width, total, g)
        assert segment.get_attribute("title") == f"restarting {g['restarting']:.1f} s"
        assert not [m for m in said if "Content Security Policy" in m or "Refused to" in m], said
    finally:
        context.close()
