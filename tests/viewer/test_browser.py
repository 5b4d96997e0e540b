"""What a person sees: `horizonrl view` (a real server) in real Chromium, on runs a real trainer wrote.

Every page is checked through what is drawn (table cells, SVG points, pixels, highlighted tokens)
and photographed into the test's folder; with `HORIZONRL_VIEWER_SHOTS=docs/images` the same
screenshots are also written there (how docs/viewer.md's images are made).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.chromium import chromium
from tests.viewer.trained import plant_web_run, write_runs

SHOTS = os.environ.get("HORIZONRL_VIEWER_SHOTS")
REUSE = os.environ.get("HORIZONRL_VIEWER_TEST_RUNS")
"""A folder of runs `write_runs` wrote before, to rerun these tests without training again (copied)."""


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("viewer") / "runs"
    if REUSE:
        shutil.copytree(REUSE, base, ignore=shutil.ignore_patterns("web", "live"))
    else:
        write_runs(base)
    plant_web_run(base)
    live = base / "live"  # a run "still training": the test appends to its metrics
    live.mkdir()
    shutil.copy(base / "fixed" / "config.yaml", live / "config.yaml")
    shutil.copy(base / "fixed" / "metrics.jsonl", live / "metrics.jsonl")
    return base


@pytest.fixture(scope="module")
def server(root: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    err = tmp_path_factory.mktemp("server") / "stderr.txt"
    cmd = [sys.executable, "-m", "horizonrl.cli", "view", str(root), "--port", "0"]
    with (
        err.open("w") as stderr,
        subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=stderr, text=True) as proc,
    ):
        try:
            assert proc.stdout is not None
            line = proc.stdout.readline()
            assert " at http://127.0.0.1:" in line, (line, err.read_text())
            yield line.rsplit(" at ", 1)[1].strip()
        finally:
            proc.terminate()
            proc.wait(timeout=10)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with chromium() as b:
        yield b


@pytest.fixture
def page(server: str, browser: Any) -> Iterator[Any]:  # server first: its runs train under asyncio.run,
    # which cannot start once Playwright's sync API runs its own event loop
    context = browser.new_context(viewport={"width": 1200, "height": 900})
    p = context.new_page()
    errors: list[str] = []
    p.on("pageerror", lambda exc: errors.append(str(exc)))
    p.base = server  # type: ignore[attr-defined]
    yield p
    context.close()
    assert not errors, errors  # no script error on any page


def open_page(page: Any, hash_: str, wait_for: str, query: str = "") -> None:
    page.goto("about:blank")  # a fresh load: a hash change alone would leave the old page up for a while
    page.goto(f"{page.base}{query}#{hash_}")
    page.wait_for_selector(wait_for, timeout=20_000)


def shoot(page: Any, tmp_path: Path, name: str) -> None:
    page.screenshot(path=str(tmp_path / f"{name}.png"), full_page=True)
    if SHOTS:
        Path(SHOTS).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(SHOTS) / f"viewer_{name}.png"), full_page=False)


def coloured_pixels(png: bytes, rgb: tuple[int, int, int], tol: int = 40) -> int:
    from io import BytesIO

    from PIL import Image  # Pillow comes with tensorboard, a core dependency

    image = Image.open(BytesIO(png)).convert("RGB")
    return sum(1 for px in image.getdata() if all(abs(a - b) <= tol for a, b in zip(px, rgb, strict=True)))


def test_run_list_shows_every_run_with_its_numbers(page, root, tmp_path):
    open_page(page, "/", "tr[data-run='stepwise']")
    rows = {r.get_attribute("data-run"): r for r in page.query_selector_all("tbody tr[data-run]")}
    assert {"stepwise", "fixed", "babyai", "web", "live"} <= set(rows)
    cells = [c.inner_text() for c in rows["stepwise"].query_selector_all("td")]
    assert cells[1:4] == ["stepwise", "train", "3"]  # run, kind, last step
    report = json.loads((root / "stepwise" / "eval" / "final" / "report.json").read_text())
    assert (
        rows["stepwise"].query_selector(".eval-success").inner_text() == f"{100 * report['success_rate']:.1f}"
    )
    shoot(page, tmp_path, "runs")


def test_run_page_plots_curves_with_points(page, tmp_path):
    open_page(page, "/run/stepwise", "svg.chart[data-metric='success/mean'] circle.dot")
    chart = page.locator("figure[data-metric='success/mean']")
    assert chart.locator("circle.dot").count() == 3  # one point per step
    points = chart.locator("polyline").get_attribute("points").split()
    assert len(points) == 3 and len(set(points)) >= 2
    assert chart.locator("text.tick.y").all_text_contents() == ["0", "0.5", "1"]  # a rate: [0, 1]
    blue = coloured_pixels(chart.locator("svg").screenshot(), (9, 105, 218))
    assert blue > 40, f"only {blue} line pixels drawn"
    cap = page.locator("figure[data-metric='schedule/max_turns'] polyline")
    assert len(cap.get_attribute("points").split()) == 5  # a step line: 3 -> 3 -> 4 has 2 risers
    shoot(page, tmp_path, "run")


def test_a_single_eval_point_gets_a_sane_axis(page):
    open_page(page, "/run/stepwise", "figure[data-metric='eval/success'] circle.dot")
    chart = page.locator("figure[data-metric='eval/success']")
    assert chart.locator("circle.dot").count() == 1
    assert chart.locator("text.tick.y").all_text_contents() == ["0", "0.5", "1"]
    assert chart.locator("text.tick.x").all_text_contents() == ["3"]
    turns = page.locator("figure[data-metric='turns/mean'] text.tick.y").all_text_contents()
    assert float(turns[0]) >= 0 and float(turns[-1]) <= 5


def test_per_family_counts_share_one_chart(root, page, tmp_path):
    """An AgentEvol run over two families: `agentevol/kept` and `eval/success` are each drawn with
    one line for the run's total and one per family, named in the legend."""
    run = root / "evol"
    run.mkdir(exist_ok=True)
    (run / "config.yaml").write_text("algorithm:\n  name: agentevol\n")
    lines = [{"step": 3, "eval/success": 0.25, "eval/success/textcraft": 0.5, "eval/success/babyai": 0.0}]
    for step, (tc, ba) in [(4, (1, 3)), (5, (2, 5))]:
        lines.append({"step": step, "agentevol/kept": tc + ba, "agentevol/kept/textcraft": tc,
                      "agentevol/kept/babyai": ba, "explore/success": 0.5})  # fmt: skip
        lines.append({"step": step, "eval/success": 0.5, "eval/success/textcraft": 0.5,
                      "eval/success/babyai": 0.5})  # fmt: skip
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    open_page(page, "/run/evol", "figure[data-metric='agentevol/kept'] circle.dot")
    kept = page.locator("figure[data-metric='agentevol/kept']")
    assert kept.locator("polyline").count() == 3
    assert kept.locator(".legend .key").all_text_contents() == ["evol", "babyai", "textcraft"]
    assert kept.locator("polyline[data-series='babyai']").get_attribute("points").count(",") == 2
    ys = kept.locator("text.tick.y").all_text_contents()
    assert float(ys[-1]) >= 7  # the total's axis
    evals = page.locator("figure[data-metric='eval/success']")
    assert evals.locator("polyline").count() == 3 and evals.locator("circle.dot").count() == 9
    assert page.locator("figure[data-metric='explore/success'] polyline").count() == 1  # no families
    shoot(page, tmp_path, "agentevol")


