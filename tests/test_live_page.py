"""The live engine page (chapter 26a) in a real browser: `mini-infer serve` on a tiny model, headless Chromium
(Debian's `chromium` and `chromedriver`, driven by Selenium) types a question, waits for the streamed answer and
its numbers, sees the KV grid fill while the answer runs and go back to free after, and takes a screenshot that
the test decodes and checks is not blank."""
import io
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections import Counter

import httpx
import pytest

from conftest import API_KEY, ROOT, Server

CHROMIUM = next((shutil.which(n) for n in ("chromium", "chromium-browser") if shutil.which(n)), None)
CHROMEDRIVER = shutil.which("chromedriver")
NUM_BLOCKS = 64


@pytest.fixture(scope="module")
def live_server(serve_logs, tiny_model):
    s = Server(str(tiny_model), "--api-key", API_KEY, "--num-kv-blocks", str(NUM_BLOCKS),
               "--max-num-batched-tokens", "64", log_dir=serve_logs)
    yield s
    s.stop()


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    if CHROMIUM is None or CHROMEDRIVER is None:
        if os.environ.get("CI"):
            pytest.fail("chromium or chromedriver is not installed (apt-get install chromium chromium-driver)")
        pytest.skip("chromium or chromedriver is not installed, so the live page is not checked in a browser: "
                    "apt-get install chromium chromium-driver to run these tests")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--no-first-run", "--disable-background-networking", "--window-size=1280,900",
                f"--user-data-dir={tmp_path_factory.mktemp('chromium-profile')}"):
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.set_script_timeout(30)
    yield driver
    driver.quit()


def wait_for(driver, script: str, what: str, timeout: float = 120):
    "Poll a JavaScript expression in the page until it is truthy; its value. Fails naming `what`."
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = driver.execute_script(f"return {script}")
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def ask(driver, question: str, key: str, max_tokens: int) -> None:
    from selenium.webdriver.common.by import By
    for field, value in (("api-key", key), ("max-tokens", str(max_tokens)), ("question", question)):
        box = driver.find_element(By.ID, field)
        box.clear()
        box.send_keys(value)
    driver.find_element(By.ID, "send").click()


def screenshot_colours(png: bytes) -> tuple[tuple[int, int], Counter]:
    "Decode a PNG screenshot: its size and how often each colour occurs (every 7th pixel)."
    from PIL import Image
    image = Image.open(io.BytesIO(png)).convert("RGB")
    pixels = image.tobytes()
    return image.size, Counter(pixels[i:i + 3] for i in range(0, len(pixels), 3 * 7))


def test_screenshot_decoder_sees_blank():
    "The blank check can fail: a one-colour image has one colour and no ink."
    from PIL import Image
    buf = io.BytesIO()
    Image.new("RGB", (64, 48), (255, 255, 255)).save(buf, format="PNG")
    size, colours = screenshot_colours(buf.getvalue())
    assert size == (64, 48) and len(colours) == 1


def test_page_streams_an_answer_and_the_grid_moves(live_server, browser, tmp_path):
    browser.get(f"{live_server.url}/")
    assert browser.title == "mini_infer live"
    wait_for(browser, f"document.querySelector('.pool')?.dataset.free == '{NUM_BLOCKS}'",
             "the first frame: every block free")
    # record every value the grid's held-block count takes from now on
    browser.execute_script("""
        const pool = document.querySelector('.pool');
        window.held = [Number(pool.dataset.held)];
        new MutationObserver(() => window.held.push(Number(pool.dataset.held)))
            .observe(pool, {attributes: true, attributeFilter: ['data-held']});""")
    ask(browser, "What is the capital of France?", API_KEY, 200)
    done = wait_for(browser, "document.querySelector('.msg.assistant')?.dataset.done", "the streamed answer")
    answer, numbers = browser.execute_script(
        "return [document.querySelector('.msg.assistant').textContent, "
        "document.querySelector('.numbers').textContent]")
    assert done == "true" and answer.strip(), (done, answer)
    m = re.search(r"TTFT ([\d.]+) s · ([\d.]+) tokens/s · (\d+) tokens · finish (\w+)", numbers)
    assert m and float(m[1]) > 0 and float(m[2]) > 0 and 1 < int(m[3]) <= 200, numbers
    assert m[4] in ("length", "stop"), numbers
    wait_for(browser, "window.held.length > 1 && window.held[window.held.length - 1] === 0",
             "the grid to go back to free after the answer", timeout=30)
    held = browser.execute_script("return window.held")
    assert max(held) > 0, f"the grid never showed a held block while the answer ran: {held}"
    finished = browser.execute_script(
        "return [...document.querySelectorAll('#counters dd')].map(d => d.textContent)")
    assert f"{NUM_BLOCKS} / {NUM_BLOCKS}" in finished, finished          # KV blocks free, in the counters

    shot = tmp_path / "live-page.png"
    assert browser.save_screenshot(str(shot))
    (width, height), colours = screenshot_colours(shot.read_bytes())
    background, n_background = colours.most_common(1)[0]
    ink = 1 - n_background / sum(colours.values())
    assert (width, height) == tuple(browser.execute_script("return [innerWidth, innerHeight]"))
    assert len(colours) > 16 and ink > 0.05, f"blank screenshot: {len(colours)} colours, {ink:.1%} ink"


