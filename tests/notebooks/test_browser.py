"""What an on-call person sees, in a real browser (Debian's chromium driven by Playwright).

- ``make demo-local``'s commands run for real: no warning lines, a final summary line whose counts
  match the generated cluster's ground truth.
- The static report it wrote, opened offline at 1024 px: the banner, what was audited, every
  finding with its reason, path and next step, no console error, no request leaving the machine,
  no inner horizontal scrollbar.
- JupyterLab (``ledgerlens lab``) on the runbook with its ``sandbox`` parameter: every cell runs,
  the explorer filters, a selected row's detail panel shows evidence and next step, and after a
  page reload (kernel alive) the widgets render again.

Screenshots go to ``test-artifacts/`` (``$LEDGERLENS_TEST_ARTIFACTS``).
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from playwright.sync_api import TimeoutError as PlaywrightTimeout
from playwright.sync_api import expect

pytestmark = [pytest.mark.browser, pytest.mark.notebooks, pytest.mark.integration]

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
ARTIFACTS = Path(os.environ.get("LEDGERLENS_TEST_ARTIFACTS", ROOT / "test-artifacts"))
NOISE = re.compile(r"\bWARN(ING)?\b|Warning:|\w+Warning\b|Traceback|\bERROR\b|log4j|SLF4J|setuptools")
SUMMARY = re.compile(
    r"^ledgerlens: (?P<c>\d+) critical, (?P<w>\d+) warning, (?P<i>\d+) info \((?P<n>\d+) findings, [^)]*\); "
    r"worst: \S.*; report: (?P<report>\S+report\.html)$"
)


def artifact(name: str) -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    return ARTIFACTS / name


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if not Path(CHROMIUM).is_file():
        pytest.fail(f"{CHROMIUM} missing: 'make system-deps' installs Debian's chromium", pytrace=False)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, timeout=120_000)
        yield b
        b.close()


# --- make demo-local ---------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def demo_local(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Run ``make demo-local`` for real into a scratch DEMO_DIR; its output lines and directory."""
    demo = tmp_path_factory.mktemp("demo")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MAKE", "MFLAGS", "LEDGERLENS_VERBOSE"))}
    for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):  # the sandbox's own dummy credentials
        env.pop(k, None)
    t0 = time.monotonic()
    proc = subprocess.run(
        ["make", "--no-print-directory", "demo-local", f"DEMO_DIR={demo}"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    lines = (proc.stdout + proc.stderr).splitlines()
    (demo / "make-demo-local.log").write_text("\n".join(lines) + "\n")
    assert proc.returncode == 0, "\n".join(lines[-40:])
    return {
        "dir": demo,
        "stdout": proc.stdout.splitlines(),
        "lines": lines,
        "seconds": time.monotonic() - t0,
    }


def test_make_demo_local_is_quiet_and_ends_with_the_summary(demo_local: dict[str, Any]) -> None:
    lines = demo_local["lines"]
    noisy = [ln for ln in lines if NOISE.search(ln)]
    assert not noisy, "library noise in make demo-local:\n" + "\n".join(noisy)
    assert len(lines) <= 30, "\n".join(lines)  # progress, where things are, the answer
    last = demo_local["stdout"][-1]
    m = SUMMARY.match(last)
    assert m, f"last line is not the summary line: {last!r}"
    truth = json.loads((demo_local["dir"] / "local" / "ground_truth.json").read_text())
    expected = truth["expected"]
    assert int(m["n"]) == len(expected)  # the sandbox's clock and inputs: every planted finding
    by_sev = {s: sum(1 for f in expected if f["severity"] == s) for s in ("critical", "warning", "info")}
    assert (int(m["c"]), int(m["w"]), int(m["i"])) == (by_sev["critical"], by_sev["warning"], by_sev["info"])
    assert Path(m["report"]).is_file()
    # progress covered every phase, with counts
    said = "\n".join(lines)
    for phase in ("collect", "audit", "re-verify", "write"):
        assert f"{phase} done in" in said, phase
    assert "rows scanned" in said
    # the collection's stage count is the number of stages it ran: 1/n ... n/n
    stages = [m for m in (re.search(r"\] collect (\d+)/(\d+) \w+", ln) for ln in lines) if m]
    assert [(int(m[1]), int(m[2])) for m in stages] == [(i + 1, len(stages)) for i in range(len(stages))]


# --- the static report ---------------------------------------------------------------------------------


def _open_offline(browser: Any, url: str, width: int) -> tuple[Any, list[str], list[str]]:
    page = browser.new_page(viewport={"width": width, "height": 900})
    errors: list[str] = []
    outside: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))

    def route(r: Any) -> None:
        if r.request.url.startswith(("file:", "data:", "blob:", "about:")):
            r.continue_()
        else:
            outside.append(r.request.url)
            r.abort()

    page.route("**/*", route)
    page.goto(url, wait_until="load", timeout=120_000)
    page.wait_for_timeout(500)
    return page, errors, outside


