"""A headless Chromium for the viewer screenshots: Selenium driving Debian's chromium with Debian's chromedriver
(never one Selenium Manager would download), a page of a fixed size so every screenshot is the same, nothing
fetched from beyond this machine, and waits on what the page shows."""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

CHROMEDRIVER = shutil.which("chromedriver")
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
MISSING = None if (CHROMEDRIVER and CHROMIUM) else (
    "the viewer screenshots need Debian's chromium and chromium-driver: "
    "apt-get install -y chromium chromium-driver fonts-noto-cjk")
#: the page's size in CSS pixels, and so every screenshot's
WINDOW = (1400, 900)
#: a folder where the screenshots are also kept under their docs names (phoenix-traces.png, ...), when set
SCREENSHOTS_DIR = "GROUNDTRACE_SCREENSHOTS_DIR"
# innermost elements matching a selector whose shown text is exactly a text
INNERMOST_WITH_TEXT = """
    const [css, text, root] = arguments;
    const hits = [...(root || document).querySelectorAll(css)].filter(e => e.innerText && e.innerText.trim() === text);
    return hits.filter(e => !hits.some(o => o !== e && e.contains(o)));"""


class Browser:
    """One headless Chromium page; each wait lasts at most ``timeout_s`` unless told otherwise."""

    def __init__(self, driver: Any, timeout_s: float) -> None:
        self.driver = driver
        self.timeout_s = timeout_s

    def open(self, url: str) -> None:
        self.driver.get(url)

    @property
    def url(self) -> str:
        return self.driver.current_url

    def text(self, element: Any = None) -> str:
        """The text the page (or ``element``) shows: innerText, what a reader sees, not the markup."""
        shown = self.driver.execute_script(
            "const e = arguments[0] || document.body; return e ? e.innerText : ''", element)
        return shown or ""

    def js(self, script: str, *args: Any) -> Any:
        return self.driver.execute_script(script, *args)

    def until(self, condition: Callable[[Browser], Any], what: str, timeout_s: float | None = None,
              required: bool = True) -> Any:
        """Wait until ``condition(self)`` is truthy and return it. Past the wait: fail the test naming ``what`` and
        what the page showed, or return None when not ``required``."""
        from selenium.common.exceptions import NoSuchElementException, StaleElementReferenceException

        deadline = time.monotonic() + (self.timeout_s if timeout_s is None else timeout_s)
        while True:
            try:
                found = condition(self)
            except (StaleElementReferenceException, NoSuchElementException):  # a page mid-render
                found = None
            if found:
                return found
            if time.monotonic() > deadline:
                if not required:
                    return None
                pytest.fail(f"{self.url} never showed {what}; it showed:\n{self.text()[:3000]}")
            time.sleep(0.25)

    def wait_for_text(self, *texts: str, timeout_s: float | None = None) -> str:
        """Wait until the page shows every one of ``texts``; its text then."""
        def shown(b: Browser) -> str | None:
            text = b.text()
            return text if all(t in text for t in texts) else None

        return self.until(shown, " and ".join(repr(t) for t in texts), timeout_s)

    def find(self, css: str, root: Any = None) -> list[Any]:
        from selenium.webdriver.common.by import By

        return (root or self.driver).find_elements(By.CSS_SELECTOR, css)

    def press(self, element: Any) -> bool:
        """Click ``element`` as a pointer does (React Aria's buttons listen to pointer events, not to a scripted
        click); False if it is hidden or covered by another."""
        from selenium.common.exceptions import ElementClickInterceptedException, ElementNotInteractableException

        if not element.is_displayed():
            return False
        self.js("arguments[0].scrollIntoView({block: 'center', inline: 'nearest'})", element)
        try:
            element.click()
        except (ElementClickInterceptedException, ElementNotInteractableException):
            return False
        return True

    def click(self, css: str, root: Any = None, timeout_s: float | None = None, required: bool = True) -> bool:
        """Click the first shown element matching ``css`` (under ``root``), once there is one."""
        def pressed(b: Browser) -> bool:
            return any(b.press(hit) for hit in b.find(css, root))

        return bool(self.until(pressed, f"an element {css!r}", timeout_s, required))

    def click_text(self, text: str, css: str = "*", root: Any = None, timeout_s: float | None = None,
                   required: bool = True) -> bool:
        """Click the innermost element matching ``css`` whose shown text is exactly ``text``."""
        def pressed(b: Browser) -> bool:
            return any(b.press(hit) for hit in b.js(INNERMOST_WITH_TEXT, css, text, root))

        return bool(self.until(pressed, f"a clickable {text!r}", timeout_s, required))

    def hover(self, element: Any) -> None:
        from selenium.webdriver.common.action_chains import ActionChains

        self.js("arguments[0].scrollIntoView({block: 'center', inline: 'nearest'})", element)
        ActionChains(self.driver).move_to_element(element).perform()

    def point_at(self, x: int, y: int) -> None:
        """Move the pointer to (x, y) of the page (away from what it hovered: its tooltips close)."""
        from selenium.webdriver.common.actions.action_builder import ActionBuilder

        actions = ActionBuilder(self.driver)
        actions.pointer_action.move_to_location(x, y)
        actions.perform()

    def drag(self, element: Any, dx: int, dy: int) -> None:
        """Drag ``element`` (a panel's resize handle) by (dx, dy) pixels."""
        from selenium.webdriver.common.action_chains import ActionChains

        ActionChains(self.driver).drag_and_drop_by_offset(element, dx, dy).perform()

    def key(self, name: str) -> None:
        """Press a key (Selenium's Keys name: ESCAPE, ENTER...) where the focus is."""
        from selenium.webdriver.common.action_chains import ActionChains
        from selenium.webdriver.common.keys import Keys

        ActionChains(self.driver).send_keys(getattr(Keys, name)).perform()

    def settle(self, seconds: float = 0.75) -> None:
        """Let animations and late renders finish before a screenshot."""
        time.sleep(seconds)

    def screenshot(self, path: Path, name: str | None = None) -> Path:
        """Save the page to ``path``; also to $GROUNDTRACE_SCREENSHOTS_DIR/``name`` when that is set."""
        path.parent.mkdir(parents=True, exist_ok=True)
        assert self.driver.save_screenshot(str(path)), f"no screenshot written to {path}"
        folder = os.environ.get(SCREENSHOTS_DIR)
        if folder and name:
            Path(folder).mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, Path(folder) / name)
        return path


@contextmanager
def headless_chromium(profile: Path, timeout_s: float = 30) -> Iterator[Browser]:
    """A headless Chromium whose page is exactly WINDOW; quit after."""
    if MISSING:
        pytest.skip(MISSING)
    pytest.importorskip("selenium", reason="the viewer screenshots need selenium (the test extra)")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 # the viewers' pages ask for web fonts, PyPI and GitHub: nothing leaves this machine (no name is
                 # resolved, and any address but loopback goes to a proxy where nothing listens)
                 "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1", "--proxy-server=http://127.0.0.1:9",
                 "--proxy-bypass-list=127.0.0.1", "--hide-scrollbars", "--force-device-scale-factor=1",
                 "--lang=en-US", f"--window-size={WINDOW[0]},{WINDOW[1]}", f"--user-data-dir={profile}"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)
    try:
        driver.set_page_load_timeout(timeout_s)
        # the window's size is not the page's (headless or not): the page gets exactly WINDOW
        driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                               {"width": WINDOW[0], "height": WINDOW[1], "deviceScaleFactor": 1, "mobile": False})
        yield Browser(driver, timeout_s)
    finally:
        driver.quit()
