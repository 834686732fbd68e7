"""Comment and docstring removal, exactly as CodeBLEU does it before its syntax and dataflow matches.

The reference implementation (``codebleu`` 0.7.0, ``parser/utils.py``) rebuilds the text from Python's
``tokenize`` stream: comments are dropped, a STRING token is dropped when it follows an INDENT or a NEWLINE
token or starts in column 0 (docstrings, but also any statement-level string), gaps between tokens become
spaces (so a backslash continuation joins its lines), and blank lines are removed. When ``tokenize`` fails
(bad indentation, an unterminated triple-quoted string or bracket) the caller keeps the original text:
:func:`strip_python` returns ``None`` then.

:func:`strip_python` runs the algorithm of CPython 3.11's ``tokenize._tokenize`` (same regular expressions,
same states) fused with the rebuilding, without creating token objects, and copies a line verbatim when it
holds no character that could make its rebuilt text differ (``# ' " \\ tab form-feed CR``): there every gap
between tokens is made of spaces, so the rebuilt line is the line. :func:`strip_python_reference` is the
plain ``tokenize`` version; the tests check that both agree.

Example::

    >>> strip_python('def f(x):\\n    "Doc."\\n    return x  # note\\n')
    'def f(x):\\n    return x  '
"""

from __future__ import annotations

import io
import re
import tokenize

__all__ = ["strip_or_keep", "strip_python", "strip_python_reference"]

_COMMENT = tokenize.COMMENT
_STRING = tokenize.STRING
_INDENT = tokenize.INDENT
_DEDENT = tokenize.DEDENT
_NEWLINE = tokenize.NEWLINE
_NL = tokenize.NL
_NAME = tokenize.NAME
_NUMBER = tokenize.NUMBER
_OP = tokenize.OP
_ERRORTOKEN = tokenize.ERRORTOKEN
_ENDMARKER = tokenize.ENDMARKER

# tokenize's own patterns, so that tokens are cut exactly where tokenize cuts them
_PSEUDO = re.compile(tokenize.PseudoToken, re.UNICODE)
_ENDPROGS = {k: re.compile(v, re.UNICODE) for k, v in tokenize.endpats.items() if v is not None}
_TRIPLE = tokenize.triple_quoted
_SINGLE = tokenize.single_quoted
_TABSIZE = tokenize.tabsize
#: characters after which a line's rebuilt text may differ from the line
_SPECIAL = re.compile(r"[#'\"\\\t\f\r]")


class _Fail(Exception):
    pass


def strip_python(source: str) -> str | None:
    """``source`` without comments and docstrings, or ``None`` where ``tokenize`` rejects it."""
    try:
        return _strip(source)
    except (_Fail, IndentationError):
        return None


