"""mkdocs hooks of rewardlang's documentation site (``hooks:`` in mkdocs.yml).

- Two pages are generated at every build, from the code itself, so neither can drift from it:
  ``reference/functions.md`` from the function registry (every registered function's signature, argument and
  return types, range, options with their types and defaults, its doc, and runnable examples: the ```reward blocks
  of the docs pages that call it, which tests/test_docs_examples.py compiles and runs, and the shipped specs that
  use it), plus the language's own functions from the checker's table; and ``reference/error-index.md`` from
  :data:`rewardlang.diagnostics.CODES` (each code, its title, its class, and its worked example in errors.md).
- A page under docs/ that the nav does not name is added to a "More" section, so a page added by someone who did
  not edit mkdocs.yml is still reachable and never fails the strict build.
- A link from a page to a file of the repository outside docs/ (``../rewardlang/lsp/``, ``../specs/x.reward``:
  right when the page is read on the forge) has no page on the site: it becomes the path in code type. A link to
  a path that does not exist is left alone, so mkdocs still warns about it and the strict build fails.

Run ``mkdocs build --strict`` (or ``mkdocs serve``) from the repository root.
"""

from __future__ import annotations

import html
import os
import re
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
FUNCTIONS, ERRORS = "reference/functions.md", "reference/error-index.md"
_FENCE = re.compile(r"^(`{3,})(\S*)\s*$")
_LINK = re.compile(r"(?<!!)\[([^\]\n]+)\]\(([^)\s]+)\)")
_CLASSES = {"E0": "syntax", "E1": "names and structure", "E2": "types and arguments", "E3": "advantages",
            "E4": "examples", "E5": "sections", "E6": "parameters and resources", "W0": "warning (the spec still "
            "compiles)", "D0": "data rows (score, explain, report)"}


# ---------------------------------------------------------------------- generated pages


def _blocks(text: str) -> list[tuple[str, str]]:
    """(info string, body) of every fenced block of a markdown text."""
    out, lines, i = [], text.splitlines(), 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        j = i + 1
        while j < len(lines) and not re.match(rf"^{m.group(1)}\s*$", lines[j]):
            j += 1
        out.append((m.group(2), "\n".join(lines[i + 1:j])))
        i = j + 1
    return out


def _examples(docs_dir: Path) -> list[tuple[str, str]]:
    """(page, block) for every complete ```reward block of the docs (the blocks the doc tests compile and run)."""
    out = []
    for page in sorted(docs_dir.rglob("*.md")):
        if page.name == "errors.md":
            continue  # its blocks are errors on purpose
        for info, body in _blocks(page.read_text(encoding="utf-8")):
            if info == "reward":
                out.append((page.relative_to(docs_dir).as_posix(), body))
    return out


def _code(text: str) -> str:
    """Code in a table cell: a `|` inside backticks would stay escaped (Python-Markdown), so HTML it is."""
    return "<code>" + html.escape(" ".join(text.split())).replace("|", "&#124;") + "</code>"


def _md(text: str) -> str:
    """Prose for one table cell: `<` escaped outside code spans (inside them an entity would show as typed)."""
    parts = re.split(r"(`[^`]*`)", " ".join(text.split()))
    return "".join(p if p.startswith("`") else p.replace("<", "&lt;") for p in parts).replace("|", "\\|")


def _default(v: Any) -> str:
    """A default as a .reward literal (tuples as lists): :func:`rewardlang.signature.literal`."""
    from rewardlang.signature import literal

    return literal(v)


def _type_name(annotation: Any) -> str:
    """An option's Python type for a reader: ``"a" | "b"`` for a Literal, ``T?`` for Optional."""
    import types
    import typing

    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Literal:
        return " | ".join(_default(a) for a in args)
    if origin in (typing.Union, types.UnionType) and type(None) in args:
        rest = [a for a in args if a is not type(None)]
        return (_type_name(rest[0]) if len(rest) == 1 else " | ".join(_type_name(a) for a in rest)) + "?"
    if args:
        return str(annotation).replace("typing.", "")
    return getattr(annotation, "__name__", str(annotation))


