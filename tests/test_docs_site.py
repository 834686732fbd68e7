"""The documentation site (mkdocs.yml): `mkdocs build --strict` passes (a broken link, a missing anchor or a nav
entry to no page fails it), the two generated pages hold exactly what the code has (every registered function
with its signature and options, every diagnostic code), and ```reward blocks come out highlighted by rewardlang's
own lexer with no error token (docs/errors.md's deliberately broken specs aside). The hook's tolerance is checked
on a copy: a page the nav does not name is still built (under "More"), a link to a repository file outside docs/
becomes its path, and a link to nothing still fails the strict build.

mkdocs and mkdocs-material are test dependencies (pyproject's ``test`` extra), so a missing one fails here.
"""

from __future__ import annotations

import html
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _build(root: Path, site: Path) -> subprocess.CompletedProcess:
    # never -q: it hides warnings from the counter that --strict aborts on. NO_MKDOCS_2_WARNING: mkdocs-material's
    # notice about MkDocs 2 (printed, not a build warning) is left out of the logs
    return subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(site)], cwd=root,
                          capture_output=True, text=True, timeout=600, check=False,
                          env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("site") / "site"
    res = _build(ROOT, out)
    assert res.returncode == 0, res.stdout + res.stderr
    return out


def _text(page: Path) -> str:
    return html.unescape(re.sub(r"<[^>]+>", "", page.read_text(encoding="utf-8")))


def test_every_registered_function_is_in_the_reference(site):
    from rewardlang.runtime import registry

    text = _text(site / "reference" / "functions" / "index.html")
    for name, impl in registry.load_all().items():
        if name.startswith("_"):  # a test's own registration in this process (the site is built in a fresh one)
            continue
        sig = impl.signature
        assert re.search(rf"^{re.escape(name)}\(", text, re.MULTILINE), name  # its signature's line
        if sig.params is not None:
            for option in sig.params.model_fields:
                assert f"{option}=" in text, (name, option)
    # a golden entry: tests_pass_rate's signature as the language writes it, its range and an option's type
    assert ('tests_pass_rate(code: code?, tests: any, entry_point: text? = none, language: text = "python", '
            'reference: code? = none, prelude: code? = none, format="auto", timeout=none, wall_timeout=none, memory_mb=1024, '
            'max_output_bytes=1048576, max_processes=16, compare="lines", compile_timeout=none, time_factor=none, '
            'time_floor=1.0) -> number') in text
    assert '"lines" | "tokens" | "exact"' in text


def test_every_diagnostic_code_is_in_the_error_index(site):
    from rewardlang.diagnostics import CODES

    page = (site / "reference" / "error-index" / "index.html").read_text(encoding="utf-8")
    rows = dict(re.findall(r"<td><code>([EWD]\d{3})</code></td>\s*<td>([^<]*)</td>", page))
    assert {k: html.unescape(v) for k, v in rows.items()} == CODES
    # each links to its worked example, whose anchor exists on the errors page (strict mode checks anchors too)
    assert 'href="../../errors/#e101--unknown-name"' in page


def test_reward_blocks_use_the_lexer_with_no_error_token(site):
    page = (site / "language" / "index.html").read_text(encoding="utf-8")
    # `spec` and `component` are declaration keywords to rewardlang's lexer (Keyword.Declaration: class "kd")
    assert '<span class="kd">spec</span>' in page and '<span class="kd">component</span>' in page
    for built in site.rglob("*.html"):
        if built.parent.name == "errors":
            continue  # its examples are broken on purpose
        assert '<span class="err">' not in built.read_text(encoding="utf-8"), built


def test_pages_and_nav(site):
    for page in ("getting-started", "language", "sandbox", "editors", "specs/codepo", "specs/quality_grpo",
                 "specs/dense_ppo", "specs/prlcoder", "specs/gepo_oorl"):
        assert (site / page / "index.html").exists(), page
    home = (site / "index.html").read_text(encoding="utf-8")
    assert "Getting started" in home and "Error index" in home
    # nothing is loaded from outside (theme fonts off): every stylesheet, script and image is the site's own
    for built in site.rglob("*.html"):
        text = built.read_text(encoding="utf-8")
        assert not re.search(r"<(?:link|script|img)\b[^>]*\b(?:href|src)=\"(?:https?:)?//", text), built


@pytest.mark.slow
def test_the_hook_is_tolerant_but_strict_still_catches_dead_links(tmp_path):
    copy = tmp_path / "repo"
    copy.mkdir()
    shutil.copytree(ROOT / "docs", copy / "docs")
    shutil.copytree(ROOT / "scripts", copy / "scripts", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(ROOT / "specs", copy / "specs")
    for linked in ("rewardlang", "editors", "benchmarks", "examples", "tests", "README.md"):  # what pages link to
        (copy / linked).symlink_to(ROOT / linked)
    shutil.copy(ROOT / "mkdocs.yml", copy / "mkdocs.yml")
    (copy / "docs" / "new-page.md").write_text("# A new page\n\nSee [the spec](../specs/codepo.reward).\n")
    res = _build(copy, tmp_path / "site")
    assert res.returncode == 0, res.stdout + res.stderr
    built = (tmp_path / "site" / "new-page" / "index.html").read_text(encoding="utf-8")
    assert "<code>specs/codepo.reward</code>" in built  # the repository file's path, not a dead link
    assert "A new page" in (tmp_path / "site" / "index.html").read_text(encoding="utf-8")  # in the nav ("More")
    (copy / "docs" / "new-page.md").write_text("# A new page\n\nSee [nothing](../specs/no-such.reward).\n")
    res = _build(copy, tmp_path / "site2")
    assert res.returncode != 0 and "no-such.reward" in res.stdout + res.stderr
