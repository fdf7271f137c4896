"""A headless Chromium for the web view's tests: Debian's ``chromium`` and ``chromedriver`` (scripts/setup installs
them; nothing is downloaded), driven by selenium from a thread so the event loop of the services under test runs
on. ``Page`` waits on what the page shows, with a timeout, as the bus tests wait on events."""
from __future__ import annotations

import asyncio
import shutil
from pathlib import Path
from typing import Any

import pytest

# The flags this machine needs (closed network: no background fetches; root: no sandbox).
FLAGS = ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-dev-shm-usage", "--window-size=1400,1100")


def chrome(profile: Path) -> Any:
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    binary, driver = shutil.which("chromium"), shutil.which("chromedriver")
    if not (binary and driver):
        pytest.skip("Debian's chromium and chromium-driver are not installed (scripts/setup installs them)")
    options = Options()
    options.binary_location = binary
    for flag in (*FLAGS, f"--user-data-dir={profile}"):
        options.add_argument(flag)
    return webdriver.Chrome(options=options, service=Service(executable_path=driver))


class Page:
    def __init__(self, driver: Any, url: str, timeout: float = 30.0) -> None:
        self.driver, self.url, self.timeout = driver, url, timeout

    async def open(self) -> None:
        await asyncio.to_thread(self.driver.get, self.url)

    async def js(self, script: str) -> Any:
        return await asyncio.to_thread(self.driver.execute_script, script)

    async def wait_for_js(self, script: str, what: str, timeout: float | None = None) -> Any:
        """The first truthy value ``script`` returns (polled in the browser); AssertionError after ``timeout``."""
        from selenium.common.exceptions import TimeoutException
        from selenium.webdriver.support.ui import WebDriverWait

        wait = WebDriverWait(self.driver, timeout or self.timeout, poll_frequency=0.1)
        try:
            return await asyncio.to_thread(wait.until, lambda d: d.execute_script(script))
        except TimeoutException:
            shown = await self.text("body")
            raise AssertionError(f"the page did not show {what} within {timeout or self.timeout}s; "
                                 f"it shows:\n{shown}") from None

    async def text(self, selector: str) -> str:
        return await self.js(f"const e = document.querySelector({selector!r}); return e ? e.innerText.trim() : '';")

    async def wait_text(self, selector: str, expected: str) -> str:
        return await self.wait_for_js(
            f"const e = document.querySelector({selector!r});"
            f"return e && e.offsetParent !== null && e.innerText.includes({expected!r}) ? e.innerText : null;",
            f"{expected!r} in {selector}")

    async def wait_rows(self, n: int) -> None:
        await self.wait_for_js(f"return document.querySelectorAll('#ops tbody tr').length === {n};", f"{n} op rows")

    async def wait_status(self, op_id: str, status: str) -> None:
        await self.wait_for_js(
            f"const r = document.querySelector(\"#ops tbody tr[data-op-id='{op_id}']\");"
            f"return r && r.dataset.status === {status!r};", f"op {op_id} {status}")

    async def click(self, selector: str) -> None:
        await self.js(f"document.querySelector({selector!r}).click();")
