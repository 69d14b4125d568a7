"""``openmsmq-spark-python``: the Python interpreter for Spark's Python processes, started so
that they import the installed, byte-compiled pyspark instead of ``pyspark.zip``.

Spark 4.3 starts every Python process (the driver-side streaming source runner at each
query start, the planner and worker daemons) with ``PYTHONPATH`` beginning with
``$SPARK_HOME/python/lib/pyspark.zip`` and ``py4j-<version>-src.zip``
(``org.apache.spark.api.python.PythonUtils.sparkPythonPath``, put first by
``PythonWorkerFactory``). ``zipimport`` keeps no bytecode, so each such process compiles
pyspark from source: 0.6-0.7 s of CPU for the streaming source runner, before the query
can plan its first batch.

Set this launcher as the Python of Spark's processes (``PYSPARK_PYTHON``, see
``docs/spark.md``, "Query start"). It removes those two archives from
``PYTHONPATH`` when the interpreter it runs has the same version of pyspark (resp. py4j)
installed, then replaces itself (``exec``) with that interpreter and Spark's arguments
unchanged. An archive whose version differs from the installed package, or that cannot
be read, is kept: the launcher then behaves exactly like the interpreter itself.
"""

from __future__ import annotations

import os
import re
import sys
import zipimport
from importlib.machinery import PathFinder

__all__ = ["launcher_path", "main", "strip_spark_archives"]

_VERSION = re.compile(r"""^__version__\s*(?::\s*str\s*)?=\s*['"]([^'"]+)['"]""", re.MULTILINE)
_PY4J_ZIP = re.compile(r"^py4j-(.+)-src\.zip$")
SCRIPT_NAME = "openmsmq-spark-python"


def _version_in(source: str | None) -> str | None:
    """The ``__version__`` string assigned in a ``version.py`` source, or None."""
    match = _VERSION.search(source or "")
    return match.group(1) if match else None


def _installed_version(package: str, search_path: list[str]) -> str | None:
    """Version of ``package`` as the interpreter would import it from ``search_path``
    (its ``version.py``), without importing it; None if not found."""
    spec = PathFinder.find_spec(package, search_path)
    if spec is None or not spec.submodule_search_locations:
        return None
    for location in spec.submodule_search_locations:
        try:
            with open(os.path.join(location, "version.py"), encoding="utf-8") as f:
                return _version_in(f.read())
        except OSError:
            continue
    return None


def _archive_version(entry: str) -> tuple[str, str | None] | None:
    """``(package, version)`` of a Spark archive on ``PYTHONPATH``, or None if ``entry``
    is not one (pyspark's version is read from the archive's ``pyspark/version.py``,
    py4j's from the file name)."""
    name = os.path.basename(entry)
    if name == "pyspark.zip":
        try:
            source = zipimport.zipimporter(os.path.join(entry, "pyspark")).get_source("version")
            return "pyspark", _version_in(source)
        except (OSError, zipimport.ZipImportError):
            return "pyspark", None
    match = _PY4J_ZIP.match(name)
    if match:
        return "py4j", match.group(1)
    return None


def strip_spark_archives(pythonpath: str, rest_of_path: list[str]) -> str:
    """``pythonpath`` without ``pyspark.zip`` / ``py4j-*-src.zip`` entries whose package is
    installed in the same version on the path that remains (the kept entries of
    ``pythonpath``, then ``rest_of_path``: the interpreter's own ``sys.path``)."""
    entries = pythonpath.split(os.pathsep) if pythonpath else []
    archives = {i: _archive_version(e) for i, e in enumerate(entries)}
    others = [e for i, e in enumerate(entries) if archives[i] is None]
    search = [os.getcwd(), *others, *rest_of_path]
    kept = []
    for i, entry in enumerate(entries):
        archive = archives[i]
        if archive is not None:
            package, version = archive
            if version is not None and version == _installed_version(package, search):
                continue
        kept.append(entry)
    return os.pathsep.join(kept)


def launcher_path() -> str:
    """Path of the ``openmsmq-spark-python`` script installed with openmsmq for this
    interpreter: next to ``sys.executable`` (a virtual environment), else in the scripts
    directory of the default or the user installation scheme.

    Raises FileNotFoundError, naming the fix, when it is not installed (an environment
    installed before the script existed: reinstall openmsmq)."""
    import sysconfig

    dirs = [
        os.path.dirname(sys.executable),
        sysconfig.get_path("scripts"),
        sysconfig.get_path("scripts", sysconfig.get_preferred_scheme("user")),
    ]
    for d in dirs:
        path = os.path.join(d, SCRIPT_NAME)
        if os.path.exists(path):
            return path
    raise FileNotFoundError(
        f"{SCRIPT_NAME} is not installed in {', '.join(dict.fromkeys(dirs))}: reinstall openmsmq "
        "in this environment (pip install -e '.[spark]', or make .venv/.installed)"
    )


def main() -> None:
    """Run ``sys.executable`` with this process's arguments, Spark's archives removed from
    ``PYTHONPATH`` where the installed packages have the same version (replaces the process)."""
    pythonpath = os.environ.get("PYTHONPATH", "")
    if pythonpath:
        own = set(pythonpath.split(os.pathsep))
        # sys.path[0] is this script's directory; the exec'd interpreter gets its own.
        rest = [p for p in sys.path[1:] if p not in own]
        os.environ["PYTHONPATH"] = strip_spark_archives(pythonpath, rest)
    os.execv(sys.executable, [sys.executable, *sys.argv[1:]])


if __name__ == "__main__":
    main()
