"""Proof for docs/design/audit-store.md: a real headless Chromium driven from pytest.

    .venv/bin/pip install playwright selenium      # no `playwright install`: it downloads
    apt-get install -y chromium chromium-driver    # Debian's build: /usr/bin/chromium{,driver}
    .venv/bin/python -m pytest -q bench/browser_proof -s

Not part of the test suite (``testpaths`` is ``tests``). A starlette page is served on
loopback (uvicorn, ``gateway.testing.servers.ServerThread``); each driver loads it, clicks a link
to a record page, reads text, checks an inline SVG chart is laid out, takes a
screenshot, and prints how long the browser took to start and the page steps.

- Playwright (PyPI ``playwright``) drives Debian's Chromium through
  ``executable_path``; it makes a fresh profile itself (``launch`` refuses
  ``--user-data-dir``) and adds ``--no-sandbox`` unless ``chromium_sandbox=True``.
- Selenium (PyPI ``selenium``) drives it through Debian's ``/usr/bin/chromedriver``;
  giving both paths keeps Selenium Manager from looking for (downloading) a driver.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse
from starlette.routing import Route

from gateway.testing.servers import ServerThread

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"
# As root in a closed network: no sandbox (needs user namespaces), no GPU, and none of
# the background connections Chromium makes at start (refused here, slow to fail).
FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-dev-shm-usage"]

PAGE = """<!doctype html><html><head><title>audit</title></head><body>
<h1>Shadow audit</h1>
<svg id="chart" width="300" height="100" role="img" aria-label="verdicts per hour">
  <rect x="10" y="40" width="40" height="60" fill="#4a8"><title>pass 60</title></rect>
  <rect x="60" y="80" width="40" height="20" fill="#d54"><title>fail 20</title></rect>
</svg>
<table><tr><td><a id="rec" href="/record/6927c792">6927c792</a></td><td>fail</td></tr></table>
</body></html>"""


async def index(request: Request) -> HTMLResponse:
    return HTMLResponse(PAGE)


async def record(request: Request) -> HTMLResponse:
    rid = request.path_params["rid"]
    return HTMLResponse(f"<!doctype html><html><head><title>record {rid}</title></head><body>"
                        f"<h1 id='title'>Record {rid}</h1><p id='verdict'>verdict: fail</p>"
                        f"</body></html>")


@pytest.fixture(scope="module")
def site() -> Iterator[str]:
    app = Starlette(routes=[Route("/", index), Route("/record/{rid}", record)])
    with ServerThread(app) as server:
        yield server.url


def _need(path: str) -> None:
    if not Path(path).exists():
        pytest.skip(f"{path} not installed (apt-get install chromium chromium-driver)")


def test_playwright_drives_debian_chromium(site: str, tmp_path: Path) -> None:
    _need(CHROMIUM)
    sync_api = pytest.importorskip("playwright.sync_api")
    t0 = time.perf_counter()
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=FLAGS)
        started = time.perf_counter() - t0
        page = browser.new_page()
        t1 = time.perf_counter()
        page.goto(site + "/")
        box = page.locator("#chart").bounding_box()
        assert box is not None and box["width"] == 300
        page.click("#rec")
        page.wait_for_url("**/record/6927c792")
        assert page.text_content("#title") == "Record 6927c792"
        shot = tmp_path / "playwright.png"
        page.screenshot(path=str(shot), full_page=True)
        steps = time.perf_counter() - t1
        version = browser.version
        browser.close()
    assert shot.stat().st_size > 1000 and shot.read_bytes()[:4] == b"\x89PNG"
    print(f"\nplaywright: chromium {version}: start {started:.2f} s, "
          f"load+click+screenshot {steps:.2f} s, total {time.perf_counter() - t0:.2f} s")


def test_selenium_drives_debian_chromium(site: str, tmp_path: Path) -> None:
    _need(CHROMIUM)
    _need(CHROMEDRIVER)
    webdriver = pytest.importorskip("selenium.webdriver")
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions
    from selenium.webdriver.support.wait import WebDriverWait

    profile = tempfile.mkdtemp(prefix="chromium-", dir=tmp_path)
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in [*FLAGS, "--headless=new", f"--user-data-dir={profile}"]:
        options.add_argument(flag)
    t0 = time.perf_counter()
    driver = webdriver.Chrome(options=options, service=Service(executable_path=CHROMEDRIVER))
    try:
        started = time.perf_counter() - t0
        t1 = time.perf_counter()
        driver.get(site + "/")
        assert driver.find_element(By.ID, "chart").size["width"] == 300
        driver.find_element(By.ID, "rec").click()
        WebDriverWait(driver, 10).until(expected_conditions.url_contains("/record/6927c792"))
        assert driver.find_element(By.ID, "title").text == "Record 6927c792"
        shot = tmp_path / "selenium.png"
        assert driver.save_screenshot(str(shot))
        steps = time.perf_counter() - t1
        version = driver.capabilities.get("browserVersion")
    finally:
        driver.quit()
    assert shot.read_bytes()[:4] == b"\x89PNG"
    print(f"\nselenium: chromium {version}: start {started:.2f} s, "
          f"load+click+screenshot {steps:.2f} s, total {time.perf_counter() - t0:.2f} s")
