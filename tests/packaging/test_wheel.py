"""The wheel ``make dist`` builds, installed from its file into a fresh virtualenv with
its dependencies and the Spark extra (from the package index, as a user installs it):
both console scripts run, the CLI works end to end, the package data is in the wheel."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _run(*cmd: str | Path, timeout: float = 120) -> str:
    done = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=timeout, check=False)
    assert done.returncode == 0, f"{cmd}: {done.stdout[-2000:]}{done.stderr[-3000:]}"
    return done.stdout


def test_wheel_installs_in_a_fresh_virtualenv_and_runs(tmp_path: Path) -> None:
    dist = tmp_path / "dist"
    pip = (sys.executable, "-m", "pip")
    _run(
        *pip, "wheel", "--quiet", "--no-deps", "--no-build-isolation", "--wheel-dir", dist, ROOT, timeout=300
    )
    (wheel,) = dist.glob("openmsmq-*-py3-none-any.whl")
    venv = tmp_path / "venv"
    _run(sys.executable, "-m", "venv", venv)
    bin_ = venv / "bin"
    _run(bin_ / "pip", "install", "--quiet", f"{wheel}[spark]", timeout=900)

    assert _run(bin_ / "openmsmq", "--version").startswith("openmsmq, version ")
    data = tmp_path / "qm"
    _run(bin_ / "openmsmq", "init", data)
    _run(bin_ / "openmsmq", "--qm", data, "queue", "create", "private$\\orders")
    _run(bin_ / "openmsmq", "--qm", data, "send", "private$\\orders", "from the wheel")
    assert (
        _run(bin_ / "openmsmq", "--qm", data, "receive", "private$\\orders", "--body-only")
        == "from the wheel\n"
    )
    # the package data: the remote-read .proto and the console's templates
    _run(
        bin_ / "python", "-c",
        "import importlib.resources as r; f = r.files('openmsmq');"
        " assert (f / 'remote/openmsmq_remote.proto').is_file();"
        " assert any((f / 'console/templates').iterdir())",
    )  # fmt: skip
    # the Spark extra, through the second console script (Spark's Python launcher)
    out = _run(
        bin_ / "openmsmq-spark-python", "-c",
        "import pyspark, pyarrow, openmsmq.spark.source; print(pyspark.__version__)",
    )  # fmt: skip
    assert out.strip()
    # the wheel runs from its install, not from this checkout
    where = _run(bin_ / "python", "-c", "import openmsmq; print(openmsmq.__file__)")
    assert str(venv) in where and str(ROOT / "src") not in where
