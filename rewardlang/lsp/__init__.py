"""Editor support for ``.reward`` files: the language server (``rewardlang lsp``) and what it is built on.

:mod:`rewardlang.lsp.analysis` answers the editor's questions (diagnostics, hover, completion, definitions,
symbols, formatting) from the checker and the registry, with no protocol in it; :mod:`rewardlang.lsp.server`
speaks the Language Server Protocol over stdio with pygls. Neither is imported by ``import rewardlang``: pygls
loads only when ``rewardlang lsp`` runs.
"""