def test_page_shows_usage_extension_fields(live_server, browser):
    "Under an answer, every numeric field `usage` has beyond OpenAI's three (per-request metrics), nested too."
    browser.get(f"{live_server.url}/")
    usage = {"prompt_tokens": 9, "completion_tokens": 4, "total_tokens": 13, "queue_time_s": 0.25,
             "prompt_tokens_details": {"cached_tokens": 32}, "finish_reason": "stop"}
    usage = json.dumps(usage)                       # as the server sends it: the key order kept
    extra = browser.execute_script("return extraUsage(JSON.parse(arguments[0]))", usage)
    assert extra == [["queue_time_s", 0.25], ["prompt_tokens_details.cached_tokens", 32]]
    line = browser.execute_script(
        "return numbersLine({ttft: 0.5, tokensPerS: 20, tokens: 4, finish: 'stop', "
        "usage: JSON.parse(arguments[0])})", usage)
    assert line == ("TTFT 0.500 s · 20.0 tokens/s · 4 tokens · finish stop · queue_time_s 0.250 · "
                    "prompt_tokens_details.cached_tokens 32"), line


def test_page_shows_the_servers_request_metrics(serve_logs, tiny_model, browser):
    "With --return-request-metrics, the engine's per-request figures in `usage` appear under the answer."
    s = Server(str(tiny_model), "--return-request-metrics", log_dir=serve_logs)
    try:
        usage = httpx.post(f"{s.url}/v1/chat/completions", timeout=60, json={
            "model": tiny_model.name, "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 4}).json()
        browser.get(f"{s.url}/")
        ask(browser, "Hello?", "", 16)
        wait_for(browser, "document.querySelector('.msg.assistant')?.dataset.done", "the answer")
        numbers = browser.execute_script("return document.querySelector('.numbers').textContent")
    finally:
        s.stop()
    extra = [k for k, v in usage.get("usage", {}).items()
             if isinstance(v, (int, float)) and k not in ("prompt_tokens", "completion_tokens", "total_tokens")]
    assert "time_to_first_token" in extra, usage
    for key in extra:
        assert f" · {key} " in numbers, (key, numbers)


def test_page_shows_the_servers_error(live_server, browser):
    "A wrong key: the answer slot shows the server's 401 message; the page and the server go on."
    browser.get(f"{live_server.url}/")
    ask(browser, "Hello?", "not-the-key", 8)
    done = wait_for(browser, "document.querySelector('.msg.assistant')?.dataset.done", "the error")
    text = browser.execute_script("return document.querySelector('.msg.assistant').textContent")
    assert done == "error" and "invalid API key" in text, text
    assert httpx.get(f"{live_server.url}/health").status_code == 200


def test_open_page_does_not_hold_up_shutdown(serve_logs, tiny_model, browser):
    "With the page open (its event stream connected), SIGTERM still stops the server at once, status 0."
    s = Server(str(tiny_model), "--live-fps", "20", log_dir=serve_logs)
    try:
        browser.get(f"{s.url}/")
        wait_for(browser, "document.body.dataset.frame", "a first frame")
        assert s.stop(timeout=20) == 0               # a hang would be killed: -9
    finally:
        s.stop()


def test_live_fps_zero_serves_no_page(serve_logs, tiny_model):
    s = Server(str(tiny_model), "--live-fps", "0", log_dir=serve_logs)
    try:
        assert httpx.get(f"{s.url}/").status_code == 404
        assert httpx.get(f"{s.url}/live/events?frames=1").status_code == 404
    finally:
        s.stop()


def test_page_files_are_package_data(tmp_path):
    "The page's files ship with `pip install` (MANIFEST.in + include_package_data), all that index.html loads."
    r = subprocess.run([sys.executable, str(ROOT / "setup.py"), "-q", "egg_info", "--egg-base", str(tmp_path)],
                       capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    sources = set((next(tmp_path.glob("*.egg-info")) / "SOURCES.txt").read_text().split())
    static = ROOT / "mini_infer" / "api" / "static"
    files = {f"mini_infer/api/static/{p.name}" for p in static.iterdir()}
    assert files == {f"mini_infer/api/static/{n}" for n in ("index.html", "live.css", "live.js")}
    assert files <= sources, files - sources
    loaded = re.findall(r'(?:href|src)="/live/static/([^"]+)"', (static / "index.html").read_text())
    assert sorted(loaded) == ["live.css", "live.js"]