def test_replay_shows_observation_and_action_and_steps_with_the_keyboard(page, tmp_path):
    open_page(page, "/run/stepwise/src/step_3/0", "section.turn.current")
    first = page.locator("section.turn").first
    assert "Crafting commands" in first.locator(".block.obs pre").inner_text()
    action = first.locator(".block.action pre").inner_text()
    assert action.startswith("get ")
    assert page.locator(".counter").inner_text().startswith("turn 1 / ")
    assert page.locator("section.turn").nth(1).is_hidden()
    page.keyboard.press("ArrowRight")
    assert page.locator(".counter").inner_text().startswith("turn 2 / ")
    assert page.locator("section.turn").nth(1).is_visible()
    assert "turn=2" in page.url
    page.keyboard.press("End")
    assert page.locator(".counter").inner_text().startswith("end (")
    page.keyboard.press("Home")
    assert page.locator(".counter").inner_text().startswith("turn 1 / ")
    shoot(page, tmp_path, "replay")


def test_token_view_highlights_the_sampled_tokens_and_colours_by_advantage(page, server, tmp_path):
    import httpx

    tokens = httpx.get(f"{server}api/runs/stepwise/trajectories/step_3/0/tokens", timeout=30).json()
    open_page(page, "/run/stepwise/src/step_3/0?tokens=1", ".tokens .tok")
    assert page.locator(".tokens .tok.smp").count() == sum(tokens["loss_mask"])
    assert page.locator(".tokens .tok.ctx").count() == len(tokens["loss_mask"]) - sum(tokens["loss_mask"])
    assert tokens["pieces"] and "Step" in page.locator(".tokens").inner_text()  # decoded, not ids
    assert "Update data saved" in page.locator(".update-data").inner_text()
    page.select_option("select.colour-by", "advantages")
    sampled = page.locator(".tokens .tok.smp").first
    assert "advantage" in sampled.get_attribute("title")
    assert sampled.evaluate("el => getComputedStyle(el).backgroundColor") != "rgba(0, 0, 0, 0)"
    shoot(page, tmp_path, "tokens")


