"""The one exception hierarchy of openmsmq.

Every error raised by the library on purpose is an :class:`OpenMSMQError`::

    OpenMSMQError
    ├── MQError                  carries an MS-MQMQ 2.4 HRESULT (``.hresult``, an :class:`HResult`)
    │   ├── QueueNotFoundError       MQ_ERROR_QUEUE_NOT_FOUND
    │   ├── TransactionUsageError    MQ_ERROR_TRANSACTION_USAGE
    │   ├── IOTimeoutError           MQ_ERROR_IO_TIMEOUT
    │   ├── MessageNotFoundError     MQ_ERROR_MESSAGE_NOT_FOUND
    │   ├── AccessDeniedError        MQ_ERROR_ACCESS_DENIED
    │   ├── LimitError               a request beyond a configured limit (``.limit`` names the key)
    │   └── StorageError             MQ_ERROR_MESSAGE_STORAGE_FAILED / MQ_ERROR_INSUFFICIENT_RESOURCES
    │       │                        (disk full, corrupted or unreadable store, database unreachable)
    │       └── FencedError          a write refused: this QM's lease epoch is no longer the database's
    ├── ProtocolError            a peer or a caller broke the MS-MQQB session rules
    │   ├── LocalProtocolError       *we* were asked to do something the protocol forbids
    │   └── RemoteProtocolError      the peer sent something the protocol forbids
    │       └── WireError            malformed bytes: the only error a decoder may raise
    └── ConfigError              a bad configuration value (names the key)

``MQError(hresult, message)`` picks the most specific subclass itself, so code that
raises ``MQError(HResult.MQ_ERROR_QUEUE_NOT_FOUND, ...)`` can be caught as
``QueueNotFoundError``. The mapping is :data:`_SUBCLASS_BY_HRESULT`.

Following h11, a *local* protocol error means our own state machine was driven
wrongly (a bug or misuse by the caller); a *remote* one means the peer
misbehaved and its session must be closed, while every other session goes on.
"""

from __future__ import annotations

from enum import IntEnum
from typing import Any

__all__ = [
    "AccessDeniedError",
    "ConfigError",
    "FencedError",
    "HResult",
    "IOTimeoutError",
    "LimitError",
    "LocalProtocolError",
    "MQError",
    "MessageNotFoundError",
    "OpenMSMQError",
    "ProtocolError",
    "QueueNotFoundError",
    "RemoteProtocolError",
    "StorageError",
    "TransactionUsageError",
    "WireError",
    "quoted",
]

#: Control characters (C0, DEL, C1) as escapes: an error message stays one line and
#: carries no terminal escape sequence, whatever text it quotes.
_CONTROL_ESCAPES = {c: f"\\x{c:02x}" for c in (*range(0x20), *range(0x7F, 0xA0))}
_CONTROL_ESCAPES.update({0x2028: "\\u2028", 0x2029: "\\u2029"})  # line and paragraph separators
_CONTROL_ESCAPES.update({ord("\n"): "\\n", ord("\r"): "\\r", ord("\t"): "\\t"})


def quoted(value: object) -> str:
    """``value`` for an error message, as the user typed it: text between single quotes,
    its backslashes as they are (``'DIRECT=TCP:10.0.0.5\\PRIVATE$\\orders'``, where
    ``repr`` would double each one); only control characters are escaped (``\\n``,
    ``\\x1b``), so that a name from the network cannot break a log line or drive a
    terminal. Anything but text is shown as ``repr`` shows it."""
    if not isinstance(value, str):
        return repr(value)
    return "'" + value.translate(_CONTROL_ESCAPES) + "'"


