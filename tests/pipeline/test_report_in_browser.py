"""The pipeline's HTML page in a real browser (issue 49): it renders, its tables and plots are there, and it asks
the network for nothing.

Headless Chromium (Debian's ``chromium``; the test is skipped, saying so, where it is not installed) loads the
page through a proxy of this test's own: every request the browser makes, whatever its host, reaches the proxy,
which serves the page at one address and records the rest. The page's plots are ``data:`` URIs, so the only
request the page makes must be for itself (the browser's own update checks carry no Referer and are not the
page's). ``--dump-dom`` gives the document after load; ``--screenshot`` the rendering
(``docs/pipeline.md``'s picture is taken the same way: ``python tests/pipeline/test_report_in_browser.py PAGE PNG``).
"""

import base64
import http.server
import io
import json
import re
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest

PAGE_ORIGIN = "http://mbk-report.test/"
PAGE_URL = f"{PAGE_ORIGIN}report.html"
BROWSERS = ("chromium", "chromium-browser", "google-chrome")


def browser():
    return next((shutil.which(name) for name in BROWSERS if shutil.which(name)), None)


class _Proxy(http.server.ThreadingHTTPServer):
    """An HTTP proxy that serves one page at :data:`PAGE_URL` and records every other request (answered 404)."""

    def __init__(self, page):
        self.page, self.requests = page, []

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(handler):  # noqa: N805  (the handler instance; self is the server)
                self.requests.append((handler.path, handler.headers.get("Referer")))
                body = self.page if handler.path == PAGE_URL else b""
                handler.send_response(200 if body else 404)
                handler.send_header("Content-Type", "text/html; charset=utf-8")
                handler.send_header("Content-Length", str(len(body)))
                handler.end_headers()
                handler.wfile.write(body)

            do_POST = do_HEAD = do_GET

            def do_CONNECT(handler):  # noqa: N805  (https: refused, recorded)
                self.requests.append((f"CONNECT {handler.path}", None))
                handler.send_response(403)
                handler.end_headers()

            def log_message(handler, *args):  # noqa: N805
                pass

        super().__init__(("127.0.0.1", 0), Handler)


def render(page_path, screenshot=None, width=1300, height=5200):
    """Loads ``page_path`` in headless Chromium through the recording proxy.

    Returns:
        ``(dom, requests)``: the document after load and ``(url, referer)`` of every request the browser made.
    """
    proxy = _Proxy(Path(page_path).read_bytes())
    thread = threading.Thread(target=proxy.serve_forever, daemon=True)
    thread.start()
    flags = [browser(), "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             "--disable-domain-reliability", "--disable-client-side-phishing-detection", "--disable-default-apps",
             "--no-default-browser-check", "--disable-breakpad", "--metrics-recording-only",
             "--disable-features=OptimizationHints,MediaRouter,Translate,AutofillServerCommunication,"
             "CertificateTransparencyComponentUpdater,NetworkTimeServiceQuerying",
             f"--proxy-server=http://127.0.0.1:{proxy.server_address[1]}", "--proxy-bypass-list=<-loopback>",
             f"--window-size={width},{height}", "--hide-scrollbars"]
    try:
        dom = subprocess.run(flags + ["--dump-dom", PAGE_URL], capture_output=True, text=True, timeout=120,
                             check=True).stdout
        if screenshot:
            subprocess.run(flags + [f"--screenshot={screenshot}", PAGE_URL], capture_output=True, timeout=120,
                           check=True)
    finally:
        proxy.shutdown()
    return dom, list(proxy.requests)


@pytest.mark.slow
def test_the_report_renders_in_a_real_browser_with_its_tables_and_plots_and_no_external_request(tmp_path):
    if browser() is None:
        pytest.skip("no Chromium on this machine (apt-get install chromium): the page was not checked in a browser")
    import matplotlib.image

    from tests.helpers import run_mbk

    recipe = tmp_path / "tiny.toml"
    recipe.write_text('[source]\npreset = "tiny-bert"\n[export]\nformats = ["tflite", "onnx"]\nquantize = "dynamic"\n'
                      'seq_len = 16\nname = "tiny"\n[validation]\ncount = 4\n')
    proc = run_mbk("pipeline", recipe, "--out", tmp_path / "out", "--runs", "10")
    assert proc.returncode == 0, proc.stderr
    report = json.loads((tmp_path / "out" / "tiny.pipeline.json").read_text())
    shot = tmp_path / "page.png"
    dom, requests = render(tmp_path / "out" / "tiny.pipeline.html", screenshot=shot)
    # What the page asked for: its requests carry it as their Referer (the browser's own update and account
    # checks carry none, and the favicon is the browser's default guess, not a link of the page) ...
    asked = [url for url, referer in requests  # a cross-origin Referer is the page's origin only
             if (referer or "").startswith(PAGE_ORIGIN) and url != f"{PAGE_ORIGIN}favicon.ico"]
    assert asked == [] and [url for url, _ in requests].count(PAGE_URL) == 2, requests
    # ... and an https resource would go through an unreadable tunnel: the rendered document links to none.
    links = re.findall(r"""(?:src|href)\s*=\s*["']([^"']+)|url\(\s*["']?([^"')]+)""", dom)
    assert all(u.startswith(("data:", "#")) for pair in links for u in pair if u), links
    headings = re.findall(r"<h2>([^<]+)", dom)
    for heading in ("Summary", "App clients", "The phone's kernels (arm64)", "Validation against the Keras source",
                    "Latency"):
        assert heading in headings, headings
    assert dom.count("<table>") >= 5
    for artifact in report["artifacts"]:
        assert artifact["name"] in dom
    images = re.findall(r'src="data:image/png;base64,([^"]+)"', dom)
    assert len(images) >= 2
    for data in images:  # each plot decodes as a PNG with some ink on it
        pixels = matplotlib.image.imread(io.BytesIO(base64.b64decode(data)), format="png")
        assert pixels.shape[0] > 100 and pixels.std() > 0.01
    rendered = matplotlib.image.imread(shot)
    assert rendered.shape[1] >= 1000 and rendered.std() > 0.01  # the browser drew the page, not a blank


if __name__ == "__main__":  # docs/pipeline.md's screenshot: PAGE.html OUT.png
    print(render(sys.argv[1], screenshot=sys.argv[2])[1])