def _usage(name: str, sig: Any) -> str:
    """The signature as the language writes it (``lang = "python"``, ``none``, ``true``)."""
    return sig.usage(name)


def functions_page(docs_dir: Path) -> str:
    """The function reference, from the registry and the checker (see the module docstring)."""
    from rewardlang.lsp.analysis import LANGUAGE_FUNCTIONS
    from rewardlang.runtime import registry
    from rewardlang.signature import MISSING

    impls = registry.load_all()
    examples = _examples(docs_dir)
    specs = {p.relative_to(ROOT).as_posix(): p.read_text(encoding="utf-8")
             for p in sorted((ROOT / "specs").rglob("*.reward"))}
    by_module: dict[str, list[str]] = {}
    for name, impl in sorted(impls.items()):
        by_module.setdefault(impl.module.rsplit(".", 1)[-1] or "plug-ins", []).append(name)
    out = ["# Function reference", "",
           ("Generated at every build of this site from the function registry (`rewardlang.runtime.registry`: "
           "rewardlang's own functions and installed plug-ins) and from the checker's table of language "
           "functions, so it always matches the code (`rewardlang functions` prints the same from the command "
           "line). Each **example** is a ```` ```reward ```` block of these docs that calls the function: the doc "
           "tests (`tests/test_docs_examples.py`) compile it and run its `example` blocks."), "",
           (f"{len(impls)} registered functions in {len(by_module)} modules; "
           f"{len(LANGUAGE_FUNCTIONS)} language functions."), "", "## Language functions", "",
           "Built into the language (the checker types them; no registry entry).", "",
           "| function | description |", "|---|---|"]
    for _name, (usage, doc) in sorted(LANGUAGE_FUNCTIONS.items()):
        out.append(f"| {_code(usage)} | {_md(doc)} |")
    for module, names in sorted(by_module.items()):
        out += ["", f"## {module}", "", f"Module `{impls[names[0]].module}`.", ""]
        for name in names:
            sig = impls[name].signature
            call = re.compile(rf"(?<![\w.]){re.escape(name)}\s*\(")
            out += [f"### {name}", "", "```reward", _usage(name, sig), "```", ""]
            facts = [f"**returns** `{sig.returns}`" + (f" in [{sig.range[0]:g}, {sig.range[1]:g}]" if sig.range
                                                       else "")]
            if sig.tags:
                facts.append("**tags** " + ", ".join(f"`{t}`" for t in sig.tags))
            if sig.spans_of:
                facts.append(f"**positions** relative to `{sig.spans_of}`")
            out += ["; ".join(facts), ""]
            if sig.doc:
                out += [_md(sig.doc).replace("\\|", "|"), ""]
            out += ["| argument | type | default | constant |", "|---|---|---|---|"]
            for a in sig.args:
                out.append(f"| `{'*' if a.variadic else ''}{a.name}` | `{a.type}` | "
                           f"{'' if a.default is MISSING else '`' + _default(a.default) + '`'} | "
                           f"{'yes' if a.static else ''} |")
            if sig.params is not None and sig.params.model_fields:
                out += ["", "| option | type | default | description |", "|---|---|---|---|"]
                for oname, f in sig.params.model_fields.items():
                    d = f.default_factory() if f.default_factory is not None else f.default  # type: ignore[call-arg]
                    out.append(f"| `{oname}` | {_code(_type_name(f.annotation))} | {_code(_default(d))} | "
                               f"{_md(f.description or '')} |")
            shown = sorted(((p, b) for p, b in examples if call.search(b)), key=lambda pb: len(pb[1]))
            if shown and len(shown[0][1].splitlines()) <= 40:
                page, body = shown[0]
                out += ["", f"Example (from [{page}](../{page})):", "", "```reward", body, "```"]
            used = [p for p, text in specs.items() if call.search(text)]
            if used:
                out += ["", "Used by the shipped specs: " + ", ".join(f"`{p}`" for p in used) + "."]
            out.append("")
    return "\n".join(out) + "\n"