class HResult(IntEnum):
    """MSMQ status codes: MS-MQMQ 2.4 and the MS-MQRR / MS-MQDMPR codes (remote-read.md §9).

    Values are the 32-bit unsigned HRESULTs as they appear on the wire.
    """

    MQ_OK = 0x00000000
    EPT_S_NOT_REGISTERED = 0x000006D9
    MQ_INFORMATION_PROPERTY = 0x400E0001
    MQ_INFORMATION_ILLEGAL_PROPERTY = 0x400E0002
    MQ_INFORMATION_PROPERTY_IGNORED = 0x400E0003
    MQ_INFORMATION_UNSUPPORTED_PROPERTY = 0x400E0004
    MQ_INFORMATION_DUPLICATE_PROPERTY = 0x400E0005
    MQ_INFORMATION_OPERATION_PENDING = 0x400E0006
    MQ_INFORMATION_FORMATNAME_BUFFER_TOO_SMALL = 0x400E0009
    MQ_INFORMATION_INTERNAL_USER_CERT_EXIST = 0x400E000A
    MQ_INFORMATION_OWNER_IGNORED = 0x400E000B
    STATUS_INVALID_HANDLE = 0xC0000008
    STATUS_INVALID_PARAMETER = 0xC000000D
    STATUS_ACCESS_DENIED = 0xC0000022
    STATUS_NOT_FOUND = 0xC0000225
    MQ_ERROR = 0xC00E0001
    MQ_ERROR_PROPERTY = 0xC00E0002
    MQ_ERROR_QUEUE_NOT_FOUND = 0xC00E0003
    MQ_ERROR_QUEUE_NOT_ACTIVE = 0xC00E0004
    MQ_ERROR_QUEUE_EXISTS = 0xC00E0005
    MQ_ERROR_INVALID_PARAMETER = 0xC00E0006
    MQ_ERROR_INVALID_HANDLE = 0xC00E0007
    MQ_ERROR_OPERATION_CANCELLED = 0xC00E0008
    MQ_ERROR_SHARING_VIOLATION = 0xC00E0009
    MQ_ERROR_SERVICE_NOT_AVAILABLE = 0xC00E000B
    MQ_ERROR_MACHINE_NOT_FOUND = 0xC00E000D
    MQ_ERROR_ILLEGAL_SORT = 0xC00E0010
    MQ_ERROR_ILLEGAL_USER = 0xC00E0011
    MQ_ERROR_NO_DS = 0xC00E0013
    MQ_ERROR_ILLEGAL_QUEUE_PATHNAME = 0xC00E0014
    MQ_ERROR_ILLEGAL_PROPERTY_VALUE = 0xC00E0018
    MQ_ERROR_ILLEGAL_PROPERTY_VT = 0xC00E0019
    MQ_ERROR_BUFFER_OVERFLOW = 0xC00E001A
    MQ_ERROR_IO_TIMEOUT = 0xC00E001B
    MQ_ERROR_ILLEGAL_CURSOR_ACTION = 0xC00E001C
    MQ_ERROR_MESSAGE_ALREADY_RECEIVED = 0xC00E001D
    MQ_ERROR_ILLEGAL_FORMATNAME = 0xC00E001E
    MQ_ERROR_FORMATNAME_BUFFER_TOO_SMALL = 0xC00E001F
    MQ_ERROR_UNSUPPORTED_FORMATNAME_OPERATION = 0xC00E0020
    MQ_ERROR_ILLEGAL_SECURITY_DESCRIPTOR = 0xC00E0021
    MQ_ERROR_SENDERID_BUFFER_TOO_SMALL = 0xC00E0022
    MQ_ERROR_SECURITY_DESCRIPTOR_TOO_SMALL = 0xC00E0023
    MQ_ERROR_CANNOT_IMPERSONATE_CLIENT = 0xC00E0024
    MQ_ERROR_ACCESS_DENIED = 0xC00E0025
    MQ_ERROR_PRIVILEGE_NOT_HELD = 0xC00E0026
    MQ_ERROR_INSUFFICIENT_RESOURCES = 0xC00E0027
    MQ_ERROR_USER_BUFFER_TOO_SMALL = 0xC00E0028
    MQ_ERROR_MESSAGE_STORAGE_FAILED = 0xC00E002A
    MQ_ERROR_SENDER_CERT_BUFFER_TOO_SMALL = 0xC00E002B
    MQ_ERROR_INVALID_CERTIFICATE = 0xC00E002C
    MQ_ERROR_CORRUPTED_INTERNAL_CERTIFICATE = 0xC00E002D
    MQ_ERROR_INTERNAL_USER_CERT_EXIST = 0xC00E002E
    MQ_ERROR_NO_INTERNAL_USER_CERT = 0xC00E002F
    MQ_ERROR_CORRUPTED_SECURITY_DATA = 0xC00E0030
    MQ_ERROR_CORRUPTED_PERSONAL_CERT_STORE = 0xC00E0031
    MQ_ERROR_COMPUTER_DOES_NOT_SUPPORT_ENCRYPTION = 0xC00E0033
    MQ_ERROR_BAD_SECURITY_CONTEXT = 0xC00E0035
    MQ_ERROR_COULD_NOT_GET_USER_SID = 0xC00E0036
    MQ_ERROR_COULD_NOT_GET_ACCOUNT_INFO = 0xC00E0037
    MQ_ERROR_ILLEGAL_MQCOLUMNS = 0xC00E0038
    MQ_ERROR_ILLEGAL_PROPID = 0xC00E0039
    MQ_ERROR_ILLEGAL_RELATION = 0xC00E003A
    MQ_ERROR_ILLEGAL_PROPERTY_SIZE = 0xC00E003B
    MQ_ERROR_ILLEGAL_RESTRICTION_PROPID = 0xC00E003C
    MQ_ERROR_ILLEGAL_MQQUEUEPROPS = 0xC00E003D
    MQ_ERROR_PROPERTY_NOTALLOWED = 0xC00E003E
    MQ_ERROR_INSUFFICIENT_PROPERTIES = 0xC00E003F
    MQ_ERROR_MACHINE_EXISTS = 0xC00E0040
    MQ_ERROR_ILLEGAL_MQQMPROPS = 0xC00E0041
    MQ_ERROR_DS_IS_FULL = 0xC00E0042
    MQ_ERROR_DS_ERROR = 0xC00E0043
    MQ_ERROR_INVALID_OWNER = 0xC00E0044
    MQ_ERROR_UNSUPPORTED_ACCESS_MODE = 0xC00E0045
    MQ_ERROR_RESULT_BUFFER_TOO_SMALL = 0xC00E0046
    MQ_ERROR_DELETE_CN_IN_USE = 0xC00E0048
    MQ_ERROR_NO_RESPONSE_FROM_OBJECT_SERVER = 0xC00E0049
    MQ_ERROR_OBJECT_SERVER_NOT_AVAILABLE = 0xC00E004A
    MQ_ERROR_QUEUE_NOT_AVAILABLE = 0xC00E004B
    MQ_ERROR_DTC_CONNECT = 0xC00E004C
    MQ_ERROR_TRANSACTION_IMPORT = 0xC00E004E
    MQ_ERROR_TRANSACTION_USAGE = 0xC00E0050
    MQ_ERROR_TRANSACTION_SEQUENCE = 0xC00E0051
    MQ_ERROR_MISSING_CONNECTOR_TYPE = 0xC00E0055
    MQ_ERROR_STALE_HANDLE = 0xC00E0056
    MQ_ERROR_TRANSACTION_ENLIST = 0xC00E0058
    MQ_ERROR_QUEUE_DELETED = 0xC00E005A
    MQ_ERROR_ILLEGAL_CONTEXT = 0xC00E005B
    MQ_ERROR_ILLEGAL_SORT_PROPID = 0xC00E005C
    MQ_ERROR_LABEL_TOO_LONG = 0xC00E005D
    MQ_ERROR_LABEL_BUFFER_TOO_SMALL = 0xC00E005E
    MQ_ERROR_MQIS_SERVER_EMPTY = 0xC00E005F
    MQ_ERROR_MQIS_READONLY_MODE = 0xC00E0060
    MQ_ERROR_SYMM_KEY_BUFFER_TOO_SMALL = 0xC00E0061
    MQ_ERROR_SIGNATURE_BUFFER_TOO_SMALL = 0xC00E0062
    MQ_ERROR_PROV_NAME_BUFFER_TOO_SMALL = 0xC00E0063
    MQ_ERROR_ILLEGAL_OPERATION = 0xC00E0064
    MQ_ERROR_WRITE_NOT_ALLOWED = 0xC00E0065
    MQ_ERROR_WKS_CANT_SERVE_CLIENT = 0xC00E0066
    MQ_ERROR_DEPEND_WKS_LICENSE_OVERFLOW = 0xC00E0067
    MQ_CORRUPTED_QUEUE_WAS_DELETED = 0xC00E0068
    MQ_ERROR_REMOTE_MACHINE_NOT_AVAILABLE = 0xC00E0069
    MQ_ERROR_UNSUPPORTED_OPERATION = 0xC00E006A
    MQ_ERROR_ENCRYPTION_PROVIDER_NOT_SUPPORTED = 0xC00E006B
    MQ_ERROR_CANNOT_SET_CRYPTO_SEC_DESCR = 0xC00E006C
    MQ_ERROR_CERTIFICATE_NOT_PROVIDED = 0xC00E006D
    MQ_ERROR_Q_DNS_PROPERTY_NOT_SUPPORTED = 0xC00E006E
    MQ_ERROR_CANNOT_CREATE_CERT_STORE = 0xC00E006F
    MQ_ERROR_CANNOT_OPEN_CERT_STORE = 0xC00E0070
    MQ_ERROR_ILLEGAL_ENTERPRISE_OPERATION = 0xC00E0071
    MQ_ERROR_CANNOT_GRANT_ADD_GUID = 0xC00E0072
    MQ_ERROR_CANNOT_LOAD_MSMQOCM = 0xC00E0073
    MQ_ERROR_NO_ENTRY_POINT_MSMQOCM = 0xC00E0074
    MQ_ERROR_NO_MSMQ_SERVERS_ON_DC = 0xC00E0075
    MQ_ERROR_CANNOT_JOIN_DOMAIN = 0xC00E0076
    MQ_ERROR_CANNOT_CREATE_ON_GC = 0xC00E0077
    MQ_ERROR_GUID_NOT_MATCHING = 0xC00E0078
    MQ_ERROR_PUBLIC_KEY_NOT_FOUND = 0xC00E0079
    MQ_ERROR_PUBLIC_KEY_DOES_NOT_EXIST = 0xC00E007A
    MQ_ERROR_ILLEGAL_MQPRIVATEPROPS = 0xC00E007B
    MQ_ERROR_NO_GC_IN_DOMAIN = 0xC00E007C
    MQ_ERROR_NO_MSMQ_SERVERS_ON_GC = 0xC00E007D
    MQ_ERROR_CANNOT_GET_DN = 0xC00E007E
    MQ_ERROR_CANNOT_HASH_DATA_EX = 0xC00E007F
    MQ_ERROR_CANNOT_SIGN_DATA_EX = 0xC00E0080
    MQ_ERROR_CANNOT_CREATE_HASH_EX = 0xC00E0081
    MQ_ERROR_FAIL_VERIFY_SIGNATURE_EX = 0xC00E0082
    MQ_ERROR_CANNOT_DELETE_PSC_OBJECTS = 0xC00E0083
    MQ_ERROR_NO_MQUSER_OU = 0xC00E0084
    MQ_ERROR_CANNOT_LOAD_MQAD = 0xC00E0085
    MQ_ERROR_CANNOT_LOAD_MQDSSRV = 0xC00E0086
    MQ_ERROR_PROPERTIES_CONFLICT = 0xC00E0087
    MQ_ERROR_MESSAGE_NOT_FOUND = 0xC00E0088
    MQ_ERROR_CANT_RESOLVE_SITES = 0xC00E0089
    MQ_ERROR_Q_ADS_PROPERTY_NOT_SUPPORTED = 0xC00E0091
    MQ_ERROR_BAD_XML_FORMAT = 0xC00E0092
    MQ_ERROR_UNSUPPORTED_CLASS = 0xC00E0093
    MQ_ERROR_MESSAGE_LOCKED_UNDER_TRANSACTION = 0xC00E009C

    @property
    def is_error(self) -> bool:
        """True for failure codes (severity bit set), as MS-MQMQ 2.4 defines them."""
        return bool(self.value & 0x80000000)


