"""A learner's JupyterLab: a widget chapter runs, and its slider redraws the figure.

The test starts JupyterLab on a free port of 127.0.0.1 (with a token of its own, and its
settings, workspaces and runtime files in a temporary folder), opens chapter 03 in headless
Chromium, runs the chapter's set-up cells (the code cells above its first section) and the
cell of the spectral-radius explorer, then moves the radius slider one step with the keyboard,
as a learner would, and checks that the slider's readout goes up and that the explorer's
figure is replaced by a new one.
The server and its kernel are stopped at the end, whatever happened.

It needs JupyterLab (the book extra) and Chromium (`SEQLIB_CHROMIUM`, else `chromium` on
the PATH); without them it is skipped, except under CI (the `CI` variable set).
"""

import importlib.util
import json
import os
import pathlib
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest

try:
    from playwright.sync_api import TimeoutError as PlaywrightTimeout
    from playwright.sync_api import sync_playwright
except ImportError:  # the test then skips, or fails under CI
    sync_playwright = None
    PlaywrightTimeout = TimeoutError

REPO = pathlib.Path(__file__).resolve().parents[2]
NOTEBOOK = "notebooks/03_backpropagation_through_time.ipynb"
WIDGET_CALL = "spectral_radius_explorer("
SLIDER = "radius"
LOCAL_HOST = "127.0.0.1"
SERVER_START_S = 90
LAB_LOAD_MS = 90_000  # JupyterLab's scripts, the notebook and a kernel
CELL_MS = 180_000  # one cell: the set-up imports torch and seqlib
REDRAW_MS = 60_000
_spec = importlib.util.spec_from_file_location("book_pdf", REPO / "book" / "pdf.py")
book_pdf = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(book_pdf)
CHROMIUM_ARGS = book_pdf.CHROMIUM_ARGS  # the flags every browser test shares


def unavailable(reason: str) -> None:
    """Skip for lack of a tool, or fail under CI, which must run the test."""
    message = f"{reason}: the JupyterLab test needs JupyterLab, Playwright and Chromium"
    if os.environ.get("CI"):
        pytest.fail(message + " (CI is set: this test must run)")
    pytest.skip(message)


def chromium() -> str:
    try:
        found = book_pdf.chromium_path()
    except ValueError as error:
        pytest.fail(str(error))
    if found is None:
        unavailable("no Chromium binary found")
    return found


def cells_to_run() -> tuple[list[int], int]:
    """Indices of the set-up code cells (above the first '## ' section) and of the widget
    cell, in the notebook's order."""
    cells = json.loads((REPO / NOTEBOOK).read_text(encoding="utf8"))["cells"]
    sources = ["".join(c["source"]) for c in cells]
    first_section = next(i for i, (c, s) in enumerate(zip(cells, sources, strict=True))
                         if c["cell_type"] == "markdown" and re.search(r"^## ", s, re.M))
    setup = [i for i in range(first_section) if cells[i]["cell_type"] == "code"]
    widget = [i for i, (c, s) in enumerate(zip(cells, sources, strict=True))
              if c["cell_type"] == "code" and WIDGET_CALL in s]
    assert setup, f"{NOTEBOOK} has no set-up code cell above its first section"
    assert widget, f"{NOTEBOOK} has no cell calling {WIDGET_CALL}...)"
    return setup, widget[0], len(cells)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind((LOCAL_HOST, 0))
        return sock.getsockname()[1]


def stop(process: subprocess.Popen) -> None:
    """Stop the server and its kernels: they run in the server's own process group."""
    if process.poll() is not None:
        return
    for sig, wait in ((signal.SIGTERM, 20), (signal.SIGKILL, 10)):
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            return
        try:
            process.wait(wait)
            return
        except subprocess.TimeoutExpired:
            continue


