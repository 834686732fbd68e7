"""``rewardlang lsp``: the language server for ``.reward`` files (Language Server Protocol over stdio, pygls).

Features: diagnostics as you type (the checker's, as ``rewardlang check`` prints them: code, range, message,
hint), hover, completion, go to definition, formatting (``rewardlang fmt``), document symbols and semantic tokens.
The answers come from :mod:`rewardlang.lsp.analysis`; this module only translates them to and from the protocol.

Each change re-checks the document at once (a check of ``specs/dense_ppo.reward`` takes tens of milliseconds:
no debounce is needed, and every published diagnostic belongs to the text the editor has). Documents that
import a changed file are re-checked too. Requests answer from the last analysis, so a completion never waits
for a check.
"""

from __future__ import annotations

import logging
import os
import re
import sys
from pathlib import Path
from typing import Any

from lsprotocol import types as T
from pygls.exceptions import JsonRpcException
from pygls.lsp.server import LanguageServer
from pygls.protocol import LanguageServerProtocol
from pygls.uris import from_fs_path, to_fs_path

from rewardlang.lsp import analysis as A
from rewardlang.specfiles import read_spec_file
from rewardlang.version import __version__

#: sys.path entries rewardlang itself was imported from (kept even when the workspace is rewardlang's checkout)
_OWN = {os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))}

__all__ = ["RewardLanguageServer", "serve"]

_SYMBOL_KIND = {
    "module": T.SymbolKind.Module, "namespace": T.SymbolKind.Namespace, "field": T.SymbolKind.Field,
    "constant": T.SymbolKind.Constant, "variable": T.SymbolKind.Variable, "function": T.SymbolKind.Function,
    "property": T.SymbolKind.Property, "operator": T.SymbolKind.Operator, "event": T.SymbolKind.Event,
    "key": T.SymbolKind.Key, "object": T.SymbolKind.Object,
}
_COMPLETION_KIND = {
    "function": T.CompletionItemKind.Function, "variable": T.CompletionItemKind.Variable,
    "constant": T.CompletionItemKind.Constant, "field": T.CompletionItemKind.Field,
    "keyword": T.CompletionItemKind.Keyword, "module": T.CompletionItemKind.Module,
    "property": T.CompletionItemKind.Property, "value": T.CompletionItemKind.Value,
    "snippet": T.CompletionItemKind.Snippet, "class": T.CompletionItemKind.Class,
}


def _range(r: A.Range) -> T.Range:
    return T.Range(T.Position(*r[0]), T.Position(*r[1]))


def _path_of(uri: str) -> str:
    """The file name the checker sees for a document (its path; an unsaved buffer keeps its URI)."""
    path = to_fs_path(uri) if uri.startswith("file:") else None
    return path or uri


#: what a message that could not be read becomes: nothing to handle (its answer, if it was a request, is sent)
_UNREADABLE = object()

# pygls logs a message it cannot read with a traceback (its own, of the converter); the server says it in one line
logging.getLogger("pygls.protocol.json_rpc").addFilter(
    lambda r: not r.getMessage().startswith("Unable to deserialize message"))
_log = logging.getLogger("rewardlang.lsp")


class _Protocol(LanguageServerProtocol):
    """pygls' protocol, answering what a client gets wrong with a plain error (issue 37 item 20).

    pygls never answered a request whose params are not the protocol's (a negative position, ``params: null``, a
    number for a URI): it logged a traceback and dropped the message, so the editor waited for an answer for ever.
    Such a request is answered InvalidParams naming the method and the field; a notification is dropped with a
    line in the log. An error answer never carries a Python traceback (pygls put one in an internal error's
    ``data``): the one-line message says what failed, and the log has the rest."""

    def structure_message(self, data: Any) -> Any:
        if not isinstance(data, dict) or "jsonrpc" not in data:
            return data  # an object inside the message (json.loads' object_hook sees them first)
        try:
            return super().structure_message(data)
        except JsonRpcException as exc:
            method = data.get("method")
            why = _params_problem(exc.__cause__) if exc.__cause__ is not None else str(exc)
            _log.warning("%s: a message the server cannot read (%s)", method or "a response", why)
            if "id" in data and isinstance(method, str) and isinstance(data["id"], (int, str)):
                self._send_response(data["id"], None, T.ResponseError(
                    code=exc.CODE, message=f"{method}: the params are not what the protocol says: {why}"))
            return _UNREADABLE

    def handle_message(self, message: Any) -> None:
        if message is not _UNREADABLE:
            super().handle_message(message)

    def _send_response(self, msg_id: Any, result: Any = None, error: T.ResponseError | None = None) -> None:
        if error is not None and isinstance(error.data, dict) and "traceback" in error.data:
            error = T.ResponseError(code=error.code, message=error.message)  # the log keeps the traceback
        super()._send_response(msg_id, result, error)