_INNER_SCROLL = """() => {
  const bad = [];
  for (const el of document.querySelectorAll('body *')) {
    const s = getComputedStyle(el);
    if ((s.overflowX === 'auto' || s.overflowX === 'scroll') && el.scrollWidth > el.clientWidth + 1
        && el.clientWidth > 0) {
      bad.push(el.tagName + '.' + el.className + ' ' + el.scrollWidth + '>' + el.clientWidth);
    }
  }
  const doc = document.scrollingElement;
  if (doc.scrollWidth > window.innerWidth + 1) bad.push('page ' + doc.scrollWidth + '>' + window.innerWidth);
  return bad;
}"""


def test_static_report_in_a_browser(browser: Any, demo_local: dict[str, Any]) -> None:
    out = demo_local["dir"] / "audit-local"
    report = out / "report.html"
    findings = pd.read_parquet(out / "findings.parquet")
    page, errors, outside = _open_offline(browser, report.as_uri(), 1024)
    try:
        page.evaluate("() => document.querySelectorAll('details').forEach(d => d.open = true)")
        page.screenshot(path=str(artifact("report-1024.png")), full_page=True)
        page.screenshot(path=str(artifact("report-1024-top.png")))

        summary = json.loads((out / "summary.json").read_text())
        assert summary["cluster_name"]  # the generated cluster has one under /admin/clusters
        assert page.title().startswith(f"Pulsar storage audit: {summary['cluster_name']}, ")
        banner = page.locator("[data-status]").first
        assert banner.is_visible() and banner.get_attribute("data-status") == "critical"
        assert re.match(r"\d+ critical findings?", banner.inner_text())
        context = page.locator("table[aria-label='what was audited']")
        ctx_text = context.inner_text()
        for text in ("metadata store", "ZooKeeper 127.0.0.1:", "bucket ledgerlens-offload", "as of",
                     "scanned", "BookKeeper ledgers", "ledgerlens "):  # fmt: skip
            assert text in ctx_text, text
        # the answer comes before the figures and the runbook's instructions are not there
        body = page.locator("body").inner_text()
        assert body.index("What was audited") < body.index("Critical:")
        assert "Run All" not in body and "edit the parameters" not in body

        cards = page.locator(".ll-finding")
        assert cards.count() == len(findings)
        for i in range(cards.count()):
            card = cards.nth(i)
            assert card.is_visible()
            assert card.locator(".ll-reason").inner_text().strip().endswith(".")
            assert card.locator("pre.ll-next").inner_text().strip()
        shown_paths = set(page.locator("code.ll-path").all_inner_texts())
        assert set(findings["path"].dropna()) <= shown_paths
        corrupt = findings[findings["kind"] == "corrupt_metadata"]
        for problem in corrupt["evidence"].map(lambda e: json.loads(e)["problem"]):
            assert problem in body  # why each znode could not be read
        assert page.locator("text=bookkeeper shell ledgermetadata -ledgerid").count() > 0
        # text columns left-aligned
        align = page.evaluate(
            "() => getComputedStyle(document.querySelector('table[aria-label] td')).textAlign"
        )
        assert align in ("left", "start")
        assert page.evaluate(_INNER_SCROLL) == []
        assert errors == [], errors
        assert outside == [], outside
        assert page.locator(".plotly-graph-div").count() >= 3
    finally:
        page.close()
    wide, errors, outside = _open_offline(browser, report.as_uri(), 1440)
    try:
        wide.screenshot(path=str(artifact("report-1440-top.png")))
        assert wide.evaluate(_INNER_SCROLL) == [] and errors == [] and outside == []
    finally:
        wide.close()


# --- JupyterLab -----------------------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def sandbox_dir(zookeeper: Any, s3_server: Any, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A sandbox directory (state.json, ground_truth.json) for a generated cluster on the test servers."""
    import boto3
    from kazoo.client import KazooClient

    from ledgerlens.sandbox.cluster import default_now_ms, generate

    chroot = f"/lab-{uuid.uuid4().hex[:8]}"
    client = KazooClient(hosts=zookeeper.hosts)
    client.start()
    client.ensure_path(chroot)
    client.stop()
    client.close()
    bucket = f"lab-{uuid.uuid4().hex[:8]}"
    boto3.client("s3", endpoint_url=s3_server.endpoint_url, region_name="us-east-1").create_bucket(
        Bucket=bucket
    )
    truth = generate(
        zookeeper.hosts + chroot,
        root="",
        s3_endpoint=s3_server.endpoint_url,
        bucket=bucket,
        scenario="planted",
        now_ms=default_now_ms(),
    )
    d = tmp_path_factory.mktemp("sandbox")
    state = {"zk_hosts": zookeeper.hosts + chroot, "s3_endpoint": s3_server.endpoint_url, "bucket": bucket}
    (d / "state.json").write_text(json.dumps(state))
    (d / "ground_truth.json").write_text(truth.to_json())
    return d