def error_index_page(docs_dir: Path) -> str:
    """The error index, from the diagnostic codes (see the module docstring)."""
    from pymdownx.slugs import slugify

    from rewardlang.diagnostics import CODES

    slug = slugify(case="lower")
    errors = (docs_dir / "errors.md").read_text(encoding="utf-8") if (docs_dir / "errors.md").exists() else ""
    worked = {m.group(1): slug(m.group(0)[3:], "-") for m in re.finditer(r"^## ([EWD]\d{3}) — .*$", errors, re.MULTILINE)}
    out = ["# Error index", "",
           ("Every diagnostic code rewardlang has, generated at every build of this site from "
           "`rewardlang.diagnostics.CODES` (the table the compiler reports from), so no code is missing here. "
           "The codes are stable; [Error codes with examples](../errors.md) shows each one's real output on a "
           "minimal spec and the fix."), "", "| code | title | class | worked example |", "|---|---|---|---|"]
    for code, title in CODES.items():
        link = f"[{code}](../errors.md#{worked[code]})" if code in worked else "–"
        out.append(f"| `{code}` | {html.escape(title)} | {_CLASSES.get(code[:2], '')} | {link} |")
    return "\n".join(out) + "\n"


# ---------------------------------------------------------------------- hooks


def _nav_files(nav: Any) -> set[str]:
    found: set[str] = set()
    if isinstance(nav, str):
        found.add(nav)
    elif isinstance(nav, dict):
        for v in nav.values():
            found |= _nav_files(v)
    elif isinstance(nav, list):
        for v in nav:
            found |= _nav_files(v)
    return found


_added: dict[str, Any] = {}


def on_files(files: Any, config: Any) -> Any:
    from mkdocs.structure.files import File

    docs_dir = Path(config["docs_dir"])
    files.append(File.generated(config, FUNCTIONS, content=functions_page(docs_dir)))
    files.append(File.generated(config, ERRORS, content=error_index_page(docs_dir)))
    if config["nav"] is not None:
        nav = config["nav"]
        nav[:] = [x for x in nav if x is not _added.get("more")]  # `mkdocs serve` rebuilds with the same config
        listed = _nav_files(nav)
        extra = sorted(f.src_uri for f in files.documentation_pages() if f.src_uri not in listed)
        if extra:
            _added["more"] = {"More": extra}
            nav.append(_added["more"])
    return files


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    docs_dir = Path(os.path.normpath(config["docs_dir"]))
    here = (docs_dir / page.file.src_uri).parent

    def fix(m: re.Match) -> str:
        text, target = m.group(1), m.group(2)
        if re.match(r"^[a-z][a-z0-9+.-]*:|^#|^/", target):
            return m.group(0)  # a URL, an anchor of this page, or absolute: left to mkdocs
        path = Path(os.path.normpath(here / target.split("#", 1)[0]))  # lexically: a symlinked folder stays
        try:
            rel = path.relative_to(ROOT).as_posix()
        except ValueError:
            return m.group(0)
        if path.is_relative_to(docs_dir) or not path.exists():
            return m.group(0)  # a page of the site, or a link to nothing: mkdocs checks (and strict fails) it
        rel = rel + ("/" if path.is_dir() else "")
        bare = text.strip("`")
        return f"`{rel}`" if rel.rstrip("/").endswith(bare.rstrip("/")) else f"{text} (`{rel}`)"

    out, fence = [], None
    for line in markdown.split("\n"):
        m = _FENCE.match(line.strip()) if fence is None else None
        if fence is not None:
            if re.match(rf"^\s*{fence}\s*$", line):
                fence = None
        elif m:
            fence = m.group(1)
        else:
            line = _LINK.sub(fix, line)
        out.append(line)
    return "\n".join(out)


if __name__ == "__main__":  # print a generated page: python scripts/mkdocs_hooks.py functions|errors
    import sys

    which = sys.argv[1] if len(sys.argv) > 1 else "functions"
    print((functions_page if which == "functions" else error_index_page)(ROOT / "docs"), end="")