class OpenMSMQError(Exception):
    """Base of every error openmsmq raises on purpose."""


class MQError(OpenMSMQError):
    """An operation failed with an MSMQ HRESULT (MS-MQMQ 2.4).

    ``MQError(HResult.X, "what happened")`` returns an instance of the most specific
    subclass registered for ``HResult.X``.
    """

    hresult: HResult

    def __new__(cls, hresult: HResult | int, message: str = "", **_: Any) -> MQError:
        target: type[MQError] = cls
        if cls is MQError:
            target = _SUBCLASS_BY_HRESULT.get(int(hresult), MQError)
        return Exception.__new__(target)

    def __init__(self, hresult: HResult | int, message: str = "") -> None:
        try:
            code: HResult | int = HResult(hresult)
        except ValueError:
            code = int(hresult)
        self.hresult = code  # type: ignore[assignment]
        self.message = message
        name = code.name if isinstance(code, HResult) else "HRESULT"
        head = f"{name} (0x{int(code):08X})"
        super().__init__(f"{head}: {message}" if message else head)

    def __reduce__(self) -> tuple[Any, ...]:
        return (MQError, (int(self.hresult), self.message))


class QueueNotFoundError(MQError):
    """MQ_ERROR_QUEUE_NOT_FOUND: no queue answers to the name or format name."""


