"""The `lockgen` command line (typer): every command, its help and its flags. Commands live in small modules;
heavy imports stay inside them. `lockgen.cli.main` runs it, after the fast path (`fast_path`) has stepped aside."""

from __future__ import annotations

import copy
import inspect

import typer
import typer.main
from typer.core import TyperArgument, TyperOption

from lockgen.cli import (
    arch_cmd,
    cert_export_cmd,
    coercion,
    edit_cmds,
    env_cmds,
    explain_cmd,
    facts_cmd,
    fleet_cmd,
    image_cmds,
    lock_cmds,
    pack_cmd,
    resolve_cmd,
    run_cmds,
    store_cmd,
    verify_cmds,
)
from lockgen.cli.ui import say, state

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

        say(f"lockgen {__version__}")
        raise typer.Exit()


@app.callback()
def _global(
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Show tracebacks and debug detail."),
    version: bool = typer.Option(
        False, "--version", callback=_print_version, is_eager=True, help="Print lockgen's version and exit."
    ),
) -> None:
    state.verbose = verbose


app.command("resolve")(resolve_cmd.resolve)
app.command("add")(edit_cmds.add)
app.command("remove")(edit_cmds.remove)
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
app.command("export")(image_cmds.export)
app.command("pack")(pack_cmd.pack)
app.command("unpack")(pack_cmd.unpack)
app.command("push")(image_cmds.push)
app.command("verify")(verify_cmds.verify)
app.command("keygen")(verify_cmds.keygen)
app.command("certs")(verify_cmds.certs)
verify_cmds.cert_app.command("export")(cert_export_cmd.export)
app.command("attest")(verify_cmds.attest)
app.add_typer(verify_cmds.cert_app, name="cert")
app.add_typer(facts_cmd.facts_app, name="facts")
app.add_typer(fleet_cmd.fleet_app, name="fleet")
app.add_typer(store_cmd.store_app, name="store")


METAVARS = {"--update": "PKG", "--prefix": "DIR", "--python": "PY"}  # clearer than the flag's own name


def _named(command: object) -> None:
    """Help that reads `resolve [OPTIONS] STACK` and `--update PKG`, in every command (typer's own reads
    `{stack}`, `stack <path>` and `--update <list[str]>`): an argument shows its name in capitals, an option
    that takes a value its flag's (or METAVARS'); choices and metavars a command sets stay as they are."""
    for param in getattr(command, "params", []):
        if isinstance(param, TyperArgument):
            param.metavar = param.metavar or (param.name or "").upper()
            shown = (param.metavar if param.required else f"[{param.metavar}]") + ("..." if param.nargs != 1 else "")
            param._usage_display_name = lambda shown=shown: shown  # type: ignore[method-assign,misc]
            param.display_type_rich = lambda ctx: ""  # type: ignore[method-assign]
        elif (
            isinstance(param, TyperOption)
            and not param.is_flag
            and param.metavar is None
            and not param.type_descriptor.is_choice
        ):
            flag = max(param.opts, key=len)
            param.metavar = METAVARS.get(flag, flag.lstrip("-").replace("-", "_").upper())
    for sub in getattr(command, "commands", {}).values():
        _named(sub)


def command(args: list[str] | None = None) -> object:
    """The app as the click command `main` runs for `args`, its help named as `_named` says, its values converted
    without pydantic where typer's conversion is plain (`coercion`). Typer builds every parameter of every
    command it is given (about 15 ms for all of them, on every start): only the command `args` name is given
    to it; with none named (`--help`, `--version`) the others stand in by their help text alone; a word that
    names no command gets the whole app, for typer's own error."""
    given = args or []
    words = [a for a in given if not a.startswith("-")]
    if words and "--help" in given[: given.index(words[0])]:  # `--help CMD` is the app's help
        words = []
    names = {info.name for info in app.registered_commands} | {info.name for info in app.registered_groups}
    if args is None or (words and words[0] not in names):
        built = typer.main.get_command(app)
    else:
        only = copy.copy(app)
        only.registered_commands = [i for i in app.registered_commands if words and i.name == words[0]]
        only.registered_groups = [i for i in app.registered_groups if not words or i.name == words[0]]
        built = typer.main.get_command(only)
        if not words and isinstance(built, typer.core.TyperGroup):
            _stand_ins(built)
    _named(built)
    coercion.install(built)
    return built


def _stand_ins(group: typer.core.TyperGroup) -> None:
    """Each command of the app, in the group `group` (the sub-apps already in it), as its help listing shows it:
    name and help text, no parameters (nothing runs it: a command named on the line is built for real)."""
    from typer.core import TyperCommand

    groups = dict(group.commands)
    listed = {
        info.name: TyperCommand(
            name=info.name,
            help=inspect.getdoc(info.callback),
            short_help=info.short_help,
            hidden=info.hidden,
            deprecated=info.deprecated,
            rich_markup_mode=None,
        )
        for info in app.registered_commands
        if info.name
    }
    group.commands = {**listed, **groups}


VERBOSE = ("-v", "--verbose")


def verbose_first(args: list[str]) -> list[str]:
    """The command line with `-v`/`--verbose` moved before the command, where the global option is parsed:
    `lockgen materialize LOCK -v` works as `lockgen -v materialize LOCK` does, for every command. Words after
    `--` are another program's and stay where they are."""
    end = args.index("--") if "--" in args else len(args)
    flags = [a for a in args[:end] if a in VERBOSE]
    return flags[:1] + [a for a in args[:end] if a not in VERBOSE] + args[end:]
