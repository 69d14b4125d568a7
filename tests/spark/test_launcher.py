"""``openmsmq-spark-python`` (:mod:`openmsmq.spark.launcher`): Spark's archives leave
``PYTHONPATH`` only when the same version of the package is installed."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest

from openmsmq.spark.launcher import launcher_path, strip_spark_archives


def _installed(root: Path, package: str, version: str) -> Path:
    """A directory holding ``package/version.py`` of ``version`` (an installed package)."""
    pkg = root / package
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "version.py").write_text(f'__version__: str = "{version}"\n')
    return root


def _pyspark_zip(path: Path, version: str) -> Path:
    """A ``pyspark.zip`` whose ``pyspark/version.py`` says ``version``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("pyspark/__init__.py", "")
        z.writestr("pyspark/version.py", f"__version__: str = '{version}'\n")
    return path


def test_same_versions_are_dropped_and_other_entries_kept_in_order(tmp_path: Path) -> None:
    site = _installed(tmp_path / "site", "pyspark", "4.3.0")
    _installed(site, "py4j", "0.10.9.9")
    zip_ = _pyspark_zip(tmp_path / "spark/python/lib/pyspark.zip", "4.3.0")
    py4j = tmp_path / "spark/python/lib/py4j-0.10.9.9-src.zip"
    jar = tmp_path / "spark/jars/spark-core.jar"
    path = os.pathsep.join([str(zip_), str(py4j), str(jar), "/x"])
    assert strip_spark_archives(path, [str(site)]) == os.pathsep.join([str(jar), "/x"])


def test_other_versions_and_missing_packages_are_kept(tmp_path: Path) -> None:
    site = _installed(tmp_path / "site", "pyspark", "4.2.1")
    zip_ = _pyspark_zip(tmp_path / "lib/pyspark.zip", "4.3.0")
    py4j = tmp_path / "lib/py4j-0.10.9.9-src.zip"  # no py4j installed
    path = os.pathsep.join([str(zip_), str(py4j)])
    assert strip_spark_archives(path, [str(site)]) == path


def test_an_unreadable_archive_is_kept(tmp_path: Path) -> None:
    site = _installed(tmp_path / "site", "pyspark", "4.3.0")
    broken = tmp_path / "lib/pyspark.zip"
    broken.parent.mkdir()
    broken.write_bytes(b"not a zip")
    missing = tmp_path / "gone/pyspark.zip"
    path = os.pathsep.join([str(broken), str(missing)])
    assert strip_spark_archives(path, [str(site)]) == path


def test_the_package_is_looked_up_after_the_kept_entries(tmp_path: Path) -> None:
    """An entry left on PYTHONPATH that holds another pyspark shadows the installed one."""
    site = _installed(tmp_path / "site", "pyspark", "4.3.0")
    shadow = _installed(tmp_path / "shadow", "pyspark", "3.5.0")
    zip_ = _pyspark_zip(tmp_path / "lib/pyspark.zip", "4.3.0")
    path = os.pathsep.join([str(zip_), str(shadow)])
    assert strip_spark_archives(path, [str(site)]) == path
    assert strip_spark_archives(str(zip_), [str(site)]) == ""


def test_the_launcher_runs_the_installed_pyspark_with_sparks_pythonpath() -> None:
    """The real script, given the PYTHONPATH Spark 4.3 gives its Python processes."""
    pyspark = pytest.importorskip("pyspark")
    home = Path(pyspark.__file__).parent  # SPARK_HOME of a pip-installed pyspark
    zip_ = home / "python" / "lib" / "pyspark.zip"
    if not zip_.exists():
        pytest.skip("this pyspark has no python/lib/pyspark.zip")
    py4j = sorted((home / "python" / "lib").glob("py4j-*-src.zip"))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(zip_), *map(str, py4j)]))
    code = "import os, sys, pyspark as p;print(p.__file__, os.environ['PYTHONPATH'], sys.argv[1:], sep='\\n')"
    out = subprocess.run(
        [launcher_path(), "-c", code, "a b", "-m"], env=env, capture_output=True, text=True, check=True
    ).stdout.splitlines()
    assert out[0] == str(home / "__init__.py")
    assert "pyspark.zip" not in out[1]
    assert out[2] == "['a b', '-m']"


def test_launcher_path_is_next_to_the_interpreter() -> None:
    assert Path(launcher_path()).parent == Path(sys.executable).parent


def test_the_shared_sessions_workers_import_the_installed_pyspark(spark: Any) -> None:
    """Spark's Python workers of the tests' session start through the launcher."""
    import pyspark

    files = spark.sparkContext.parallelize([0], 1).map(lambda _: __import__("pyspark").__file__).collect()
    assert files == [pyspark.__file__]
    assert ".zip" not in files[0]


def test_launcher_path_names_the_fix_when_the_script_is_missing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sysconfig

    monkeypatch.setattr(sys, "executable", str(tmp_path / "bin" / "python"))
    monkeypatch.setattr(sysconfig, "get_path", lambda *_a, **_k: str(tmp_path / "scripts"))
    with pytest.raises(FileNotFoundError, match="reinstall openmsmq"):
        launcher_path()
