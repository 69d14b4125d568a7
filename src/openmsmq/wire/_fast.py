"""Former name of :mod:`openmsmq.wire.fast`, kept while modules that moved with the
transfer package still import it; new code imports :mod:`openmsmq.wire.fast`."""

from openmsmq.wire.fast import fast_constructor, fast_init, slot_builder

__all__ = ["fast_constructor", "fast_init", "slot_builder"]
