"""Wire layer: byte-exact MS-MQMQ / MS-MQQB codecs. Pure: no state, no I/O, no clock."""

from openmsmq.wire.constants import *  # noqa: F403
from openmsmq.wire.constants import __all__ as _constants_all
from openmsmq.wire.ids import *  # noqa: F403
from openmsmq.wire.ids import __all__ as _ids_all

__all__ = [*_constants_all, *_ids_all]
