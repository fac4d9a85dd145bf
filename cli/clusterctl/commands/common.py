"""Options and helpers shared by several commands."""

from __future__ import annotations

import contextlib
import functools
import os
import shlex
import sys
import tempfile
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import click

from clusterctl.app import App, Env, debug_enabled
from clusterctl.pipeline import Validated, load_and_validate
from clusterctl.plan.service import SwapError
from clusterctl.progress import attach
from clusterctl.report import STOPPED_SPEC, command_name, document
from clusterctl.run.events import EventBus
from clusterctl.run.state import DEFAULT_ROOT, StateDir, StateDirError
from clusterctl.spec import SpecError

F = TypeVar("F", bound=Callable[..., Any])

spec_argument = click.argument("spec", type=click.Path(dir_okay=False, path_type=str))

# Set in the command's context when --state-dir (or CLUSTERCTL_STATE_DIR) was not given.
_STATE_DEFAULTED = "clusterctl.state_dir_defaulted"


def default_state_root(spec: str) -> Path:
    """Where a spec's clusters keep their state: ``.clusterctl/`` in the spec's own directory.

    Why beside the spec: the state belongs to the cluster the spec describes, so `up` from any
    working directory finds the same state (like the `clusterctl.lock` beside it).
    """
    return Path(spec).parent / DEFAULT_ROOT


def state_dir_option(func: F) -> F:
    """``--state-dir`` (default: `default_state_root` of the command's SPEC)."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if kwargs.get("state_dir") is None and kwargs.get("spec"):
            kwargs["state_dir"] = default_state_root(kwargs["spec"])
            click.get_current_context().meta[_STATE_DEFAULTED] = True
        return func(*args, **kwargs)

    return click.option(
        "--state-dir",
        type=click.Path(file_okay=False, path_type=Path),
        default=None,
        envvar=Env.STATE_DIR,
        help="Where cluster state and secrets are kept [default: .clusterctl/ beside SPEC].",
    )(wrapper)  # type: ignore[return-value]


def _moved_state(state_root: Path, cluster: str) -> str:
    """A message when the cluster's state is only where clusterctl once kept it (``.clusterctl/`` here), else ""."""
    context = click.get_current_context(silent=True)
    if context is None or not context.meta.get(_STATE_DEFAULTED):
        return ""
    old = DEFAULT_ROOT / cluster
    if (state_root / cluster / "state.json").exists() or not (old / "state.json").exists():
        return ""
    if old.resolve() == (state_root / cluster).resolve():
        return ""
    return (
        f"the state of cluster {cluster} is in {old} (relative to the working directory, where earlier "
        f"clusterctl releases kept it); it now lives beside the spec, in {state_root / cluster}. Move it there "
        f"(`mv {shlex.quote(str(old))} {shlex.quote(str(state_root))}/`, creating {state_root} 0700 first) or pass "
        f"--state-dir {DEFAULT_ROOT}. Nothing was done."
    )


max_unavailable_option = click.option(
    "--max-unavailable",
    type=click.IntRange(min=1),
    default=None,
    help="Compute nodes upgraded at a time when the pinned versions changed [default: one SU, else 10 %].",
)


def output_option(func: F) -> F:
    """``--output text|json``."""
    return click.option(
        "-o",
        "--output",
        type=click.Choice(["text", "json"]),
        default="text",
        show_default=True,
        help="json: machine-readable output alone on stdout.",
    )(func)


def _checked_skip_rules(ctx: click.Context, param: click.Parameter, value: tuple[str, ...]) -> tuple[str, ...]:
    """Refuse unknown rules and safety rules as a usage error (exit 2), before the spec is read."""
    from clusterctl.rules import check_skip

    try:
        check_skip(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc), ctx=ctx, param=param) from None
    return value


def rule_options(func: F) -> F:
    """``--strict`` and ``--skip-rule``."""
    func = click.option("--strict", is_flag=True, help="Warnings fail too.")(func)
    return click.option(
        "--skip-rule",
        "skip_rules",
        multiple=True,
        metavar="NAME",
        callback=_checked_skip_rules,
        help="Do not run this rule (name or code); repeatable. Safety rules (names, paths) cannot be skipped.",
    )(func)


def validated_or_exit(
    app: App, spec: str, skip: tuple[str, ...], strict: bool, state_root: Path | None = None
) -> Validated:
    """Load and validate; on errors print every finding (or the JSON report) and exit 1.

    With ``state_root`` (a command that acts on the running cluster), the plan has the spares the
    cluster put in service.
    """
    try:
        result = load_and_validate(spec, skip, strict, state_root)
    except SpecError as exc:
        if app.json:
            app.print_json(document(command_name(), exc.findings, ok=False, stopped=STOPPED_SPEC))
        else:
            app.show_findings(exc.findings)
            app.display_error(f"{spec} is not valid: {app.summarize_findings(exc.findings)}.")
            if exc.not_run:
                app.display_info(exc.not_run)
        raise SystemExit(1) from None
    except (StateDirError, SwapError) as exc:
        app.abort(f"the state of the cluster in {spec} cannot be read: {exc}", 1)
    except ValueError as exc:  # unknown --skip-rule names
        raise click.BadParameter(str(exc), param_hint="--skip-rule") from None
    if state_root is not None and (moved := _moved_state(state_root, result.plan.cluster.name)):
        app.abort(moved, 1)
    return result


@contextlib.contextmanager
def progress_under_lock(app: App, state: StateDir, action: str) -> Iterator[EventBus]:
    """Hold the cluster's state lock for ACTION and show its events the way the output asks for.

    JSON output streams one event per line, a terminal gets the live view, anything else plain lines.
    """
    bus = EventBus()
    live = attach(bus, app.out, app.progress_mode)
    with state.lock(action), live or contextlib.nullcontext():
        yield bus


def save_crash_report(exc: BaseException) -> Path | None:
    """The traceback and command line in a new 0600 file under the temporary directory (None if unwritable).

    A traceback holds source lines and the exception's message, never local variables, so no
    secret the run held reaches the file.
    """
    text = f"clusterctl {' '.join(sys.argv[1:])}\n\n" + "".join(
        traceback.format_exception(type(exc), exc, exc.__traceback__)
    )
    try:
        fd, name = tempfile.mkstemp(prefix="clusterctl-crash-", suffix=".txt")
        with os.fdopen(fd, "w") as handle:
            handle.write(text)
    except OSError:
        return None
    return Path(name)


def handle_internal_errors(func: F) -> F:
    """The one catch-all: an unexpected error exits 70 naming the saved report (the traceback
    itself with CLUSTERCTL_DEBUG=1)."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except (SystemExit, click.exceptions.Exit, click.ClickException, KeyboardInterrupt):
            raise
        except BrokenPipeError:
            # stdout went away (`clusterctl rules | head`): stop quietly, as a pipe reader expects.
            with contextlib.suppress(OSError):
                os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            raise SystemExit(1) from None
        except Exception as exc:
            if debug_enabled():
                traceback.print_exc()
            report = save_crash_report(exc)
            saved = f"the traceback is in {report}; " if report else ""
            click.echo(
                f"internal error: {type(exc).__name__}: {exc}\n"
                f"This is a bug in clusterctl; {saved}rerun with CLUSTERCTL_DEBUG=1 to see it here, and report it.",
                err=True,
            )
            raise SystemExit(70) from None

    return wrapper  # type: ignore[return-value]