@pytest.fixture(scope="module")
def lab(sandbox_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """``ledgerlens lab --sandbox DIR`` as a user starts it; stopped (kernels too) afterwards."""
    work = tmp_path_factory.mktemp("lab")
    port, token = _free_port(), uuid.uuid4().hex
    log = (work.parent / "lab.log").open("w")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "ledgerlens.cli",
            "lab",
            "--workdir",
            str(work),
            "--sandbox",
            str(sandbox_dir),
            "--port",
            str(port),
            "--token",
            token,
            "--no-browser",
        ],  # fmt: skip
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 180
    while True:
        try:
            with urllib.request.urlopen(f"{base}/api/status?token={token}", timeout=5) as r:
                if r.status == 200:
                    break
        except OSError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            log.flush()
            pytest.fail(
                "JupyterLab did not start:\n" + (work.parent / "lab.log").read_text()[-3000:], pytrace=False
            )
        time.sleep(1)
    yield {"base": base, "token": token, "work": work, "sandbox": sandbox_dir}
    try:  # shut kernels down through the server (they run Spark), then the server itself
        req = urllib.request.Request(f"{base}/api/kernels?token={token}")
        with urllib.request.urlopen(req, timeout=10) as r:
            for k in json.loads(r.read()):
                urllib.request.urlopen(
                    urllib.request.Request(f"{base}/api/kernels/{k['id']}?token={token}", method="DELETE"),
                    timeout=30,
                ).close()
    except OSError:
        pass
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    log.close()


# The notebook is rendered and its kernel started and idle (the execution indicator says "idle"
# before any kernel is connected: Run All then would ask which kernel to start).
_KERNEL_READY = """() => {
  const name = document.querySelector('.jp-NotebookPanel .jp-KernelName');
  const ind = document.querySelector('.jp-Notebook-ExecutionIndicator');
  return !!name && /Python/.test(name.textContent) && !!ind && ind.getAttribute('data-status') === 'idle'
    && document.querySelectorAll('.jp-Notebook .jp-CodeCell').length >= 6;
}"""


_EXPLORER_SCROLL = """() => {
  const bad = [];
  for (const el of document.querySelectorAll('.ledgerlens-explorer, .ledgerlens-explorer *')) {
    const s = getComputedStyle(el);
    if (el.tagName !== 'SELECT' && (s.overflowX === 'auto' || s.overflowX === 'scroll')
        && el.scrollWidth > el.clientWidth + 1 && el.clientWidth > 0) {
      bad.push(el.tagName + '.' + el.className + ' ' + el.scrollWidth + '>' + el.clientWidth);
    }
  }
  return bad;
}"""


_STARTED = """() => [...document.querySelectorAll('.jp-CodeCell .jp-InputPrompt')]
  .some(p => /\\[(\\*|\\d+)\\]/.test(p.textContent))"""


def _run_all(page: Any) -> None:
    """Run > Run All Cells, until a cell is queued or has run.

    Right after the kernel reports idle, JupyterLab may drop a Run All it received while its kernel
    connection was still settling (nothing queued, no error): the menu is used again then."""
    page.wait_for_function(
        "() => /\\| Idle/.test(document.querySelector('.jp-StatusBar-Widget')?.textContent || '')",
        timeout=180_000,
    )
    for _ in range(3):
        page.locator(".lm-MenuBar-item", has_text="Run").first.click()
        page.locator(".lm-Menu-item", has_text="Run All Cells").first.click()
        try:
            page.wait_for_function(_STARTED, timeout=30_000)
            return
        except PlaywrightTimeout:
            continue
    raise AssertionError("Run All Cells started no cell")


