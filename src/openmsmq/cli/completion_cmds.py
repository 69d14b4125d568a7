"""``openmsmq completion bash|zsh|fish``: the shell completion script (click's), printed
or installed where the shell loads it by itself.

The script asks ``openmsmq`` for the completions of the words typed so far (commands,
options, choices, paths), so it stays right as the commands change.
"""

from __future__ import annotations

import os
from pathlib import Path

import click
from click.shell_completion import get_completion_class

from openmsmq.cli.context import CommandError

__all__ = ["completion", "completion_script", "install_path", "register"]

SHELLS = ("bash", "zsh", "fish")
_PROG = "openmsmq"
_VAR = "_OPENMSMQ_COMPLETE"


def completion_script(root: click.Command, shell: str) -> str:
    """The completion script of ``root`` (the ``openmsmq`` group) for ``shell``."""
    cls = get_completion_class(shell)
    if cls is None:  # pragma: no cover - SHELLS are click's own
        raise CommandError(f"no completion for {shell}")
    return cls(root, {}, _PROG, _VAR).source()


def install_path(shell: str) -> tuple[Path, str]:
    """Where the user's ``shell`` loads a completion script from, and what else it needs."""
    home = Path.home()
    data = Path(os.environ.get("XDG_DATA_HOME") or home / ".local" / "share")
    config = Path(os.environ.get("XDG_CONFIG_HOME") or home / ".config")
    if shell == "bash":  # bash-completion loads these on first use of the command
        return data / "bash-completion" / "completions" / _PROG, "open a new shell"
    if shell == "zsh":
        return home / ".zfunc" / f"_{_PROG}", (
            "add to ~/.zshrc, before compinit: fpath+=~/.zfunc; then: autoload -Uz compinit && compinit"
        )
    return config / "fish" / "completions" / f"{_PROG}.fish", "open a new shell"


@click.command("completion")
@click.argument("shell", type=click.Choice(SHELLS))
@click.option("--install", is_flag=True, help="Write it where SHELL loads completions from (for this user).")
@click.pass_context
def completion(ctx: click.Context, shell: str, install: bool) -> None:
    """Print the completion script for SHELL (bash, zsh or fish), or --install it.

    \b
    Without --install, load it yourself, e.g.:
      eval "$(openmsmq completion bash)"           # in ~/.bashrc
      openmsmq completion fish | source            # in ~/.config/fish/config.fish
    """
    script = completion_script(ctx.find_root().command, shell)
    if not install:
        click.echo(script)
        return
    path, then = install_path(shell)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(script + "\n")
    click.echo(f"installed {shell} completion in {path}; {then}")


def register(group: click.Group) -> None:
    """Add ``completion`` to the ``openmsmq`` group."""
    group.add_command(completion)
