"""Source-code analysis shared by the code components: a cached tree-sitter parse layer
(:mod:`~rewardlang.runtime.code.parse`), comment/docstring stripping, flattened syntax trees, dataflow graphs and
the CodeBLEU internals (:mod:`~rewardlang.runtime.code.codebleu`).

Importing this package is cheap: tree-sitter and the grammars load on first use.
"""