def _strip(source: str) -> str:
    out: list[str] = []
    append = out.append
    prev = _INDENT
    last_lineno = -1
    last_col = 0

    def emit(ttype: int, tstr: str, srow: int, scol: int, erow: int, ecol: int) -> None:
        nonlocal prev, last_col, last_lineno
        if srow > last_lineno:
            last_col = 0
        if scol > last_col:
            append(" " * (scol - last_col))
        if ttype == _COMMENT:
            pass
        elif ttype == _STRING:
            if prev != _INDENT and prev != _NEWLINE and scol > 0:
                append(tstr)
        else:
            append(tstr)
        prev = ttype
        last_col = ecol
        last_lineno = erow

    # the lines io.StringIO(source).readline would return
    parts = source.split("\n")
    lines = [p + "\n" for p in parts[:-1]]
    if parts[-1]:
        lines.append(parts[-1])
    n_lines = len(lines)

    lnum = parenlev = continued = 0
    contstr, needcont = "", 0
    contline = ""
    strstart = (0, 0)
    endprog: re.Pattern[str] | None = None
    indents = [0]
    last_line = ""
    line = ""
    pseudo_match = _PSEUDO.match
    special = _SPECIAL.search
    while True:
        last_line = line
        line = lines[lnum] if lnum < n_lines else ""
        lnum += 1
        pos, max_ = 0, len(line)

        if contstr:
            if not line:
                raise _Fail("EOF in multi-line string")
            assert endprog is not None
            endmatch = endprog.match(line)
            if endmatch:
                pos = end = endmatch.end(0)
                emit(_STRING, contstr + line[:end], strstart[0], strstart[1], lnum, end)
                contstr, needcont = "", 0
                contline = ""
            elif needcont and line[-2:] != "\\\n" and line[-3:] != "\\\r\n":
                emit(_ERRORTOKEN, contstr + line, strstart[0], strstart[1], lnum, len(line))
                contstr = ""
                contline = ""
                continue
            else:
                contstr = contstr + line
                contline = contline + line
                continue
        elif parenlev == 0 and not continued:
            if not line:
                break
            column = 0
            while pos < max_:
                c = line[pos]
                if c == " ":
                    column += 1
                elif c == "\t":
                    column = (column // _TABSIZE + 1) * _TABSIZE
                elif c == "\f":
                    column = 0
                else:
                    break
                pos += 1
            if pos == max_:
                break
            c = line[pos]
            if c in "#\r\n":
                if c == "#":
                    comment_token = line[pos:].rstrip("\r\n")
                    emit(_COMMENT, comment_token, lnum, pos, lnum, pos + len(comment_token))
                    pos += len(comment_token)
                emit(_NL, line[pos:], lnum, pos, lnum, len(line))
                continue
            if column > indents[-1]:
                indents.append(column)
                emit(_INDENT, line[:pos], lnum, 0, lnum, pos)
            while column < indents[-1]:
                if column not in indents:
                    raise _Fail("unindent does not match any outer indentation level")
                indents = indents[:-1]
                emit(_DEDENT, "", lnum, pos, lnum, pos)
        else:
            if not line:
                raise _Fail("EOF in multi-line statement")
            continued = 0

        if pos < max_ and not special(line, pos):
            # Fast path: only names, numbers, operators, stray characters and spaces up to the newline.
            # Every gap is spaces, so padding plus token texts rebuild line[pos:] exactly.
            has_newline = line[-1] == "\n"
            if has_newline or line[pos:].strip(" "):
                if last_lineno < lnum:
                    last_col = 0
                if pos > last_col:
                    append(" " * (pos - last_col))
                append(line[pos:])
                parenlev += (line.count("(", pos) + line.count("[", pos) + line.count("{", pos)
                             - line.count(")", pos) - line.count("]", pos) - line.count("}", pos))
                # the line's last token: its newline (NL inside brackets), else some operand or operator
                prev = (_NL if parenlev > 0 else _NEWLINE) if has_newline else _OP
                last_col = max_
                last_lineno = lnum
            continue

        while pos < max_:
            pseudomatch = pseudo_match(line, pos)
            if pseudomatch:
                start, end = pseudomatch.span(1)
                pos = end
                if start == end:
                    continue
                token, initial = line[start:end], line[start]
                if initial in "0123456789" or (initial == "." and token != "." and token != "..."):
                    emit(_NUMBER, token, lnum, start, lnum, end)
                elif initial in "\r\n":
                    emit(_NL if parenlev > 0 else _NEWLINE, token, lnum, start, lnum, end)
                elif initial == "#":
                    emit(_COMMENT, token, lnum, start, lnum, end)
                elif token in _TRIPLE:
                    endprog = _ENDPROGS[token]
                    endmatch = endprog.match(line, pos)
                    if endmatch:
                        pos = endmatch.end(0)
                        emit(_STRING, line[start:pos], lnum, start, lnum, pos)
                    else:
                        strstart = (lnum, start)
                        contstr = line[start:]
                        contline = line
                        break
                elif initial in _SINGLE or token[:2] in _SINGLE or token[:3] in _SINGLE:
                    if token[-1] == "\n":
                        strstart = (lnum, start)
                        endprog = (_ENDPROGS.get(initial) or _ENDPROGS.get(token[1])
                                   or _ENDPROGS.get(token[2]))
                        contstr, needcont = line[start:], 1
                        contline = line
                        break
                    emit(_STRING, token, lnum, start, lnum, end)
                elif initial.isidentifier():
                    emit(_NAME, token, lnum, start, lnum, end)
                elif initial == "\\":
                    continued = 1
                else:
                    if initial in "([{":
                        parenlev += 1
                    elif initial in ")]}":
                        parenlev -= 1
                    emit(_OP, token, lnum, start, lnum, end)
            else:
                emit(_ERRORTOKEN, line[pos], lnum, pos, lnum, pos + 1)
                pos += 1

    if last_line and last_line[-1] not in "\r\n" and not last_line.strip().startswith("#"):
        emit(_NEWLINE, "", lnum - 1, len(last_line), lnum - 1, len(last_line) + 1)
    # the remaining DEDENT and ENDMARKER tokens sit at column 0 of a new row: they add nothing
    return "\n".join(x for x in "".join(out).split("\n") if x.strip() != "")


def strip_python_reference(source: str) -> str | None:
    """The same through ``tokenize.generate_tokens`` (slower; kept as the executable specification)."""
    out: list[str] = []
    prev = _INDENT
    last_lineno = -1
    last_col = 0
    try:
        for ttype, tstr, (srow, scol), (erow, ecol), _ in tokenize.generate_tokens(io.StringIO(source).readline):
            if srow > last_lineno:
                last_col = 0
            if scol > last_col:
                out.append(" " * (scol - last_col))
            if ttype == _COMMENT:
                pass
            elif ttype == _STRING:
                if prev != _INDENT and prev != _NEWLINE and scol > 0:
                    out.append(tstr)
            else:
                out.append(tstr)
            prev = ttype
            last_col = ecol
            last_lineno = erow
    except Exception:  # noqa: BLE001 - the reference falls back to the raw text
        return None
    return "\n".join(line for line in "".join(out).split("\n") if line.strip() != "")


def strip_or_keep(source: str) -> str:
    """:func:`strip_python`, or ``source`` unchanged where it fails (the reference's behaviour)."""
    stripped = strip_python(source)
    return source if stripped is None else stripped
