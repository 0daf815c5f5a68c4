"""The dashboard in a real browser: headless Chromium driven by Selenium.

Uses Debian's ``chromium`` and ``chromium-driver`` (``.ci/run`` installs them when it
runs as root with apt); skips, saying what is missing, where they are not installed.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import JAEGER, record

from gateway.testing.servers import ServerThread

pytestmark = pytest.mark.browser

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"
# As root in a closed network: no sandbox, no GPU, none of Chromium's background calls.
FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-dev-shm-usage", "--headless=new", "--window-size=1280,1000"]


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    for path, package in ((CHROMIUM, "chromium"), (CHROMEDRIVER, "chromium-driver")):
        if not Path(path).exists():
            pytest.skip(f"no browser: {path} is missing (apt-get install {package})")
    webdriver = pytest.importorskip(
        "selenium.webdriver", reason="selenium is not installed (pip install -e '.[dev]')")
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    profile = tempfile.mkdtemp(prefix="chromium-", dir=tmp_path_factory.mktemp("browser"))
    for flag in [*FLAGS, f"--user-data-dir={profile}"]:
        options.add_argument(flag)
    driver = webdriver.Chrome(options=options, service=Service(executable_path=CHROMEDRIVER))
    try:
        yield driver
    finally:
        driver.quit()


def test_overview_filter_list_and_record_in_a_browser(browser: Any, dashboard: ServerThread,
                                                      tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.select import Select
    from selenium.webdriver.support.wait import WebDriverWait

    wait = WebDriverWait(browser, 20)
    browser.get(dashboard.url + "/")
    wait.until(ec.presence_of_element_located((By.CSS_SELECTOR, "svg.chart")))
    charts = browser.find_elements(By.CSS_SELECTOR, "svg.chart")
    assert len(charts) == 2 and charts[0].size["width"] == 900 and charts[0].size["height"] > 100
    # The stylesheet applied (no inline style: the CSP allows only the app's own sheet).
    header = browser.find_element(By.TAG_NAME, "header")
    assert header.value_of_css_property("background-color") == "rgba(31, 41, 55, 1)"
    assert "61 records" in browser.find_element(By.TAG_NAME, "main").text

    Select(browser.find_element(By.NAME, "verdict")).select_by_value("fail")
    browser.find_element(By.CSS_SELECTOR, "form.filters button").click()
    wait.until(ec.url_contains("verdict=fail"))
    assert "12 records" in browser.find_element(By.TAG_NAME, "main").text

    browser.find_element(By.LINK_TEXT, "list them").click()
    wait.until(ec.url_contains("/records?"))
    rows = browser.find_elements(By.CSS_SELECTOR, "main table tr")
    assert len(rows) == 13  # header + 12 failing records
    first = rows[1].find_element(By.TAG_NAME, "a")
    first.click()
    wait.until(ec.presence_of_element_located((By.PARTIAL_LINK_TEXT, "open in Jaeger")))
    link = browser.find_element(By.PARTIAL_LINK_TEXT, "open in Jaeger").get_attribute("href")
    assert link.startswith(JAEGER + "/trace/")
    assert "Candidate strict" in browser.find_element(By.TAG_NAME, "main").text
    assert browser.save_screenshot(str(tmp_path / "record.png"))
    assert record(3)["audit_id"][8:] in browser.current_url  # a record of the fixture
