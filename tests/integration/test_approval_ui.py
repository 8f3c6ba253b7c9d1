"""The approval form in the real Prefect UI, in a real browser: headless Chromium (Debian's,
`make browser`) driven by selenium opens the paused gate's run page on a real `prefect server
start`, sees the gate's description, fills the form (approve, reason, name) and resumes; the
flow then goes on and does the action. A screenshot of the filled form is kept in
$INFOPT_TEST_ARTIFACTS (default test-artifacts/)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = Path(os.environ.get("INFOPT_TEST_ARTIFACTS", ROOT / "test-artifacts"))


@pytest.fixture
def browser():
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    chromium, driver = shutil.which("chromium"), shutil.which("chromedriver")
    if not (chromium and driver):
        pytest.fail("Chromium or chromedriver missing: run `make browser` (make test does)")
    os.environ["SE_AVOID_STATS"] = "true"  # selenium must not phone home (no network here)
    opts = Options()
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage",
                "--window-size=1400,1000"):
        opts.add_argument(arg)
    opts.binary_location = chromium
    d = webdriver.Chrome(options=opts, service=Service(driver))
    d.implicitly_wait(2)
    yield d
    d.quit()


def _wait(cond, timeout_s: float, what: str):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if got := cond():
                return got
        except Exception:  # the page is still rendering  # noqa: BLE001
            pass
        time.sleep(0.5)
    pytest.fail(f"timed out after {timeout_s:.0f} s waiting for {what}")


def _pending(env) -> list[dict]:
    out = subprocess.run([sys.executable, "-m", "infopt.cli", "approvals", "--json"],
                         capture_output=True, text=True, env=env, cwd=ROOT, timeout=120)
    return json.loads(out.stdout or "[]")


def test_the_gate_is_answered_in_the_prefect_ui(prefect_server, browser, tmp_path):

    out = tmp_path / "action.txt"
    seen = {p["gate_run_id"] for p in _pending(prefect_server)}  # other tests' leftovers
    flow = subprocess.Popen([sys.executable, "-m", "tests.gated_flow", str(out), "300"],
                            env=prefect_server, cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    try:
        _answer_in_the_ui(prefect_server, browser, flow, out, seen)
    finally:  # a failed test must not leave its gate paused for the next test to find
        if flow.poll() is None:
            flow.kill()


def _answer_in_the_ui(prefect_server, browser, flow, out: Path, seen: set[str]) -> None:
    from selenium.webdriver.common.by import By

    gate = _wait(lambda: next((p for p in _pending(prefect_server)
                               if p["gate_run_id"] not in seen), None), 180, "a paused gate")
    api = prefect_server["PREFECT_API_URL"]
    browser.get(f"{api.removesuffix('/api')}/runs/flow-run/{gate['gate_run_id']}")
    _wait(lambda: [b for b in browser.find_elements(By.TAG_NAME, "button")
                   if b.text == "Resume"], 60, "the Resume button")[0].click()
    # The dialog opens before the UI has fetched the run's input schema: until then it shows
    # a bare "Do you want to resume this flow run?" (seen on a slower CI machine). Wait for the
    # gate's description, which comes with the form.
    dialog = _wait(lambda: next(d for d in browser.find_elements(By.CSS_SELECTOR,
                                                                  "[role=dialog]")
                                if "llama-quantize will write b.gguf" in d.text), 60,
                   "the resume form with the gate's description")
    assert "Approved" in dialog.text and "Answered By" in dialog.text
    switch = dialog.find_element(By.CSS_SELECTOR, "input[type=checkbox]")
    browser.execute_script("arguments[0].click()", switch)  # the toggle's hidden input
    reason, name = dialog.find_elements(By.TAG_NAME, "textarea")[:2]
    reason.send_keys("checked the disk")
    name.send_keys("Ada (UI test)")
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    browser.save_screenshot(str(ARTIFACTS / "approval-form.png"))
    [b for b in dialog.find_elements(By.TAG_NAME, "button") if b.text == "Submit"][0].click()
    assert flow.wait(120) == 0, flow.stdout.read()
    answer = json.loads(out.with_suffix(".answer.json").read_text())
    assert answer["approved"] and answer["source"] == "person"
    assert answer["reason"] == "checked the disk" and answer["answered_by"] == "Ada (UI test)"
    assert out.read_text() == "the action happened\n"
    assert (ARTIFACTS / "approval-form.png").stat().st_size > 10_000
