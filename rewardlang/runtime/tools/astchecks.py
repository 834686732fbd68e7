"""The four AST analyzers of the quality score, written after the rules of codequal_analyzer.

Each function takes a parsed module and returns finding dicts ``{rule, message, severity, line, col,
end_line, end_col, ...}`` with the ``ast`` positions (UTF-8 byte columns). Their rules follow the original
library's analyzers; where the library's rule is a bug the finding carries a flag that lets the caller
choose (``quirks``): the flagged findings are the ones the library reports and the fixed rule would not.

- :func:`exception_handling` (reliability, CWE-703): bare ``except`` (high), ``except Exception`` (medium),
  a handler whose body is only ``pass`` (high), a ``try`` without handlers (low), a ``try`` without
  ``finally`` that opens a resource (``open(...)`` with arguments, ``.connect()``, ``.cursor()``,
  ``.socket()``) (medium), ``raise X`` without ``from`` inside a ``try`` (medium). Quirks: the library
  flags a raise anywhere in the ``try`` statement (fixed: only inside an ``except`` handler, outside nested
  functions; flag ``outside_handler``) and counts ``with open(...)`` as an unclosed resource (flag
  ``with_only``).
- :func:`data_structure` (performance, CWE-1043): a class with more than 10 attributes (``self.x =`` in
  ``__init__`` plus class-level names) (medium); dict/list literals nested deeper than 5 (medium); a dict
  with more than 10 keys (low), and more than 10 constant keys (medium); a list with more than 20 elements
  (low); a call of a capitalised name with more than 10 positional or keyword arguments (medium).
- :func:`resource_use` (performance, CWE-1050), inside ``for``/``while`` loops: calls of I/O, network,
  blocking or process functions by name (``open``, ``read``, ``get``, ``sleep``, ``execute``, ``call``, ...)
  (medium, high when nested loops), the same as methods of an imported resource module (``os.system``,
  ``time.sleep``), a capitalised constructor with more than 2 arguments (medium), ``x = x + ...``
  (medium), a comprehension assigned (low), ``x += ...`` on a name (medium).
- :func:`string_concat` (performance, CWE-1046), inside loops: ``name + <string-like>`` (medium) and
  ``x += <string-like>`` (medium, high when nested loops); string-like = a string literal, ``str(...)``, or
  an attribute named strip/join/format/replace/lower/upper/title of a name.

    >>> import ast
    >>> tree = ast.parse("try:\\n    f()\\nexcept:\\n    pass\\n")
    >>> [(f["severity"], f["line"]) for f in exception_handling(tree)]
    [('high', 3), ('high', 3)]
"""

from __future__ import annotations

import ast
from typing import Any

__all__ = ["exception_handling", "data_structure", "resource_use", "string_concat", "ANALYZERS"]

Finding = dict[str, Any]


def _finding(node: ast.AST, rule: str, message: str, severity: str, **extra: Any) -> Finding:
    line = getattr(node, "lineno", 1) or 1
    return {
        "rule": rule, "message": message, "severity": severity, "line": line,
        "col": getattr(node, "col_offset", 0) or 0,
        "end_line": getattr(node, "end_lineno", None) or line,
        "end_col": getattr(node, "end_col_offset", None),
        **extra,
    }


