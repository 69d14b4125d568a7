"""Test support: Debian's headless Chromium driven through its chromedriver (Selenium),
screenshots under build/console-screenshots, and small waits bounded in time."""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import pytest

ROOT = Path(__file__).resolve().parents[2]
#: Build output, not committed (.gitignore): one PNG per page the tests look at.
SCREENSHOTS = ROOT / "build" / "console-screenshots"
CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"

T = TypeVar("T")


def chromium(width: int = 1280, height: int = 900) -> Iterator[object]:
    """A headless Chromium session (skips the test when Debian's chromium is missing;
    ``make`` installs it). Its profile is a fresh temporary directory."""
    if not (Path(CHROMIUM).exists() and Path(CHROMEDRIVER).exists()):
        pytest.skip("Debian's chromium and chromium-driver are not installed (make installs them)")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    profile = tempfile.mkdtemp(prefix="openmsmq-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--disable-dev-shm-usage", f"--user-data-dir={profile}",
                 f"--window-size={width},{height}"):  # fmt: skip
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(30)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def shot(driver: object, name: str) -> Path:
    """Save a screenshot of the whole page as ``build/console-screenshots/<name>.png``."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"{name}.png"
    d = driver  # type: ignore[assignment]
    height = d.execute_script("return document.documentElement.scrollHeight")  # type: ignore[attr-defined]
    width = d.execute_script("return window.innerWidth")  # type: ignore[attr-defined]
    d.set_window_size(max(width, 360), min(max(height + 120, 600), 4000))  # type: ignore[attr-defined]
    d.save_screenshot(str(path))  # type: ignore[attr-defined]
    return path


def wait_for(check: Callable[[], T | None], timeout: float = 15.0, what: str = "condition") -> T:
    """Poll ``check`` until it returns something truthy (bounded)."""
    deadline = time.monotonic() + timeout
    last: T | None = None
    while time.monotonic() < deadline:
        try:
            last = check()
        except Exception:  # the page is changing under the check
            last = None
        if last:
            return last
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")
