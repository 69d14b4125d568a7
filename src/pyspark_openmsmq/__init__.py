"""The ``openmsmq`` data source as PySpark finds it without ``register(spark)``.

PySpark 4 looks, once per session, for top-level modules named ``pyspark_*`` on the
Python path of the driver that define ``DefaultSource``, a ``DataSource`` subclass, and
registers each under its ``name()`` (``pyspark/sql/worker/lookup_data_sources.py``). This
module is installed with openmsmq, so ``spark.read.format("openmsmq")`` works in any
session whose Python has openmsmq installed. Importing it imports pyspark.
"""

from openmsmq.spark.source import OpenMSMQDataSource as DefaultSource

__all__ = ["DefaultSource"]
