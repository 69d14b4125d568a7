"""Operating openmsmq: structured logging and Prometheus metrics.

* :mod:`openmsmq.observability.logging` — one line per event, ``key=value`` or JSON
  (:func:`~openmsmq.observability.logging.configure_logging`,
  :func:`~openmsmq.observability.logging.log_event`,
  :func:`~openmsmq.observability.logging.bind`).
* :mod:`openmsmq.observability.metrics` — the ``openmsmq_*`` metrics of one queue
  manager process (:class:`~openmsmq.observability.metrics.Metrics`), the scrape-time
  queue-depth collector and the HTTP endpoint
  (:func:`~openmsmq.observability.metrics.start_metrics_server`).

Both depend only on the standard library, ``prometheus_client`` and
:mod:`openmsmq.errors`, so every layer above ``wire``/``protocol`` may call them.
``docs/operations.md`` lists every field and metric.
"""
