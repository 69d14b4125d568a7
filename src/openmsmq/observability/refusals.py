"""Refused requests: one log line per client and rule, one counter per rule.

Whatever a client or peer asks for beyond what it may — a batch over a limit, a queue it has
no permission on, a connection past a cap, a packet too large for a session that is not open
yet — is refused with a typed error, and reported here: logged at WARNING with the client,
what it tried and the rule (the setting or check) that refused it, the first time for that
client and rule and then summed up per interval (:class:`~openmsmq.observability.repeats.RepeatedEvents`,
so a flood costs one line per interval), and counted by rule
(``openmsmq_refusals_total{rule=...}``, :meth:`MetricsSink.count_refused`).

    refusals = Refusals(logging.getLogger("openmsmq.remote"), metrics)
    refusals.refused("remote.max_batch_messages", "ipv4:10.0.0.7:51234", "StartReceive", "max_count …")

Only the standard library and the other observability modules are imported here.
"""

from __future__ import annotations

import logging

from openmsmq.observability.repeats import RepeatedEvents
from openmsmq.observability.sink import NULL_METRICS, MetricsSink

__all__ = ["Refusals"]


class Refusals:
    """Logs and counts refusals (see the module docstring). Thread-safe."""

    def __init__(
        self, logger: logging.Logger, metrics: MetricsSink = NULL_METRICS, interval: float = 60.0
    ) -> None:
        self.logger = logger
        self.metrics = metrics
        self._events = RepeatedEvents(logger, interval)

    def refused(self, rule: str, who: str, what: str, detail: str = "") -> None:
        """``who`` (a client or peer address, with its principal) tried ``what`` and ``rule``
        refused it; ``detail`` is the error's text."""
        self.metrics.count_refused(rule)
        self._events.log(
            (who, rule),
            logging.WARNING,
            "refused %s from %s (rule: %s)%s",
            what,
            who,
            rule,
            f": {detail}" if detail else "",
        )
