"""`train.few_shot`: example problems and answers shown before every problem, the same way in training, in the
held-out evaluation and in `rewardlang eval` (issue 34: a small model copies a shown answer's form)."""

from __future__ import annotations

import pytest

import rewardlang
from rewardlang.trainers.config import ConfigError, resolve_config
from rewardlang.trainers.data import build_dataset, present, render_prompt
from rewardlang.trainers.model import build_tokenizer

SHOTS = ["def add(a, b):\n", "<answer>return a + b</answer>"]


def test_chat_prompts_get_the_examples_as_earlier_turns_through_the_template() -> None:
    got = present("def f():\n", True, "S", "Complete:\n{prompt}", SHOTS)
    assert got == [{"role": "system", "content": "S"},
                   {"role": "user", "content": "Complete:\ndef add(a, b):\n"},
                   {"role": "assistant", "content": "<answer>return a + b</answer>"},
                   {"role": "user", "content": "Complete:\ndef f():\n"}]
    # a chat prompt keeps its own system message first; the examples go before its turns
    chat = [{"role": "system", "content": "own"}, {"role": "user", "content": "q"}]
    assert [m["content"] for m in present(chat, True, "S", None, SHOTS)] == ["own", SHOTS[0], SHOTS[1], "q"]
    assert present(chat, True, "S", None) is chat  # nothing to add: the prompt as given
    # text format: each example, its answer, then the problem
    assert present("def f():\n", False, None, None, SHOTS) == (
        "def add(a, b):\n\n<answer>return a + b</answer>\n\ndef f():\n")


def test_the_setting_is_checked_and_reaches_training_and_evaluation() -> None:
    with pytest.raises(ConfigError, match="even number of texts; got 3"):
        resolve_config({"few_shot": ["a", "b", "c"]})
    with pytest.raises(ConfigError, match="must be a list of strings"):
        resolve_config(None, None, {"train.few_shot": "a"})
    cfg, sources = resolve_config(rewardlang.loads('component k = 1\ntrain { few_shot = ["q", "a"] }').train)
    assert cfg.few_shot == ["q", "a"] and sources["few_shot"] == "spec train section"
    tok = build_tokenizer(512)
    data, _ = build_dataset([{"prompt": "def f():\n"}], ["prompt"], tok, "chat", system_prompt="S",
                            few_shot=SHOTS)
    assert [m["role"] for m in data[0]["prompt"]] == ["system", "user", "assistant", "user"]
    text = render_prompt("def f():\n", tok, True, "S", None, SHOTS)
    assert text.index("<answer>return a + b</answer>") < text.index("def f():")