class TransactionUsageError(MQError):
    """MQ_ERROR_TRANSACTION_USAGE: transactional operation on a non-transactional queue, or vice versa."""


class IOTimeoutError(MQError):
    """MQ_ERROR_IO_TIMEOUT: a receive or peek waited its whole timeout without a message."""


class MessageNotFoundError(MQError):
    """MQ_ERROR_MESSAGE_NOT_FOUND: no message at that LookupIdentifier or position."""


class AccessDeniedError(MQError):
    """MQ_ERROR_ACCESS_DENIED: the caller lacks the right for the operation."""


class LimitError(MQError):
    """A request asked for more than a configured limit allows (a batch count, a size, a
    budget): refused before any work. ``limit`` names the setting (``remote.max_batch_messages``)
    and the message says what was asked and what the limit is. Its HRESULT is the one the
    caller would see from MSMQ: MQ_ERROR_INVALID_PARAMETER for a count or size out of range,
    MQ_ERROR_INSUFFICIENT_RESOURCES for a budget that is used up."""

    limit: str

    def __init__(self, hresult: HResult | int, message: str = "", *, limit: str = "") -> None:
        super().__init__(hresult, message)
        self.limit = limit

    def __reduce__(self) -> tuple[Any, ...]:
        return (_limit_error, (int(self.hresult), self.message, self.limit))