# ----------------------------------------------------------------------------------------- exceptions
class _ExceptionVisitor(ast.NodeVisitor):
    RESOURCE_METHODS = ("connect", "cursor", "socket")
    CLOSE_METHODS = ("close", "cleanup", "release", "__exit__")

    def __init__(self) -> None:
        self.findings: list[Finding] = []
        self.in_try = False
        self.in_handler = False
        self.has_finally = False
        self.opened: list[tuple[str, bool]] = []   # (resource kind, opened as a with-item)
        self.closed: list[str] = []
        self.with_items: set[int] = set()

    def _add(self, node: ast.AST, message: str, severity: str, **extra: Any) -> None:
        self.findings.append(_finding(node, "improper-exception-handling", message, severity, **extra))

    def visit_Try(self, node: ast.Try) -> None:
        saved = (self.in_try, self.has_finally, list(self.opened), list(self.closed))
        self.in_try = True
        self.has_finally = bool(node.finalbody)
        self.opened, self.closed = [], []
        for stmt in node.body:
            self.visit(stmt)
        for h in node.handlers:
            if h.type is None:
                self._add(h, "Bare except clause catches all exceptions, including KeyboardInterrupt and "
                             "SystemExit", "high")
            elif isinstance(h.type, ast.Name) and h.type.id == "Exception":
                self._add(h, "Catching Exception is too broad, prefer catching specific exceptions", "medium")
            if len(h.body) == 0 or (len(h.body) == 1 and isinstance(h.body[0], ast.Pass)):
                self._add(h, "Empty except block silently ignores exceptions", "high")
        for h in node.handlers:
            saved_handler = self.in_handler
            self.in_handler = True
            self.visit(h)
            self.in_handler = saved_handler
        for stmt in node.orelse:
            self.visit(stmt)
        if self.opened and not self.has_finally:
            unclosed = sorted({k for k, _ in self.opened} - set(self.closed))
            if unclosed:
                with_only = all(w for _, w in self.opened)
                self._add(node, "Resources may not be properly closed without a finally block: "
                                + ", ".join(unclosed), "medium", with_only=with_only)
        for stmt in node.finalbody:
            self.visit(stmt)
        if not node.handlers:
            self._add(node, "No exception handlers defined, exceptions will propagate without being handled",
                      "low")
        self.in_try, self.has_finally, self.opened, self.closed = saved

    def _visit_scope(self, node: ast.AST) -> None:
        # A nested function or class body is not "inside the handler" for the fixed raise rule; the
        # library's try-state is deliberately left as is (it does not reset it either).
        saved = self.in_handler
        self.in_handler = False
        self.generic_visit(node)
        self.in_handler = saved

    visit_FunctionDef = _visit_scope
    visit_AsyncFunctionDef = _visit_scope
    visit_Lambda = _visit_scope
    visit_ClassDef = _visit_scope

    def visit_With(self, node: ast.With | ast.AsyncWith) -> None:
        for item in node.items:
            self.with_items.add(id(item.context_expr))
        self.generic_visit(node)

    visit_AsyncWith = visit_With

    def visit_Call(self, node: ast.Call) -> None:
        if self.in_try:
            via_with = id(node) in self.with_items
            if isinstance(node.func, ast.Name) and node.func.id == "open":
                if node.args:
                    self.opened.append(("file", via_with))
            elif isinstance(node.func, ast.Attribute) and node.func.attr in self.RESOURCE_METHODS:
                self.opened.append((node.func.attr, via_with))
        if self.has_finally and isinstance(node.func, ast.Attribute) and node.func.attr in self.CLOSE_METHODS:
            self.closed.append("resource")
        self.generic_visit(node)

    def visit_Raise(self, node: ast.Raise) -> None:
        if self.in_try and node.exc is not None and node.cause is None:
            self._add(node, "Raising a new exception inside except block loses original exception context",
                      "medium", outside_handler=not self.in_handler)
        self.generic_visit(node)


def exception_handling(tree: ast.AST) -> list[Finding]:
    """Improper exception handling (reliability, CWE-703); see the module docstring for the rules."""
    v = _ExceptionVisitor()
    v.visit(tree)
    return v.findings


# ---------------------------------------------------------------------------------- data structures
class _DataStructureVisitor(ast.NodeVisitor):
    def __init__(self, max_attributes: int = 10, max_nesting: int = 5) -> None:
        self.findings: list[Finding] = []
        self.max_attributes = max_attributes
        self.max_nesting = max_nesting
        self.nesting = 0

    def _add(self, node: ast.AST, message: str, severity: str) -> None:
        self.findings.append(_finding(node, "excessive-data-structure-complexity", message, severity,
                                      nesting_level=self.nesting))

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        n = 0
        for item in node.body:
            if isinstance(item, ast.FunctionDef) and item.name == "__init__":
                for stmt in item.body:
                    if isinstance(stmt, ast.Assign):
                        n += sum(1 for t in stmt.targets if isinstance(t, ast.Attribute)
                                 and isinstance(t.value, ast.Name) and t.value.id == "self")
            elif isinstance(item, ast.Assign):
                n += sum(1 for t in item.targets if isinstance(t, ast.Name))
        if n > self.max_attributes:
            self._add(node, f"Class '{node.name}' has {n} attributes, which exceeds the recommended maximum "
                            f"of {self.max_attributes}", "medium")
        self.generic_visit(node)

    def visit_Dict(self, node: ast.Dict) -> None:
        saved = self.nesting
        self.nesting += 1
        if self.nesting > self.max_nesting:
            self._add(node, f"Dictionary with excessive nesting level ({self.nesting} > {self.max_nesting})",
                      "medium")
        if len(node.keys) > self.max_attributes:
            self._add(node, f"Dictionary with {len(node.keys)} key-value pairs exceeds recommended maximum of "
                            f"{self.max_attributes}", "low")
            constant_keys = sum(1 for k in node.keys if isinstance(k, ast.Constant))
            if constant_keys > self.max_attributes:
                self._add(node, f"Dictionary with {constant_keys} literal keys may be better represented as a "
                                "named constant or enum", "medium")
        self.generic_visit(node)
        self.nesting = saved

    def visit_List(self, node: ast.List) -> None:
        saved = self.nesting
        self.nesting += 1
        if len(node.elts) > self.max_attributes * 2:
            self._add(node, f"List with {len(node.elts)} elements may be excessively large", "low")
        if self.nesting > self.max_nesting:
            self._add(node, f"List with excessive nesting level ({self.nesting} > {self.max_nesting})", "medium")
        self.generic_visit(node)
        self.nesting = saved

    def visit_Call(self, node: ast.Call) -> None:
        if isinstance(node.func, ast.Name) and node.func.id[:1].isupper():
            if len(node.args) > self.max_attributes or len(node.keywords) > self.max_attributes:
                self._add(node, f"Object creation with {len(node.args) + len(node.keywords)} arguments may be "
                                "excessively complex", "medium")
        self.generic_visit(node)


