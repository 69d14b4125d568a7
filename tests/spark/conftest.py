"""One local SparkSession for the whole test run (pyspark is imported only when a test asks for it)."""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Iterator
from typing import Any

import pytest


def _java_available() -> bool:
    home = os.environ.get("JAVA_HOME")
    return shutil.which("java") is not None or bool(
        home and os.path.exists(os.path.join(home, "bin", "java"))
    )


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """A ``local[2,2]`` session (2 cores, a failed task is retried once), UI off, quiet logs."""
    if not _java_available():
        pytest.skip("Java is not installed (java not on PATH and no JAVA_HOME): Spark tests need a JVM")
    # Executors' Python workers must run the interpreter that has openmsmq and pyarrow.
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    from openmsmq.spark import register

    session = (
        SparkSession.builder.master("local[2,2]")
        .appName("openmsmq-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.extraJavaOptions", "-Dlog4j2.level=ERROR")
        .config("spark.sql.streaming.pollingDelay", "10ms")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    register(session)
    yield session
    session.stop()
