"""``openmsmq completion``: the scripts click generates, loaded by a real bash that then
completes commands, subcommands and options by asking the real ``openmsmq``."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from openmsmq.cli.main import cli

BIN = Path(sys.executable).parent


def _complete(script: Path, words: str) -> list[str]:
    """COMPREPLY of bash after loading ``script`` for the command line ``words`` (the
    cursor after its last word)."""
    program = (
        f"source {script}\n"
        f"COMP_WORDS=({words})\n"
        "COMP_CWORD=$(( ${#COMP_WORDS[@]} - 1 ))\n"
        "_openmsmq_completion openmsmq\n"
        'printf "%s\\n" "${COMPREPLY[@]}"\n'
    )
    env = dict(os.environ, PATH=f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}")
    done = subprocess.run(
        ["bash", "--norc", "--noprofile", "-c", program], capture_output=True, text=True, env=env, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.split()


def test_bash_completion_generated_installed_and_loaded(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["completion", "bash"])
    assert result.exit_code == 0
    script = tmp_path / "openmsmq.bash"
    script.write_text(result.stdout)
    assert _complete(script, "openmsmq qu") == ["queue"]
    assert {"set", "show", "create", "purge"} <= set(_complete(script, "openmsmq queue ''"))
    assert {"--follow", "--format"} <= set(_complete(script, "openmsmq receive --fo"))
    assert _complete(script, "openmsmq outgoing su") == ["suspend"]
    installed = CliRunner().invoke(
        cli, ["completion", "bash", "--install"], env={"HOME": str(tmp_path), "XDG_DATA_HOME": ""}
    )
    assert installed.exit_code == 0, installed.output
    path = tmp_path / ".local" / "share" / "bash-completion" / "completions" / "openmsmq"
    assert str(path) in installed.stdout
    assert _complete(path, "openmsmq sta") == ["status"]


@pytest.mark.parametrize(("shell", "marker"), [("zsh", "#compdef openmsmq"), ("fish", "complete --no-files")])
def test_zsh_and_fish_scripts(tmp_path: Path, shell: str, marker: str) -> None:
    result = CliRunner().invoke(cli, ["completion", shell])
    assert result.exit_code == 0 and marker in result.stdout
    assert f"_OPENMSMQ_COMPLETE={shell}_complete" in result.stdout
    if shutil.which(shell):  # load it too where that shell is installed
        script = tmp_path / f"openmsmq.{shell}"
        script.write_text(result.stdout)
        load = (
            f"source {script}"
            if shell == "fish"
            else f"autoload -Uz compinit && compinit -u; source {script}"
        )
        done = subprocess.run([shell, "-c", load], capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
    bad = CliRunner().invoke(cli, ["completion", "tcsh"])
    assert bad.exit_code == 2 and "'tcsh' is not one of" in bad.output
