"""The exact fast paths of the text functions agree with the plain `re` definitions they replace."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from rewardlang.runtime.api import Context
from rewardlang.runtime.components.text import TagParams, tag
from rewardlang.runtime.kernels import Pattern

TEXT = st.lists(st.sampled_from(list("ab12.) \n\t(xZ<>/") + ["<t>", "</t>", "\n\n", "3."]), max_size=40).map("".join)


@settings(max_examples=400, deadline=None)
@given(TEXT, st.sampled_from([r"^\s*\d{1,2}\.", r"^\s*[a-zA-Z]\)", r"^\d", r"^a+b?", r"^(x)\)", r"^\s*"]))
def test_line_start_count_equals_findall(text: str, pattern: str) -> None:
    p = Pattern("regex", pattern, "m")
    assert p.counter()(text) == len(p.regex.findall(text))


def test_line_start_fast_path_is_used_only_where_exact() -> None:
    from rewardlang.runtime.kernels import _line_start_counter

    assert _line_start_counter(Pattern("regex", r"^\s*\d{1,2}\.", "m")) is not None
    assert _line_start_counter(Pattern("regex", r"^\s*", "m")) is None        # can match empty
    assert _line_start_counter(Pattern("regex", r"^a|b", "m")) is None        # top-level alternation
    assert _line_start_counter(Pattern("regex", r"^a", "")) is None           # not MULTILINE


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(["<t>", "</t>", "x", "\n", " ", "<", "t>", "</"]), max_size=30).map("".join))
def test_tag_find_equals_nongreedy_dotall_regex(text: str) -> None:
    r = tag.fn([text], "t", params=TagParams(), ctx=Context())
    m = re.search(r"<t>(.*?)</t>", text, re.DOTALL)
    assert r.values[0] == (m.group(1) if m else None)
    assert r.offsets[0] == (m.start(1) if m else None)
