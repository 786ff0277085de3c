"""Hostile corpus text in the HTML report (issue 10, item 14): a document holding ``<!--<script>``
used to put the report's data block into the "script data escaped" state, swallowing the report's
own script (one script element left instead of two, an empty drill-down, no console error). Every
``<``, ``>`` and ``&`` in the embedded JSON is now escaped; tested in a real headless Chromium.
"""

from __future__ import annotations

import json
import os

import pytest

from _chromium import Chromium, find_chromium
from rankwise.analysis.compare import compare
from rankwise.report.html import render_html_report, script_json, write_html_report

HOSTILE = [
    "<!--<script>",
    "</script><script>window.__pwned = 1</script>",
    "<script>window.__pwned = 2</script>",
    "<!-- <script> --> </script> <!--",
    "<img src=x onerror=\"window.__pwned = 3\">",
    "line\u2028separator\u2029paragraph & ampersand &amp; ]]> \"quotes\" 'single'",
    "</SCRIPT ><ScRiPt>window.__pwned = 4</sCrIpT>",
    "\\u003c/script> and a backslash \\",
]
DOCS = {f"d{i}": f"doc {i}: {text}" for i, text in enumerate(HOSTILE)}
QRELS = {"q1": {"d0": 1, "d1": 1, "d2": 0, "d3": 1}, "q2": {"d4": 1, "d5": 1, "d6": 1, "d7": 0}}
RUN_A = {"q1": {d: float(10 - i) for i, d in enumerate(["d0", "d1", "d2", "d3"])},
         "q2": {d: float(10 - i) for i, d in enumerate(["d4", "d5", "d6", "d7"])}}
RUN_B = {"q1": {d: float(i) for i, d in enumerate(["d0", "d1", "d2", "d3"])},
         "q2": {d: float(i) for i, d in enumerate(["d4", "d5", "d6", "d7"])}}


def _report(tmp_path):
    result = compare(QRELS, [RUN_A, RUN_B], ["ndcg@4", "map"], names=["a", "b"], permutations=200)
    return write_html_report(tmp_path / "hostile.html", result, runs={"a": RUN_A, "b": RUN_B}, qrels=QRELS,
                             documents=DOCS, queries={"q1": "<!--<script>", "q2": "</script>"},
                             title="<!--<script> title")


def test_script_json_round_trips_and_hides_markup():
    text = script_json(DOCS)
    assert json.loads(text) == DOCS
    for bad in ("<", ">", "&", "\u2028", "\u2029"):
        assert bad not in text


def test_only_our_two_script_elements_in_the_markup(tmp_path):
    html = _report(tmp_path).read_text(encoding="utf-8")
    assert html.lower().count("<script") == 2 and html.lower().count("</script") == 2
    assert "<!--" not in html


@pytest.fixture(scope="module")
def browser_ok():
    missing = []
    if find_chromium() is None:
        missing.append("chromium (apt-get install chromium)")
    try:
        import websocket  # noqa: F401
    except ImportError:
        missing.append("websocket-client (pip install websocket-client)")
    if missing:
        message = "HTML report browser test needs " + " and ".join(missing)
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(message + " (CI is set, so this is a failure, not a skip)")
        pytest.skip(message)


@pytest.mark.browser
def test_hostile_documents_in_chromium(browser_ok, tmp_path):
    path = _report(tmp_path)
    with Chromium.start(tmp_path) as browser:
        page = browser.open(path)
        assert page.evaluate("document.querySelectorAll('script').length") == 2
        assert page.evaluate("document.documentElement.dataset.ready") == "1"  # our script ran
        assert page.evaluate("typeof window.__pwned") == "undefined"  # no injected one did
        assert page.console_errors == []
        assert page.evaluate("document.querySelectorAll('img').length") == 0
        store = page.evaluate("JSON.parse(document.getElementById('doc-texts').textContent)")
        assert store == {d: DOCS[d] for d in store} and len(store) == len(DOCS)
        shown = {}
        for qid in ("q1", "q2"):
            page.evaluate(f"document.querySelector('details.query[data-qid=\"{qid}\"]').open = true")
            page.evaluate("new Promise(r => setTimeout(r, 100))")
            pairs = page.evaluate(
                f"Array.from(document.querySelectorAll('details.query[data-qid=\"{qid}\"] .chunk-text[data-doc]'))"
                ".map(e => [e.dataset.doc, e.textContent])")
            shown.update(dict(pairs))
        assert shown == DOCS  # the drill-down shows every hostile text, verbatim, as text
        assert page.evaluate("typeof window.__pwned") == "undefined"
        assert page.evaluate("document.title") == "<!--<script> title"
        assert page.console_errors == []


def test_static_render_has_the_data_block_intact():
    result = compare(QRELS, [RUN_A, RUN_B], ["map"], names=["a", "b"], permutations=100)
    html = render_html_report(result, runs={"a": RUN_A, "b": RUN_B}, qrels=QRELS, documents=DOCS)
    start = html.index('<script type="application/json" id="doc-texts">') + len(
        '<script type="application/json" id="doc-texts">')
    block = html[start: html.index("</script>", start)]
    assert json.loads(block) == DOCS
