"""The `lockgen` command line (typer). Commands live in small modules; heavy imports stay inside them."""

from __future__ import annotations

import os
import sys

# lockgen's models are internal: skip pydantic's scan of installed plugins (about 12 ms of start-up)
os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")

import typer

from lockgen.cli import (
    arch_cmd, cert_export_cmd, env_cmds, explain_cmd, facts_cmd, fleet_cmd, lock_cmds, pack_cmd, resolve_cmd, run_cmds,
    verify_cmds)
from lockgen.cli.ui import state

app = typer.Typer(
    name="lockgen",
    help="Reproducible GPU software-stack lockfiles: resolve per GPU target, materialize, export, verify.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)


def _print_version(wanted: bool) -> None:
    if wanted:
        from lockgen import __version__

        print(f"lockgen {__version__}")
        raise typer.Exit()


@app.callback()
def _global(verbose: bool = typer.Option(False, "--verbose", "-v", help="Show tracebacks and debug detail."),
            version: bool = typer.Option(False, "--version", callback=_print_version, is_eager=True,
                                         help="Print lockgen's version and exit.")) -> None:
    state.verbose = verbose


app.command("resolve")(resolve_cmd.resolve)
app.command("arch")(arch_cmd.arch)
app.command("explain")(explain_cmd.explain)
app.command("diff")(lock_cmds.diff)
app.command("render")(lock_cmds.render)
app.command("import")(lock_cmds.import_)
app.command("materialize")(env_cmds.materialize)
app.command("check")(env_cmds.check)
app.command("envs")(env_cmds.envs)
app.command("gc")(env_cmds.gc)
app.command("freeze")(env_cmds.freeze)
app.command("pin")(env_cmds.pin)
app.command("manifests")(env_cmds.manifests)
app.command("run", cls=run_cmds.AfterDoubleDash)(run_cmds.run)
app.command("shell")(run_cmds.shell)
app.command("activate")(run_cmds.activate)
app.command("detect")(run_cmds.detect)
app.command("export")(env_cmds.export)
app.command("pack")(pack_cmd.pack)
app.command("unpack")(pack_cmd.unpack)
app.command("push")(env_cmds.push)
app.command("verify")(verify_cmds.verify)
app.command("keygen")(verify_cmds.keygen)
app.command("certs")(verify_cmds.certs)
verify_cmds.cert_app.command("export")(cert_export_cmd.export)
app.command("attest")(verify_cmds.attest)
app.add_typer(verify_cmds.cert_app, name="cert")
app.add_typer(facts_cmd.facts_app, name="facts")
app.add_typer(fleet_cmd.fleet_app, name="fleet")


def main() -> None:
    """Runs the app. When rattler was loaded, the process ends with `os._exit` after flushing: its native
    (tokio) threads can take the GIL while the interpreter finalises, which aborts Python < 3.14 at exit
    (CPython issue 87135; seen here in about one run in eight under load), after all work is done."""
    try:
        app()
        code: object = 0
    except SystemExit as exit_:
        code = exit_.code
    except BrokenPipeError:  # `lockgen ... | head`: the reader left; end quietly, as cat does
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        code = 0
    if "rattler" in sys.modules:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code if isinstance(code, int) else (0 if code is None else 1))
    raise SystemExit(code)