@pytest.fixture
def lab(tmp_path):
    """(base URL, token) of a JupyterLab serving a copy of the chapter; stopped afterwards."""
    try:
        import jupyterlab  # noqa: F401
    except ImportError:
        unavailable("jupyterlab is not installed (the book extra)")
    port, token = free_port(), secrets.token_hex(16)
    # JupyterLab serves a copy of the chapter, with autosave off: the committed notebook and
    # its folder stay as they are (no new outputs, no checkpoints).
    root = tmp_path / "root"
    (root / NOTEBOOK).parent.mkdir(parents=True)
    shutil.copy(REPO / NOTEBOOK, root / NOTEBOOK)
    settings = tmp_path / "settings" / "@jupyterlab" / "docmanager-extension"
    settings.mkdir(parents=True)
    (settings / "plugin.jupyterlab-settings").write_text(json.dumps({"autosave": False}))
    env = dict(os.environ)
    # The kernel runs in the copy's folder: seqlib comes from the environment, or from the
    # checkout when that is where it is found.
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [env.get("PYTHONPATH"), str(REPO)]))
    for var, sub in (("JUPYTER_CONFIG_DIR", "config"), ("JUPYTER_RUNTIME_DIR", "runtime"),
                     ("JUPYTERLAB_SETTINGS_DIR", "settings"),
                     ("JUPYTERLAB_WORKSPACES_DIR", "workspaces"), ("IPYTHONDIR", "ipython")):
        env[var] = str(tmp_path / sub)
    command = [
        sys.executable, "-m", "jupyterlab", "--no-browser", f"--ServerApp.ip={LOCAL_HOST}",
        f"--ServerApp.port={port}", "--ServerApp.port_retries=0",
        f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={root}",
        "--LabApp.news_url=", "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
    ]
    if hasattr(os, "geteuid") and os.geteuid() == 0:  # containers and CI run as root
        command.append("--allow-root")
    log = (tmp_path / "lab.log").open("w")
    process = subprocess.Popen(
        command, cwd=root, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    base = f"http://{LOCAL_HOST}:{port}"
    try:
        deadline = time.monotonic() + SERVER_START_S
        while True:
            if process.poll() is not None:
                pytest.fail(f"JupyterLab exited ({process.returncode}):\n"
                            + (tmp_path / "lab.log").read_text()[-3000:])
            try:
                with urllib.request.urlopen(f"{base}/api/status?token={token}", timeout=5):
                    break
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                if time.monotonic() > deadline:
                    pytest.fail(f"JupyterLab did not answer within {SERVER_START_S} s:\n"
                                + (tmp_path / "lab.log").read_text()[-3000:])
                time.sleep(0.5)
        yield base, token
    finally:
        stop(process)
        log.close()


def run_cell(page, cell, index: int) -> None:
    """Run one cell as a learner does (click it, Shift+Enter); fail on an error output."""
    cell.scroll_into_view_if_needed()
    cell.locator(".jp-InputArea-editor").click()
    page.keyboard.press("Shift+Enter")
    prompt = cell.locator(".jp-InputArea-prompt")
    try:  # "[ ]:" before, "[*]:" while it runs, "[n]:" once done
        page.wait_for_function("p => /\\[\\d+\\]/.test(p.textContent)", arg=prompt.element_handle(),
                               timeout=CELL_MS)
    except PlaywrightTimeout:
        pytest.fail(f"cell {index} of {NOTEBOOK} did not finish within {CELL_MS // 1000} s")
    errors = cell.locator('[data-mime-type="application/vnd.jupyter.error"]')
    if errors.count():
        pytest.fail(f"cell {index} of {NOTEBOOK} raised:\n{errors.first.inner_text()[-2000:]}")


def test_widget_chapter_in_jupyterlab(lab):
    if sync_playwright is None:
        unavailable("the playwright package is not installed")
    base, token = lab
    setup, widget_index, n_cells = cells_to_run()
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium(), args=CHROMIUM_ARGS)
        try:
            context = browser.new_context(viewport={"width": 1400, "height": 1000})
            # JupyterLab needs nothing from outside; refuse anything that would leave.
            context.route("**/*", lambda route: route.continue_()
                          if route.request.url.startswith(base) else route.abort())
            page = context.new_page()
            page.set_default_timeout(LAB_LOAD_MS)
            page.goto(f"{base}/lab/tree/{NOTEBOOK}?token={token}")
            cells = page.locator(".jp-NotebookPanel .jp-Notebook .jp-Cell")
            page.wait_for_function(f"() => document.querySelectorAll('.jp-NotebookPanel "
                                   f".jp-Notebook .jp-Cell').length === {n_cells}")
            # The kernel is ready when the notebook's toolbar reports it idle.
            page.locator(".jp-NotebookPanel .jp-Notebook-ExecutionIndicator"
                         "[data-status='idle']").wait_for()
            for index in [*setup, widget_index]:
                run_cell(page, cells.nth(index), index)

            output = cells.nth(widget_index).locator(".jp-Cell-outputArea")
            slider = output.locator(".widget-slider").filter(has_text=SLIDER)
            slider.first.wait_for(timeout=REDRAW_MS)
            readout = slider.first.locator(".widget-readout")
            figure = output.locator(".widget-output img")
            figure.first.wait_for(timeout=REDRAW_MS)
            before = (readout.inner_text().strip(), figure.first.get_attribute("src"))

            handle = slider.first.locator(".noUi-handle")  # ipywidgets 8 (noUiSlider)
            if not handle.count():
                handle = slider.first.locator(".ui-slider-handle")  # ipywidgets 7 (jQuery UI)
            handle.first.focus()
            page.keyboard.press("ArrowRight")  # one step up: one new value, one redraw
            try:
                page.wait_for_function(  # a redraw puts a new <img> in the output
                    "([area, src]) => { const img = area.querySelector('.widget-output img');"
                    " return img !== null && img.getAttribute('src') !== src; }",
                    arg=[output.element_handle(), before[1]], timeout=REDRAW_MS)
            except PlaywrightTimeout:
                pytest.fail(f"the figure did not change within {REDRAW_MS // 1000} s of moving "
                            f"the {SLIDER!r} slider (readout {before[0]!r} -> "
                            f"{readout.inner_text().strip()!r})")
            page.locator(".jp-NotebookPanel .jp-Notebook-ExecutionIndicator"
                         "[data-status='idle']").wait_for(timeout=REDRAW_MS)
            after = readout.inner_text().strip()
            assert float(after) > float(before[0]), (
                f"the {SLIDER!r} slider's readout went from {before[0]} to {after}")
            assert figure.count() == 1, "each redraw should replace the figure, not add one"
        finally:
            browser.close()