def _wait_idle_and_done(page: Any, timeout_s: float) -> None:
    """Wait until every code cell has run (numbered prompts, none queued or running: [*]).

    A cell that raised stops Run All: fail at once with its error text."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        prompts = page.locator(".jp-CodeCell .jp-InputPrompt").all_inner_texts()
        busy = any("*" in p for p in prompts)
        numbered = [p for p in prompts if re.search(r"\[\d+\]", p)]
        if prompts and not busy and len(numbered) == len(prompts):
            return
        failed = page.locator(".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']")
        if not busy and failed.count():
            raise AssertionError("a cell failed or wrote to stderr:\n" + failed.first.inner_text()[-3000:])
        page.wait_for_timeout(2000)
    raise AssertionError(f"cells still running after {timeout_s:.0f} s: {prompts}")


def test_runbook_in_jupyterlab(browser: Any, lab: dict[str, Any]) -> None:
    nb_copy = lab["work"] / "audit_ledgers.ipynb"
    params = [
        "".join(c["source"])
        for c in json.loads(nb_copy.read_text())["cells"]
        if "parameters" in c["metadata"].get("tags", [])
    ]
    assert len(params) == 1 and f"sandbox: str = {json.dumps(str(lab['sandbox'].resolve()))}" in params[0]
    page = browser.new_page(viewport={"width": 1440, "height": 1000})
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    try:
        url = f"{lab['base']}/lab/tree/audit_ledgers.ipynb?token={lab['token']}&reset"
        page.goto(url, wait_until="domcontentloaded", timeout=180_000)
        page.locator(".jp-Notebook").first.wait_for(timeout=180_000)
        page.wait_for_function(_KERNEL_READY, timeout=180_000)
        _run_all(page)
        _wait_idle_and_done(page, 480)
        outputs = page.locator(".jp-OutputArea-output")
        assert (
            page.locator(".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']").count()
            == 0
        )
        assert "Traceback" not in page.locator(".jp-Notebook").inner_text()
        assert outputs.count() > 0

        explorer = page.locator(".ledgerlens-explorer")
        explorer.scroll_into_view_if_needed()
        explorer.wait_for(timeout=60_000)
        totals = explorer.locator("text=/findings selected/").first
        total_before = int(re.search(r"of (\d+) findings", totals.inner_text())[1])
        assert total_before > 0
        box = explorer.bounding_box()
        assert box is not None and box["width"] <= 1440  # fits the window: no sideways scroll of the widget
        page.screenshot(path=str(artifact("lab-explorer-1440.png")))

        # no sideways scrolling inside the explorer (native list boxes aside)
        assert page.evaluate(_EXPLORER_SCROLL) == []
        findings = pd.read_parquet(lab["work"] / "audit-out" / "findings.parquet")
        assert total_before == len(findings)
        totals = explorer.locator("text=/findings selected/").first

        # filter: kind = corrupt_metadata
        corrupt = int((findings["kind"] == "corrupt_metadata").sum())
        assert 0 < corrupt < len(findings)
        kind_select = explorer.get_by_label("kind", exact=True)
        kind_select.select_option("corrupt_metadata")
        expect(totals).to_contain_text(f"{corrupt} of {len(findings)} findings selected", timeout=30_000)
        # open the first row's detail panel: evidence, next step, rule
        explorer.locator(".ledgerlens-select").first.click()
        detail = explorer.locator(".ll-detail")
        detail.wait_for(timeout=30_000)
        text = detail.inner_text()
        assert "next step" in text.lower() and "evidence" in text.lower()
        assert "zookeeper-shell" in text and "corrupt_metadata" in text
        assert detail.locator("dl.ll-ev").count() == 1
        assert detail.locator("a[href$='audit-rules.md#corrupt_metadata']").count() >= 1
        page.screenshot(path=str(artifact("lab-explorer-detail.png")))

        # search by a topic name as people write it
        kind_select.select_option([])
        expect(totals).to_contain_text(f"{len(findings)} of {len(findings)}", timeout=30_000)
        ml = findings["managed_ledger"].dropna()
        topic = "persistent://" + ml.iloc[0].replace("/persistent/", "/", 1)
        own = int((findings["managed_ledger"] == ml.iloc[0]).sum())
        search = explorer.get_by_label("search", exact=True)
        search.fill(topic)
        search.press("Enter")
        expect(totals).not_to_contain_text(f"{len(findings)} of {len(findings)}", timeout=30_000)
        searched = int(re.search(r"(\d+) of \d+ findings selected", totals.inner_text())[1])
        assert own <= searched < len(findings), (topic, own, searched)
        page.screenshot(path=str(artifact("lab-explorer-search.png")))

        # reload with the kernel alive: the widgets render again (no "Loading widget..." forever),
        # in the state they were left in. Saved first, as autosave does every two minutes.
        page.locator(".lm-MenuBar-item", has_text="File").first.click()
        page.locator(".lm-Menu-item", has_text="Save Notebook").first.click()
        expect(page.locator(".lm-TabBar-tab.jp-mod-dirty")).to_have_count(0, timeout=60_000)
        page.reload(wait_until="domcontentloaded", timeout=180_000)
        page.locator(".jp-Notebook").first.wait_for(timeout=180_000)
        again = page.locator(".ledgerlens-explorer")
        again.scroll_into_view_if_needed(timeout=120_000)
        expect(again.locator("text=/findings selected/").first).to_contain_text(
            f"{searched} of {len(findings)} findings selected", timeout=120_000
        )
        assert page.locator("text=Loading widget...").count() == 0
        page.screenshot(path=str(artifact("lab-after-reload.png")))
        assert errors == [], errors
    finally:
        page.screenshot(path=str(artifact("lab-last.png")), full_page=True)  # what the page ended on
        page.close()