def _params_problem(exc: BaseException) -> str:
    """What is wrong in a message's params, in one line (cattrs' own account of where, else the exception's)."""
    try:
        from cattrs import transform_error

        found = transform_error(exc) if isinstance(exc, Exception) else []
    except Exception:  # noqa: BLE001 - an account of an error must not fail in turn
        found = []
    if not found:
        return f"{type(exc).__name__}: {exc}".split("\n")[0]
    # cattrs names the Python attributes (`$.params.text_document`): the client wrote the protocol's (`textDocument`)
    return "; ".join(re.sub(r"_([a-z])", lambda m: m.group(1).upper(), f) for f in found[:3])


class RewardLanguageServer(LanguageServer):
    """pygls server holding the last analysis of each open document."""

    def __init__(self) -> None:
        super().__init__("rewardlang", __version__,
                         text_document_sync_kind=T.TextDocumentSyncKind.Incremental, protocol_cls=_Protocol)
        self.analyses: dict[str, A.Analysis] = {}
        #: the documents the editor opened as specs: the only ones analysed or answered about (a request on another
        #: document, never opened or not a spec, gets nothing: the server never reads a file to answer it)
        self.specs: set[str] = set()
        self.last_good: dict[str, A.Analysis] = {}  # the last analysis whose module parsed: names for completion
        self._sigs: dict[str, Any] | None = None
        self._columns: dict[str, list[str]] = {}

    @property
    def sigs(self) -> dict[str, Any]:
        if self._sigs is None:
            from rewardlang.runtime import registry

            self._sigs = registry.signatures()
        return self._sigs

    def _read(self, path: str) -> str:
        """Imports read the editor's buffer of a file when it is open (unsaved edits count), else the disk (a
        regular file only, bounded: rewardlang.specfiles; the checker has already refused an import that is not a
        `.reward` file in the spec's folder or the search path)."""
        uri = from_fs_path(str(Path(path).resolve()))
        if uri is not None:
            doc = self.workspace.text_documents.get(uri)
            if doc is not None:
                return doc.source
        return read_spec_file(path)

    def check(self, uri: str) -> A.Analysis:
        doc = self.workspace.get_text_document(uri)
        a = A.analyse(doc.source, _path_of(uri), self.sigs, self._read)
        self.analyses[uri] = a
        if a.module is not None:
            self.last_good[uri] = a
        diags = []
        for d in a.diagnostics:
            related = [T.DiagnosticRelatedInformation(T.Location(from_fs_path(f) or f, _range(r)), m)
                       for f, r, m in d.related]
            diags.append(T.Diagnostic(
                range=_range(d.range), message=d.message, code=d.code, source="rewardlang",
                severity=T.DiagnosticSeverity.Warning if d.severity == "warning" else T.DiagnosticSeverity.Error,
                related_information=related or None))
        self.text_document_publish_diagnostics(T.PublishDiagnosticsParams(uri=uri, diagnostics=diags,
                                                                           version=doc.version))
        return a

    def recheck_dependents(self, uri: str) -> None:
        """Re-check the other open documents that read ``uri``'s file (through an import)."""
        path = _path_of(uri)
        from rewardlang.checker import canonical_path

        target = canonical_path(path)
        for other, a in list(self.analyses.items()):
            if other != uri and any(canonical_path(f) == target for f in a.sources):
                self.check(other)

    def columns(self, uri: str) -> list[str]:
        path = _path_of(uri)
        if path not in self._columns:
            self._columns[path] = A.columns_near(path)
        return self._columns[path]


server = RewardLanguageServer()


def is_spec(uri: str, language_id: str) -> bool:
    """Whether a document the editor opens is a spec: its language is `reward`, or its file name ends in
    `.reward` (editors that do not know the language say `plaintext`). Any other document (a `.py` file, a
    `notes.reward.py`) is never analysed, whatever a client that sends every document does."""
    return language_id == "reward" or _path_of(uri).endswith(".reward")


@server.feature(T.TEXT_DOCUMENT_DID_OPEN)
def did_open(ls: RewardLanguageServer, params: T.DidOpenTextDocumentParams) -> None:
    uri = params.text_document.uri
    if not is_spec(uri, params.text_document.language_id):
        return
    ls.specs.add(uri)
    ls.check(uri)
    ls.recheck_dependents(uri)


@server.feature(T.TEXT_DOCUMENT_DID_CHANGE)
def did_change(ls: RewardLanguageServer, params: T.DidChangeTextDocumentParams) -> None:
    uri = params.text_document.uri
    if uri in ls.specs:
        ls.check(uri)
    ls.recheck_dependents(uri)  # an open spec may import it (its buffer is what the import reads)


@server.feature(T.TEXT_DOCUMENT_DID_SAVE)
def did_save(ls: RewardLanguageServer, params: T.DidSaveTextDocumentParams) -> None:
    ls._columns.clear()  # a saved spec may read new columns
    if params.text_document.uri in ls.specs:
        ls.check(params.text_document.uri)


@server.feature(T.TEXT_DOCUMENT_DID_CLOSE)
def did_close(ls: RewardLanguageServer, params: T.DidCloseTextDocumentParams) -> None:
    uri = params.text_document.uri
    ls.specs.discard(uri)
    ls.analyses.pop(uri, None)
    ls.last_good.pop(uri, None)
    # the editor no longer shows it: clear its diagnostics, and re-check dependents against the file on disk
    ls.text_document_publish_diagnostics(T.PublishDiagnosticsParams(uri=uri, diagnostics=[]))
    ls.recheck_dependents(uri)


