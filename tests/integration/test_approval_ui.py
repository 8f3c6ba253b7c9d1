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


def _open_form(prefect_server, browser, seen: set[str], *needles: str):
    """(the new paused gate, its resume dialog once the form has come with the gate's
    description: the dialog opens before the UI has fetched the run's input schema, and until
    then shows a bare "Do you want to resume this flow run?", seen on a slower CI machine)."""
    from selenium.webdriver.common.by import By

    gate = _wait(lambda: next((p for p in _pending(prefect_server)
                               if p["gate_run_id"] not in seen), None), 180, "a paused gate")
    api = prefect_server["PREFECT_API_URL"]
    browser.get(f"{api.removesuffix('/api')}/runs/flow-run/{gate['gate_run_id']}")
    _wait(lambda: [b for b in browser.find_elements(By.TAG_NAME, "button")
                   if b.text == "Resume"], 60, "the Resume button")[0].click()
    dialog = _wait(lambda: next(d for d in browser.find_elements(By.CSS_SELECTOR,
                                                                  "[role=dialog]")
                                if all(n in d.text for n in needles)), 60,
                   "the resume form with the gate's description")
    return gate, dialog


def _answer_in_the_ui(prefect_server, browser, flow, out: Path, seen: set[str]) -> None:
    from selenium.webdriver.common.by import By

    _, dialog = _open_form(prefect_server, browser, seen, "llama-quantize will write b.gguf")
    assert "Approved" in dialog.text and "Answered By" in dialog.text
    switch = dialog.find_element(By.CSS_SELECTOR, "input[type=checkbox]")
    browser.execute_script("arguments[0].click()", switch)  # the toggle's hidden input
    _submit(browser, dialog, flow, "checked the disk", "approval-form.png")
    answer = json.loads(out.with_suffix(".answer.json").read_text())
    assert answer["approved"] and answer["source"] == "person"
    assert answer["reason"] == "checked the disk" and answer["answered_by"] == "Ada (UI test)"
    assert out.read_text() == "the action happened\n"
    assert (ARTIFACTS / "approval-form.png").stat().st_size > 10_000


# e2e: the same browser path as the approval form above, which `make test` keeps; this one adds
# the decision form's select (~14 s), kept for `make test-e2e` within the 30-minute budget.
@pytest.mark.e2e
def test_a_no_fit_decision_is_answered_in_the_prefect_ui(prefect_server, browser, tmp_path):
    """The decision gate's form (issue 49): the computed alternatives as a select; the choice
    made in the UI is the one the run resumes with (tests/nofit_run.py, settle only)."""
    req = tmp_path / "request.json"
    req.write_text(json.dumps({
        "engines": ["llamacpp"], "scenarios": [], "approval_timeout_s": 300,
        "workload": {"name": "w", "input_lengths": {"kind": "fixed", "tokens": 32},
                     "output_lengths": {"kind": "fixed", "tokens": 8},
                     "measured_requests": 4, "peak_active_generations": 1,
                     "arrival": {"kind": "closed_loop", "concurrency": 1}}}))
    seen = {p["gate_run_id"] for p in _pending(prefect_server)}
    flow = subprocess.Popen([sys.executable, "-m", "tests.nofit_run", "settle", str(tmp_path),
                             str(req)], env=prefect_server, cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    try:
        _choose_in_the_ui(prefect_server, browser, flow, seen)
    finally:
        if flow.poll() is None:
            flow.kill()
    decided = json.loads((tmp_path / "decided.json").read_text())
    d = decided["decision"]
    assert d["chosen"]["key"] == "kv-q8-0" and d["answer"]["source"] == "person"
    assert d["answer"]["answered_by"] == "Ada (UI test)"
    assert decided["request"]["base_overrides"]["cache_type_k"] == "q8_0"


def _choose_in_the_ui(prefect_server, browser, flow, seen: set[str]) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    gate, dialog = _open_form(prefect_server, browser, seen, "Nothing fits.", "Choice")
    assert gate["key"] == "no-fit" and "kv-q8-0" in gate["choices"]
    select = Select(next(s for s in dialog.find_elements(By.TAG_NAME, "select")
                         if s.find_elements(By.TAG_NAME, "option")))
    assert [o.get_attribute("value") for o in select.options] == gate["choices"]
    select.select_by_value("kv-q8-0")
    _submit(browser, dialog, flow, "quality checked at 8-bit", "decision-form.png")


def _submit(browser, dialog, flow, reason_text: str, screenshot: str) -> None:
    """Reason and name filled, the form kept as a screenshot, submitted; the flow finishes."""
    from selenium.webdriver.common.by import By

    reason, name = dialog.find_elements(By.TAG_NAME, "textarea")[:2]
    reason.send_keys(reason_text)
    name.send_keys("Ada (UI test)")
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    browser.save_screenshot(str(ARTIFACTS / screenshot))
    [b for b in dialog.find_elements(By.TAG_NAME, "button") if b.text == "Submit"][0].click()
    assert flow.wait(120) == 0, flow.stdout.read()[-3000:]