def _limit_error(hresult: int, message: str, limit: str) -> LimitError:
    return LimitError(hresult, message, limit=limit)


class StorageError(MQError):
    """The store could not make the operation durable (disk full, I/O error, corruption).

    Nothing already committed is lost when this is raised; the failed operation had no effect.
    """


class FencedError(StorageError):
    """A write transaction found another lease epoch than the one this queue manager holds
    (high availability: another process took over the QM). Nothing of the transaction was
    committed; the QM must stop writing and step down. ``epoch`` is the epoch this QM
    holds, ``found`` the database's (None: no lease row)."""

    epoch: int
    found: int | None

    def __init__(
        self, hresult: HResult | int, message: str = "", *, epoch: int = 0, found: int | None = None
    ) -> None:
        super().__init__(hresult, message)
        self.epoch = epoch
        self.found = found

    def __reduce__(self) -> tuple[Any, ...]:
        return (_fenced_error, (int(self.hresult), self.message, self.epoch, self.found))


def _fenced_error(hresult: int, message: str, epoch: int, found: int | None) -> FencedError:
    return FencedError(hresult, message, epoch=epoch, found=found)


_SUBCLASS_BY_HRESULT: dict[int, type[MQError]] = {
    HResult.MQ_ERROR_QUEUE_NOT_FOUND: QueueNotFoundError,
    HResult.MQ_ERROR_TRANSACTION_USAGE: TransactionUsageError,
    HResult.MQ_ERROR_IO_TIMEOUT: IOTimeoutError,
    HResult.MQ_ERROR_MESSAGE_NOT_FOUND: MessageNotFoundError,
    HResult.MQ_ERROR_ACCESS_DENIED: AccessDeniedError,
    HResult.MQ_ERROR_MESSAGE_STORAGE_FAILED: StorageError,
    HResult.MQ_ERROR_INSUFFICIENT_RESOURCES: StorageError,
}


class ProtocolError(OpenMSMQError):
    """The MS-MQQB session rules were broken (by us or by the peer)."""


class LocalProtocolError(ProtocolError):
    """Our side was asked to do something the protocol forbids (caller bug or misuse)."""


class RemoteProtocolError(ProtocolError):
    """The peer broke the protocol; its session must be closed, others go on."""


class WireError(RemoteProtocolError):
    """Malformed bytes: the only exception a decoder in :mod:`openmsmq.wire` may raise.

    The message names the header, the field, the value seen and what was expected.
    """

    def __init__(self, header: str, field: str, value: object, expected: str) -> None:
        self.header = header
        self.field = field
        self.value = value
        self.expected = expected
        super().__init__(f"{header}.{field}: got {value!r}, expected {expected}")

    def __reduce__(self) -> tuple[Any, ...]:
        return (WireError, (self.header, self.field, self.value, self.expected))


class ConfigError(OpenMSMQError):
    """A configuration value is invalid; ``key`` names it."""

    def __init__(self, key: str, message: str) -> None:
        self.key = key
        self.message = message
        super().__init__(f"configuration {key}: {message}")

    def __reduce__(self) -> tuple[Any, ...]:
        return (ConfigError, (self.key, self.message))