def test_filters_narrow_the_trajectory_list(page):
    open_page(page, "/run/stepwise/src/step_3", "tbody tr.link")
    everything = page.locator("tbody tr.link").count()
    page.select_option(".filters select >> nth=0", "true")  # solved only
    page.wait_for_function(f"document.querySelectorAll('tbody tr.link').length < {everything}")
    solved = page.locator("tbody tr.link")
    assert 0 < solved.count() < everything
    assert all("solved" in t for t in solved.all_text_contents())


def test_compare_overlays_runs_by_step_and_by_sampled_tokens(page, tmp_path):
    open_page(page, "/compare?runs=stepwise,fixed&metric=reward/mean", ".compare-charts svg polyline")
    main = page.locator(".compare-charts figure").first
    assert {p.get_attribute("data-series") for p in main.locator("polyline").all()} == {"stepwise", "fixed"}
    assert main.locator("circle.dot").count() == 3 + 2
    caps = page.locator(".compare-charts figure[data-metric='schedule/max_turns'] polyline.step")
    assert caps.count() == 2
    stage = page.locator(
        ".compare-charts figure[data-metric='curriculum/stage'] polyline.step[data-series='fixed']"
    )
    assert len(stage.get_attribute("points").split()) == 3  # the curriculum's stage 1 -> 2: one riser
    by_step = main.locator("text.tick.x").all_text_contents()
    page.select_option("select.x-axis", "tokens")
    page.wait_for_function(  # the page is redrawn with the new axis
        "[...document.querySelectorAll('.compare-charts figure text.tick')]"
        ".some((t) => t.textContent === 'sampled tokens')"
    )
    by_tokens = page.locator(".compare-charts figure").first.locator("text.tick.x").all_text_contents()
    assert by_tokens != by_step and int(by_tokens[-1].rstrip("k")) > 3
    page.wait_for_selector("table.compare tbody tr")  # the reports load after the charts
    rows = page.locator("table.compare tbody tr")
    assert rows.count() >= 2 and rows.last.get_attribute("data-category") == "all"
    shoot(page, tmp_path, "compare")


