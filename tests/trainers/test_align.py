"""TokenAligner: exact character ends of generated tokens (golden cases under real tokenizers) and the overlap rule."""

from __future__ import annotations

import random

import pytest
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast

from rewardlang.trainers.align import TokenAligner, prefix_char_ends
from rewardlang.trainers.grpo import token_advantages
from rewardlang.trainers.model import build_tokenizer


@pytest.fixture(scope="module")
def tok():
    return build_tokenizer(300)  # the repo's byte-level BPE, trained locally on HumanEval's text


@pytest.fixture(scope="module")
def metaspace() -> PreTrainedTokenizerFast:
    """A SentencePiece-style tokenizer (Metaspace, leading "▁" on every word), trained locally."""
    t = Tokenizer(models.BPE(unk_token="<unk>"))
    t.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always")
    t.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="always")
    t.train_from_iterator(["hello world def return x y foo bar " * 3, "a b c the quick brown fox"],
                          trainers.BpeTrainer(vocab_size=200, special_tokens=["<unk>", "</s>"], show_progress=False))
    return PreTrainedTokenizerFast(tokenizer_object=t, eos_token="</s>", unk_token="<unk>")


def test_byte_pieces_of_one_character_give_it_to_the_completing_token(tok) -> None:
    # "é" is the bytes C3 A9: two byte-level pieces "Ã" "©"; the first completes nothing
    ids = tok.convert_tokens_to_ids(["a", "Ã", "©", "b"])
    aligner = TokenAligner(tok)
    assert aligner.align(ids) == ("aéb", [1, 1, 2, 3])
    # a 4-byte emoji split over four byte tokens, then ASCII
    emoji_ids = tok("😀x")["input_ids"]
    text, ends = aligner.align(emoji_ids)
    assert text == "😀x" and ends[-1] == 2 and ends[-2] == 1 and all(e in (0, 1) for e in ends[:-1])
    assert aligner.fallbacks == 0


def test_special_tokens_have_zero_width_and_eos_mid_sequence(tok) -> None:
    a, b = tok.convert_tokens_to_ids(["a", "b"])
    eos, user = tok.eos_token_id, tok.convert_tokens_to_ids("<|user|>")
    aligner = TokenAligner(tok)
    assert aligner.align([a, eos, b, user, eos]) == ("ab", [1, 1, 2, 2, 2])
    assert aligner.align([eos]) == ("", [0])
    assert aligner.align([]) == ("", [])
    assert aligner.fallbacks == 0


def test_non_canonical_split_is_exact(tok) -> None:
    # "return" as single characters instead of its merged token: the model may generate either
    singles = tok.convert_tokens_to_ids(list("return"))
    assert TokenAligner(tok).char_ends(singles) == [1, 2, 3, 4, 5, 6]
    merged = tok("return")["input_ids"]
    assert len(merged) < 6 and TokenAligner(tok).char_ends(merged)[-1] == 6


def test_leading_space_tokenizer(metaspace) -> None:
    ids = metaspace("hello world  foo x")["input_ids"]
    assert metaspace.convert_ids_to_tokens(ids) == ["▁hello", "▁world", "▁", "▁foo", "▁x"]
    aligner = TokenAligner(metaspace)
    # the first word's "▁" is not text (prepend_scheme="always"), every later one is a space
    assert aligner.align(ids) == ("hello world  foo x", [5, 11, 12, 16, 18])
    # after an EOS mid-sequence the next word keeps its space, in the whole decode as in the stream
    text, ends = aligner.align([*ids, metaspace.eos_token_id, ids[0]])
    assert text == "hello world  foo x hello" and ends == [5, 11, 12, 16, 18, 18, 24]
    assert aligner.fallbacks == 0


def test_fallback_when_pieces_do_not_join_to_the_decoded_text() -> None:
    # transformers' clean-up (" ." -> ".") applies to the whole decode only: the stream's pieces differ
    vocab = {"▁a": 0, "▁.": 1, "▁b": 2, "[UNK]": 3, "</s>": 4}
    t = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    t.pre_tokenizer, t.decoder = pre_tokenizers.Metaspace(), decoders.Metaspace()
    pt = PreTrainedTokenizerFast(tokenizer_object=t, clean_up_tokenization_spaces=True, eos_token="</s>")
    aligner = TokenAligner(pt)
    assert aligner.align([0, 1, 2, 4, 0]) == ("a. b a", [1, 2, 4, 4, 6])
    assert aligner.fallbacks == 1


