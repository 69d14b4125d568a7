"""PySpark data source ``openmsmq``: queues as streaming / batch sources and sinks.

Importing this package does not import pyspark; :func:`register` does, lazily::

    from openmsmq.spark import register
    register(spark)          # then spark.readStream.format("openmsmq") ...

Modules: :mod:`~openmsmq.spark.planning` (options, offsets, partitions, row identity;
pure), :mod:`~openmsmq.spark.schema` (row layouts; pure), :mod:`~openmsmq.spark.backend`
(what the source needs from a queue manager, over its remote-read service),
:mod:`~openmsmq.spark.source` (the Spark classes; the only module importing pyspark),
:mod:`~openmsmq.spark.launcher` (``openmsmq-spark-python``, the interpreter for Spark's
Python processes: :func:`launcher_path`).
"""

from __future__ import annotations

from typing import Any

__all__ = ["launcher_path", "register"]


def register(spark: Any) -> None:
    """Register format ``openmsmq`` with the SparkSession ``spark`` (imports pyspark)."""
    from openmsmq.spark.source import register as _register

    _register(spark)


def launcher_path() -> str:
    """Path of ``openmsmq-spark-python``, the interpreter to give Spark as ``PYSPARK_PYTHON``
    so that its Python processes import the installed pyspark instead of ``pyspark.zip``
    (a faster query start; :mod:`openmsmq.spark.launcher`, ``docs/spark.md``)."""
    from openmsmq.spark.launcher import launcher_path as _launcher_path

    return _launcher_path()
