"""The evaluation report in a real browser: Debian's Chromium, headless, driven by Selenium
through Debian's chromedriver (SPEC §14).

Every page of a report loads from a file URL with no console error; every link and image in it
resolves to a file of the report (never outside it, never the network); every table has header
cells; no page holds a script (readable without JavaScript); at a phone's width no page scrolls
sideways; a screenshot of each page at a desktop and a phone width is kept
(``$DOTLAB_TEST_ARTIFACTS/screenshots``, else the test's folder).

The reports: one written here from made-up results (the pages' every part: badges given and
not, a claim over many runs with its plot, logs, a signed verdict), and the one that
``DOTLAB_TEST_REPORT`` names: CI sets it to the report of tests/integration/test_evaluate.py
on the Debian 13 root's cluster with the real Apptainer, after that suite.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import unquote, urlparse

import pytest

from dotlab_hpc.evaluate.badges import Badge, ClaimResult, TargetRow
from dotlab_hpc.evaluate.report import ArtifactReport, copy_plots, write_report

CHROMIUM = Path("/usr/bin/chromium")
DRIVER = Path("/usr/bin/chromedriver")
SIZES = {"desktop": (1280, 900), "phone": (390, 844)}
# a 1x1 PNG: the smallest image a page can show
PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360f8cfc0f01f0005000201a3c1e1"
    "5d0000000049454e44ae426082"
)


def _require_browser() -> None:
    missing = [str(p) for p in (CHROMIUM, DRIVER) if not p.exists()]
    if missing:
        message = f"{', '.join(missing)} missing: apt-get install chromium chromium-driver"
        if os.environ.get("CI"):
            pytest.fail(message, pytrace=False)
        pytest.skip(message)


@pytest.fixture(scope="module")
def driver() -> Iterator[object]:
    _require_browser()
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = str(CHROMIUM)
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"):
        opts.add_argument(arg)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    d = webdriver.Chrome(options=opts, service=Service(str(DRIVER)))
    d.set_page_load_timeout(30)
    try:
        yield d
    finally:
        d.quit()


def _made_up_report(root: Path) -> Path:
    """A report of three artifacts written by the report writer itself."""
    report = root / "report"
    run = report / "runs" / "g" / "run-1"
    run.mkdir(parents=True)
    for name in ("record.json", "slurm.out", "container.out", "probe.out"):
        (run / name).write_text("{}\n" if name.endswith(".json") else "a log line\n")
    (report / "verdicts").mkdir()
    (report / "verdicts" / "good.dsse.json").write_text("{}\n")
    plot = root / "acc.png"
    plot.write_bytes(PNG)
    row = TargetRow(
        name="acc",
        expected=0.9,
        tolerance="abs 0.01",
        authors=0.9,
        here=0.9,
        authors_within=True,
        here_within=True,
    )
    claim = ClaimResult(
        bundle=0,
        given="bundle",
        claim="acc-<b>&",
        authors_outcome="reproduced",
        outcome="reproduced",
        run_dir=str(run),
        targets=(row,),
        runs=5,
        time_s=75.0,
    )
    given = tuple(Badge(name=n, given=True) for n in ("Available", "Functional", "Reproduced"))
    missed = (
        Badge(name="Available", given=False, reasons=("bundle: hashes: record.json differs",)),
        Badge(name="Functional", given=False, reasons=("not run: the artifact failed its check",)),
        Badge(name="Reproduced", given=False, reasons=("not run",)),
    )
    arts = [
        ArtifactReport(
            name="good",
            note="shepherd: <script>alert(1)</script>",
            badges=given,
            claims=(claim,),
            check_problems=(),
            isolation=("apptainer on 1.4.5: isolation held", "held: network, home"),
            plots=copy_plots(report, "good", [plot]),
            verdict="verdicts/good.dsse.json",
            signed=True,
            bundles=1,
        ),
        ArtifactReport(
            name="tampered",
            note="",
            badges=missed,
            claims=(),
            check_problems=("bundle: hashes: record.json differs",),
            isolation=(),
            plots=(),
            verdict=None,
            signed=False,
            bundles=1,
        ),
    ]
    write_report(report, arts, track="made-up", summary={"artifacts": 2})
    return report


def _reports(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    reports = [_made_up_report(tmp_path_factory.mktemp("report"))]
    named = os.environ.get("DOTLAB_TEST_REPORT")
    if named:
        path = Path(named)
        assert (path / "index.html").is_file(), f"DOTLAB_TEST_REPORT={named}: no index.html there"
        reports.append(path)
    return reports


@pytest.fixture(scope="module")
def reports(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    return _reports(tmp_path_factory)


def _pages(report: Path) -> list[Path]:
    return [report / "index.html", *sorted((report / "artifacts").glob("*.html"))]


def _shots(tmp_path: Path) -> Path:
    where = os.environ.get("DOTLAB_TEST_ARTIFACTS")
    folder = Path(where) / "screenshots" if where else tmp_path / "screenshots"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _target(url: str, page: Path, report: Path) -> Path:
    """The file a link or image of ``page`` names; fails for one outside the report."""
    parsed = urlparse(url)
    assert parsed.scheme == "file", f"{page.name}: {url} is not a file of the report"
    target = Path(unquote(parsed.path)).resolve()
    assert target.is_relative_to(report.resolve()), f"{page.name}: {url} leaves the report"
    return target


def test_every_page_loads_clean_and_every_link_and_image_is_a_file_of_the_report(
    driver: object, reports: list[Path], tmp_path: Path
) -> None:
    from selenium.webdriver import Chrome
    from selenium.webdriver.common.by import By

    assert isinstance(driver, Chrome)
    shots = _shots(tmp_path)
    for report in reports:
        for page in _pages(report):
            html = page.read_text()
            assert not re.search(r"<script", html, re.I), f"{page}: holds a script"
            for size, (w, h) in SIZES.items():
                driver.set_window_size(w, h)
                driver.get(page.as_uri())
                logs = driver.get_log("browser")  # type: ignore[no-untyped-call]
                errors = [e for e in logs if e["level"] == "SEVERE"]
                assert not errors, f"{page}: console errors {errors}"
                tables = driver.find_elements(By.TAG_NAME, "table")
                for t in tables:
                    assert t.find_elements(By.TAG_NAME, "th"), f"{page}: a table without th"
                if size == "phone":
                    wide = driver.execute_script(
                        "return document.documentElement.scrollWidth - window.innerWidth"
                    )
                    assert wide <= 1, f"{page}: scrolls sideways by {wide} px on a phone"
                name = f"{report.parent.name}-{report.name}-{page.stem}-{size}.png"
                driver.save_screenshot(str(shots / name))
            for a in driver.find_elements(By.CSS_SELECTOR, "a[href]"):
                href = a.get_attribute("href") or ""
                assert _target(href, page, report).is_file(), f"{page.name}: {href} is missing"
            for img in driver.find_elements(By.TAG_NAME, "img"):
                src = img.get_attribute("src") or ""
                assert _target(src, page, report).is_file(), f"{page.name}: {src} is missing"
                loaded = driver.execute_script("return arguments[0].naturalWidth", img)
                assert loaded > 0, f"{page.name}: {src} did not load"


def test_what_the_authors_wrote_is_text_never_markup(driver: object, reports: list[Path]) -> None:
    from selenium.webdriver import Chrome
    from selenium.webdriver.common.by import By

    assert isinstance(driver, Chrome)
    made_up = reports[0]
    driver.get((made_up / "artifacts" / "good.html").as_uri())
    body = driver.find_element(By.TAG_NAME, "body").text
    assert "shepherd: <script>alert(1)</script>" in body
    assert "Claim acc-<b>&" in body
    assert not driver.find_elements(By.CSS_SELECTOR, "main script, main b")


def test_the_reports_kept_for_later_are_whole(reports: list[Path], tmp_path: Path) -> None:
    for report in reports:
        for name in ("index.html", "track.json", "track.csv"):
            assert (report / name).is_file(), f"{report}: no {name}"
    if os.environ.get("DOTLAB_TEST_ARTIFACTS"):
        shutil.copytree(
            reports[0],
            Path(os.environ["DOTLAB_TEST_ARTIFACTS"]) / "made-up-report",
            dirs_exist_ok=True,
        )