def test_stream_equals_prefix_decoding_on_random_ids(tok) -> None:
    """Property: any id sequence (specials, invalid UTF-8 included) gets the prefix-decoding reference's ends."""
    rng = random.Random(0)
    aligner = TokenAligner(tok)
    for _ in range(200):
        ids = [rng.randrange(len(tok)) for _ in range(rng.randrange(1, 25))]
        text, ends = aligner.align(ids)
        assert text == tok.decode(ids, skip_special_tokens=True)
        assert ends == prefix_char_ends(tok, ids, text)
    for text in ["def f(x):\n    return x * 2", "é → ✓ 漢 😀", "\ttabs\n\n  and spaces  "]:
        ids = tok(text)["input_ids"]
        before = aligner.fallbacks
        assert aligner.char_ends(ids) == prefix_char_ends(tok, ids)
        assert aligner.fallbacks == before  # valid text: the fast path reproduces the decode


def test_spans_to_tokens_overlap_rule_and_default() -> None:
    ends = [3, 5, 5, 9, 10]  # tokens [0,3) [3,5) [5,5) [5,9) [9,10): the third has width 0
    got = TokenAligner.spans_to_tokens([(4, 6, -2.0, "bad"), (9, 10, 0.5, "x"), (-1, -1, 9.0, "unplaced")], ends)
    assert got.tolist() == [0.0, -2.0, 0.0, -2.0, 0.5]
    lint = TokenAligner.spans_to_tokens([(4, 6, -1.0), (5, 7, -1.0)], ends, default=1.0)
    assert lint.tolist() == [1.0, -1.0, 0.0, -2.0, 1.0]
    assert TokenAligner.spans_to_tokens([], [], default=1.0).tolist() == []
    assert TokenAligner.last_token(5) == 4 and TokenAligner.last_token(0) == -1


def test_spans_to_tokens_matches_the_quadratic_rule() -> None:
    rng = random.Random(1)
    for _ in range(300):
        ends = sorted(rng.randrange(0, 40) for _ in range(rng.randrange(1, 12)))
        spans = [(s, s + rng.randrange(0, 8), rng.choice([-1.0, 0.5, 2.0])) for s in
                 (rng.randrange(-1, 42) for _ in range(rng.randrange(0, 5)))]
        starts = [0, *ends[:-1]]
        want = [sum(v for s, e, v in spans if s >= 0 and a < e and b > s and b > a) for a, b in zip(starts, ends)]
        assert TokenAligner.spans_to_tokens(spans, ends).tolist() == pytest.approx(want)
        assert token_advantages(0.5, spans, ends, len(ends) + 2) == pytest.approx([0.5 + w for w in want] + [0, 0])


def _bytes_bpe() -> PreTrainedTokenizerFast:
    """Byte-level BPE whose tokens mix whole characters with the first bytes of a multi-byte one: "aÃ" is "a"
    plus the first byte (C3) of "é", "©b" its last byte (A9) plus "b"; "x\\xf0\\x9f" two bytes of a 4-byte emoji."""
    bl = pre_tokenizers.ByteLevel.alphabet()
    vocab = {c: i for i, c in enumerate(sorted(bl))}
    merges = []
    for a, b in [("a", "Ã"), ("©", "b"), ("x", "ð"), ("xð", "Ł")]:
        vocab[a + b] = len(vocab)
        merges.append((a, b))
    t = Tokenizer(models.BPE(vocab=vocab, merges=merges))
    t.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    t.decoder = decoders.ByteLevel()
    t.add_special_tokens(["</s>"])
    return PreTrainedTokenizerFast(tokenizer_object=t, eos_token="</s>")


def test_a_token_with_whole_characters_and_the_first_bytes_of_another_keeps_its_characters() -> None:
    """issue 22 (b): the stream held back a token's complete characters with the partial bytes after them (width
    0, the characters went to the next token); the reference gives them to the token itself."""
    tok = _bytes_bpe()
    ids = tok.convert_tokens_to_ids(["aÃ", "©b"])
    assert tok.decode(ids) == "aéb"
    aligner = TokenAligner(tok)
    assert aligner.align(ids) == ("aéb", [1, 3]) == ("aéb", prefix_char_ends(tok, ids))
    emoji = tok.convert_tokens_to_ids(["xðŁ", "ĺ", "Ģ", "a"])  # "x" + F0 9F, then 98, 80: "x😀a"
    assert tok.decode(emoji) == "x😀a"
    assert aligner.char_ends(emoji) == prefix_char_ends(tok, emoji) == [1, 1, 2, 3]
    with_eos = [ids[0], tok.eos_token_id, ids[1]]
    assert aligner.char_ends(with_eos) == prefix_char_ends(tok, with_eos) == [1, 1, 3]
    assert aligner.fallbacks == 0