def _analysis(ls: RewardLanguageServer, uri: str) -> A.Analysis | None:
    """The analysis of an open spec; None for any other document (never opened, closed, not a spec): a request
    on it is answered with nothing (it used to read the file from disk, or fail with a traceback when there was
    none)."""
    if uri not in ls.specs:
        return None
    return ls.analyses.get(uri) or ls.check(uri)


@server.feature(T.TEXT_DOCUMENT_HOVER)
def hover(ls: RewardLanguageServer, params: T.HoverParams) -> T.Hover | None:
    a = _analysis(ls, params.text_document.uri)
    if a is None:
        return None
    found = a.hover(params.position.line, params.position.character)
    if found is None:
        return None
    text, rng = found
    return T.Hover(T.MarkupContent(T.MarkupKind.Markdown, text), _range(rng) if rng else None)


@server.feature(T.TEXT_DOCUMENT_COMPLETION, T.CompletionOptions(trigger_characters=["(", ",", " ", "\""]))
def completion(ls: RewardLanguageServer, params: T.CompletionParams) -> T.CompletionList | None:
    uri = params.text_document.uri
    if uri not in ls.specs:
        return None
    doc = ls.workspace.get_text_document(uri)
    a = ls.last_good.get(uri) or ls.analyses.get(uri)
    items = []
    for c in A.complete(a, doc.source, _path_of(uri), params.position.line, params.position.character, ls.sigs,
                        ls.columns(uri)):
        items.append(T.CompletionItem(
            label=c.label, kind=_COMPLETION_KIND.get(c.kind), detail=c.detail or None,
            documentation=T.MarkupContent(T.MarkupKind.Markdown, c.documentation) if c.documentation else None,
            insert_text=c.insert_text,
            insert_text_format=T.InsertTextFormat.Snippet if c.snippet else T.InsertTextFormat.PlainText,
            sort_text=c.sort + c.label))
    return T.CompletionList(is_incomplete=False, items=items)


@server.feature(T.TEXT_DOCUMENT_DEFINITION)
def definition(ls: RewardLanguageServer, params: T.DefinitionParams) -> T.Location | None:
    a = _analysis(ls, params.text_document.uri)
    if a is None:
        return None
    found = a.definition(params.position.line, params.position.character)
    if found is None:
        return None
    file, rng = found
    uri = params.text_document.uri if file == a.file else (from_fs_path(str(Path(file).resolve())) or file)
    return T.Location(uri, _range(rng))


@server.feature(T.TEXT_DOCUMENT_FORMATTING)
def formatting(ls: RewardLanguageServer, params: T.DocumentFormattingParams) -> list[T.TextEdit] | None:
    if params.text_document.uri not in ls.specs:
        return None
    doc = ls.workspace.get_text_document(params.text_document.uri)
    text = doc.source
    out = A.format_document(text, _path_of(params.text_document.uri))
    if out is None or out == text:
        return [] if out is not None else None  # a spec that does not parse is left as it is
    end = A.LineIndex(text).position(len(text))
    return [T.TextEdit(T.Range(T.Position(0, 0), T.Position(*end)), out)]


@server.feature(T.TEXT_DOCUMENT_DOCUMENT_SYMBOL)
def document_symbol(ls: RewardLanguageServer, params: T.DocumentSymbolParams) -> list[T.DocumentSymbol] | None:
    a = _analysis(ls, params.text_document.uri)
    if a is None:
        return None

    def conv(s: A.Symbol) -> T.DocumentSymbol:
        return T.DocumentSymbol(name=s.name, kind=_SYMBOL_KIND[s.kind], range=_range(s.range),
                                selection_range=_range(s.selection), detail=s.detail or None,
                                children=[conv(k) for k in s.children] or None)

    return [conv(s) for s in a.symbols()]


@server.feature(T.TEXT_DOCUMENT_SEMANTIC_TOKENS_FULL,
                T.SemanticTokensLegend(token_types=list(A.SEMANTIC_TYPES), token_modifiers=list(A.SEMANTIC_MODIFIERS)))
def semantic_tokens(ls: RewardLanguageServer, params: T.SemanticTokensParams) -> T.SemanticTokens | None:
    a = _analysis(ls, params.text_document.uri)
    if a is None:
        return None
    return T.SemanticTokens(data=A.semantic_tokens(a, ls.last_good.get(params.text_document.uri)))


def serve() -> None:
    """Run the server on stdin/stdout until the client sends ``exit``."""
    logging.basicConfig(level=logging.WARNING)  # pygls logs to stderr; stdout carries the protocol
    # the editor starts the server in the workspace: `python -m` puts that folder first on sys.path, where a
    # workspace's `numpy.py` would be what a later import runs. Nothing is imported from there (`rewardlang lsp`,
    # the console script editors run, never had it)
    cwd = os.path.realpath(os.getcwd())
    sys.path[:] = [p for p in sys.path if p and os.path.realpath(p) != cwd or p in _OWN]
    server.start_io()
