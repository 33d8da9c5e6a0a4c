"""The compatibility page in a real browser: `torchyard matrix html` opened in headless Chromium (Debian's
chromium and chromium-driver, driven through selenium), three selector queries answered on the page, each
compared with `torchyard lookup --json` (the order of the images that run) and `torchyard explain --json`
(the reason given for each image that does not). scripts/services installs the browser.

The screenshot in docs/ comes from here:
    UPDATE_SCREENSHOT=1 .venv/bin/pytest -m docker tests/integration/test_compat_page.py
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kit import ROOT, torchyard

pytestmark = pytest.mark.docker

CHROMIUM, DRIVER = Path("/usr/bin/chromium"), Path("/usr/bin/chromedriver")
QUERIES = [
    {"driver": "535", "gpu": "GeForce RTX 4090", "python": "", "platform": "linux/amd64"},
    {"driver": "580", "gpu": "NVIDIA H100", "python": "3.13", "platform": "linux/amd64"},  # Debian 13's Python
    {"driver": "570", "gpu": "", "python": "3.10", "platform": "linux/amd64"},
]


@pytest.fixture(scope="module")
def page(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site")
    run = torchyard("matrix", "html", "-o", str(out), "--repo", "ghcr.io/acme/torchyard")
    assert run.code == 0, run.text
    return out / "index.html"


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if not (CHROMIUM.exists() and DRIVER.exists()) or shutil.which("chromedriver") is None:
        pytest.fail("no chromium / chromium-driver: run `scripts/services start` (it installs them)", pytrace=False)
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1280,1400"):
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service(str(DRIVER)), options=options)
    try:
        yield driver
    finally:
        driver.quit()


def ask(browser: Any, page: Path, query: dict[str, str]) -> tuple[list[str], dict[str, str]]:
    """Set the selector; the combinations of the images that run (in order) and the reasons for the rest."""
    from selenium.webdriver.support.ui import Select

    browser.get(page.as_uri())
    for field, value in query.items():
        Select(browser.find_element("id", field)).select_by_value(value)
    shown = [e.get_attribute("data-combo") for e in browser.find_elements("css selector", "li.image")]
    valid = list(dict.fromkeys(shown))  # runtime and devel of one combination share its rank
    reasons = {
        e.get_attribute("data-combo"): e.get_attribute("data-reason")
        for e in browser.find_elements("css selector", "li.excluded")
    }
    return valid, reasons


def flags(query: dict[str, str]) -> list[str]:
    found = ["--driver", query["driver"]] if query["driver"] else []
    found += ["--gpu", query["gpu"]] if query["gpu"] else []
    found += ["--python", query["python"]] if query["python"] else []
    return [*found, "--platform", query["platform"]]


def lookup_ids(query: dict[str, str]) -> list[str]:
    run = torchyard("lookup", *flags(query), "--limit", "0", "--json")
    assert run.code in (0, 1), run.text
    data = json.loads(run.out) if run.code == 0 else []
    rows = data["results"] if isinstance(data, dict) else data
    return [row["id"] for row in rows]


def published(page: Path) -> dict[str, dict[str, str]]:
    text = page.read_text()
    payload = text.split('<script id="data" type="application/json">', 1)[1].split("</script>", 1)[0]
    return {c["id"]: c for c in json.loads(payload)["combos"]}


@pytest.mark.parametrize("query", QUERIES, ids=lambda q: "-".join(v or "any" for v in q.values()))
def test_the_page_answers_as_lookup_and_explain_do(browser: Any, page: Path, query: dict[str, str]) -> None:
    combos = published(page)
    valid, reasons = ask(browser, page, query)
    ranked = lookup_ids(query)
    assert valid == [i for i in ranked if i in combos]
    if not query["python"]:  # the page's choice is lookup's first row for the driver and GPU (any Python)
        choice = browser.find_element("id", "choice").get_attribute("data-id")
        assert choice == (ranked[0] if ranked else ""), query
    assert set(valid) | set(reasons) == set(combos)
    for combo, reason in reasons.items():
        if query["python"] and combos[combo]["python"] != query["python"]:
            assert reason == f"a Python {combos[combo]['python']} image; you asked for Python {query['python']}"
            continue
        torch, variant, python, os_name = _parts(combo)
        explained = torchyard(
            "explain",
            *flags({**query, "python": python}),
            "--torch",
            torch,
            "--variant",
            variant,
            "--os",
            os_name,
            "--json",
        )
        checks = json.loads(explained.out)["checks"]
        first = next(c for c in checks if not c["ok"])
        assert reason == f"{first['rule']}: {first['reason']}", combo


def test_the_page_is_self_contained(page: Path) -> None:
    text = page.read_text()
    for needle in ("<link", "src=", "@import", "url(", "fetch(", "XMLHttpRequest"):
        assert needle not in text, needle


def _parts(combo: str) -> tuple[str, str, str, str]:
    head, variant, python, os_name = combo.split("-")[:4]
    return head.removeprefix("torch"), variant, python.removeprefix("py"), os_name


def test_the_screenshot_in_docs_is_of_this_page(browser: Any, page: Path) -> None:
    """The picture docs/matrix.md shows: the first query answered (rewritten with UPDATE_SCREENSHOT=1)."""
    shot = ROOT / "docs" / "compat-page.png"
    ask(browser, page, QUERIES[0])
    if os.environ.get("UPDATE_SCREENSHOT") == "1":
        browser.save_screenshot(str(shot))
    assert shot.exists() and shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