def test_groups_page_shows_samples_side_by_side_with_the_first_difference(page, tmp_path):
    open_page(page, "/run/stepwise/groups/step_3", "table.groups tbody tr")
    assert page.locator("table.groups tbody tr").count() == 2  # data.batch_size items
    page.locator("table.groups tbody tr", has_text="reward variance").first.locator("a").click()
    page.wait_for_selector("table.group")
    assert page.locator("table.group th.sample").count() == 2
    diverged = page.locator("table.group tr.turn-row.diverged")
    assert diverged.count() == 1 and diverged.get_attribute("data-turn") == "1"  # turn 2
    cells = diverged.locator("td.act.diverged code").all_text_contents()
    assert "inventory" in cells and len(set(cells)) == 2
    advantages = page.locator("table.group tr.advantage td").all_text_contents()
    assert len(advantages) == 2 and all(a not in ("–", "not in update") for a in advantages)
    assert float(advantages[0]) > float(advantages[1])  # sample 0 (the expert's plan) solved it
    shoot(page, tmp_path, "groups")


def test_planted_logprob_mismatch_is_flagged_in_the_token_view(page, root, tmp_path):
    open_page(page, "/run/fixed/src/step_1/0?tokens=1", ".mismatch-count")
    assert page.locator(".mismatch-count").inner_text().startswith("0 sampled tokens")  # the real run agrees
    path = root / "fixed" / "trajectories" / "token_stats" / "step_1.jsonl"
    lines = path.read_text().splitlines()
    row = json.loads(lines[0])
    row["old_logprobs"][2] -= 2.0  # the learner now disagrees with the rollout on one token
    position = row["spans"][0][0] + 2
    path.write_text("\n".join([json.dumps(row), *lines[1:]]) + "\n")
    open_page(page, "/run/fixed/src/step_1/0?tokens=1&colour=logprob_diff", ".mismatch-count")
    assert page.locator(".mismatch-count").inner_text().startswith("1 sampled token where")
    flagged = page.locator(".tokens .tok.mismatch")
    assert flagged.count() == 1 and flagged.get_attribute("data-i") == str(position)
    assert "learner − rollout logprob -2" in flagged.get_attribute("title")
    flagged.scroll_into_view_if_needed()
    shoot(page, tmp_path, "mismatch")


def test_babyai_replay_draws_the_grid_the_agent_saw(page, tmp_path):
    open_page(page, "/run/babyai/src/step_1/0", "section.turn.current svg.grid-view")
    grid = page.locator("section.turn.current svg.grid-view")
    assert grid.locator("rect.cell").count() == 49  # 7 x 7 view
    assert grid.locator("rect.cell:not(.kunseen)").count() > 0 and grid.locator("polygon.agent").count() == 1
    before = grid.inner_html()
    page.keyboard.press("ArrowRight")  # after "turn left" the view has changed
    assert page.locator("section.turn.current svg.grid-view").inner_html() != before
    shoot(page, tmp_path, "babyai")


def test_web_replay_shows_the_saved_screenshot_and_nothing_outside_the_root(page, server, tmp_path):
    import httpx

    open_page(page, "/run/web/src/trajectories/0", "section.turn.current img.screenshot")
    img = page.locator("section.turn.current img.screenshot")
    page.wait_for_function("document.querySelector('section.turn.current img.screenshot').naturalWidth > 0")
    assert img.evaluate("el => [el.naturalWidth, el.naturalHeight]") == [64, 40]
    outside = httpx.get(f"{server}api/runs/web/trajectories/trajectories/0/screenshot/2", timeout=10)
    assert outside.status_code == 404 and "inside" in outside.json()["error"]["message"]
    shoot(page, tmp_path, "web")


def test_a_run_still_training_updates_without_reloading(page, root):
    open_page(page, "/run/live", "figure[data-metric='reward/mean'] circle.dot", query="?poll_ms=300")
    dots = page.locator("figure[data-metric='reward/mean'] circle.dot")
    assert dots.count() == 2
    page.evaluate("window.__same_page = true")
    with (root / "live" / "metrics.jsonl").open("a") as f:
        f.write(json.dumps({"step": 3, "reward/mean": 0.5, "schedule/max_turns": 2.0}) + "\n")
    page.wait_for_function(
        "document.querySelectorAll(\"figure[data-metric='reward/mean'] circle.dot\").length === 3",
        timeout=15_000,
    )
    assert page.evaluate("window.__same_page") is True  # no reload
    assert page.locator(".step-count").inner_text() == "3 steps"
