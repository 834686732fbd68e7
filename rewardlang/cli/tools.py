"""Commands about the installation and editors: ``lsp``, ``functions``, ``doctor``."""

from __future__ import annotations

import typer

from rewardlang.cli.common import _err, _print_tree


def lsp() -> None:
    """Run the language server (Language Server Protocol on stdin/stdout) for editors; see docs/editors.md."""
    try:
        from rewardlang.lsp.server import serve
    except ImportError as exc:  # pygls is a dependency; a broken install says what is missing
        _err(f"error: the language server needs pygls and lsprotocol: {exc}")
        raise typer.Exit(1)
    serve()


def functions() -> None:
    """List every function a spec can call (built in and from installed plug-ins)."""
    from rewardlang.runtime import registry

    for _name, impl in sorted(registry.load_all().items()):
        sig = impl.signature
        typer.echo(sig.usage())
        if sig.doc:
            typer.echo("    " + sig.doc.splitlines()[0])
    for name, why in registry.plugin_failures():
        _err(f"plug-in {name} failed to load: {why}")


def doctor() -> None:
    """Report versions, registered functions and the sandbox isolation level."""
    import platform

    import rewardlang
    from rewardlang.runtime import registry

    typer.echo(f"rewardlang {rewardlang.__version__} on Python {platform.python_version()} ({platform.machine()})")
    for pkg in ("numpy", "numba", "lark", "pydantic", "ruff", "tree-sitter", "tree-sitter-python", "trl",
                "transformers", "torch"):
        try:
            from importlib.metadata import version

            typer.echo(f"  {pkg} {version(pkg)}")
        except Exception:
            typer.echo(f"  {pkg}: not installed")
    typer.echo(f"functions: {len(registry.load_all())} registered")
    for name, why in registry.plugin_failures():
        typer.echo(f"  plug-in {name} FAILED: {why}")
    try:
        from rewardlang.sandbox import doctor_report  # type: ignore[attr-defined]
    except ImportError:
        typer.echo("sandbox: not available")
        return
    report = doctor_report()
    typer.echo("sandbox:")
    _print_tree(report, "  ")
    from rewardlang.sandbox.doctor import doctor_languages

    typer.echo("languages (toolchain, and a hello-world compiled and run in the sandbox):")
    _print_tree(doctor_languages(), "  ")