def data_structure(tree: ast.AST) -> list[Finding]:
    """Excessively large or nested data structures (performance, CWE-1043)."""
    v = _DataStructureVisitor()
    v.visit(tree)
    return v.findings


# ------------------------------------------------------------------------------------ loops: resources
_LOOP_CALLS = frozenset({
    "open", "read", "write", "readline", "readlines",          # files
    "connect", "request", "urlopen", "get", "post",            # network
    "sleep", "wait",                                           # blocking
    "execute", "cursor", "commit",                             # databases
    "subprocess", "system", "Popen", "call",                   # processes
})
_RESOURCE_MODULES = frozenset({
    "time", "socket", "requests", "urllib", "http", "subprocess", "multiprocessing", "threading", "sqlite3",
    "psycopg2", "pymysql", "sqlalchemy", "os", "sys", "io", "aiohttp", "asyncio",
})


class _LoopVisitor(ast.NodeVisitor):
    def __init__(self) -> None:
        self.findings: list[Finding] = []
        self.depth = 0

    def visit_For(self, node: ast.AST) -> None:
        self.depth += 1
        self.generic_visit(node)
        self.depth -= 1

    # ``async for`` is not a loop for the library; kept so
    visit_While = visit_For


class _ResourceVisitor(_LoopVisitor):
    def __init__(self) -> None:
        super().__init__()
        self.imported: set[str] = set()

    def _add(self, node: ast.AST, message: str, severity: str) -> None:
        self.findings.append(_finding(node, "excessive-resource-consumption", message, severity,
                                      loop_depth=self.depth))

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self.imported.add(alias.name.split(".")[0])
        self.generic_visit(node)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.module:
            self.imported.add(node.module.split(".")[0])
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        if self.depth:
            sev = "high" if self.depth > 1 else "medium"
            func = node.func
            if isinstance(func, ast.Name) and func.id in _LOOP_CALLS:
                self._add(node, f"Resource-intensive function '{func.id}' called within a loop", sev)
            elif isinstance(func, ast.Attribute) and func.attr in _LOOP_CALLS:
                if isinstance(func.value, ast.Name):
                    base = func.value.id
                    if any(base.startswith(m) for m in self.imported & _RESOURCE_MODULES):
                        self._add(node, f"Resource-intensive method '{func.attr}' called within a loop", sev)
            elif isinstance(func, ast.Name) and func.id[:1].isupper():
                if len(node.args) > 2 or len(node.keywords) > 2:
                    self._add(node, f"Complex object '{func.id}' created within a loop", "medium")
        self.generic_visit(node)

    def visit_Assign(self, node: ast.Assign) -> None:
        if self.depth:
            value = node.value
            if isinstance(value, ast.BinOp):
                if isinstance(value.op, ast.Add) and isinstance(value.left, ast.Name):
                    if any(isinstance(t, ast.Name) and t.id == value.left.id for t in node.targets):
                        self._add(node, "Growing data structure within a loop", "medium")
            elif isinstance(value, (ast.ListComp, ast.DictComp, ast.SetComp)):
                self._add(node, "Comprehension within a loop may lead to excessive memory consumption", "low")
        self.generic_visit(node)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        if self.depth and isinstance(node.op, ast.Add) and isinstance(node.target, ast.Name):
            self._add(node, f"Growing data structure '{node.target.id}' within a loop using '+='", "medium")
        self.generic_visit(node)


def resource_use(tree: ast.AST) -> list[Finding]:
    """Resource-intensive operations inside loops (performance, CWE-1050)."""
    v = _ResourceVisitor()
    v.visit(tree)
    return v.findings


# ---------------------------------------------------------------------------- loops: string building
_STRING_METHODS = frozenset({"strip", "join", "format", "replace", "lower", "upper", "title"})


def _string_like(node: ast.AST | None) -> bool:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return True
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "str":
        return True
    return isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.attr in _STRING_METHODS


class _ConcatVisitor(_LoopVisitor):
    def _add(self, node: ast.AST, message: str, severity: str) -> None:
        self.findings.append(_finding(node, "inefficient-string-concatenation", message, severity,
                                      loop_depth=self.depth))

    def visit_BinOp(self, node: ast.BinOp) -> None:
        if self.depth and isinstance(node.op, ast.Add) and isinstance(node.left, ast.Name):
            if _string_like(node.left) or _string_like(node.right):
                self._add(node, "String concatenation in a loop using '+' operator can be inefficient", "medium")
        self.generic_visit(node)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        if self.depth and isinstance(node.op, ast.Add):
            if _string_like(node.target) or _string_like(node.value):
                self._add(node, "String concatenation in a loop using '+=' operator can be inefficient",
                          "medium" if self.depth == 1 else "high")
        self.generic_visit(node)


def string_concat(tree: ast.AST) -> list[Finding]:
    """String concatenation inside loops (performance, CWE-1046)."""
    v = _ConcatVisitor()
    v.visit(tree)
    return v.findings


#: analyzer name -> function
ANALYZERS = {
    "exception_handling": exception_handling,
    "data_structure": data_structure,
    "resource_use": resource_use,
    "string_concat": string_concat,
}
