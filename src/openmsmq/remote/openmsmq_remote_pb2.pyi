from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class EndMethod(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    END_METHOD_UNSPECIFIED: _ClassVar[EndMethod]
    END_RECEIVE: _ClassVar[EndMethod]
    END_TRANSACTIONAL_RECEIVE: _ClassVar[EndMethod]
END_METHOD_UNSPECIFIED: EndMethod
END_RECEIVE: EndMethod
END_TRANSACTIONAL_RECEIVE: EndMethod

class SetQueuePropertiesRequest(_message.Message):
    __slots__ = ("name", "label", "quota_kb", "journal", "journal_quota_kb", "base_priority", "set_allowed_senders", "allowed_senders", "retry_policy")
    NAME_FIELD_NUMBER: _ClassVar[int]
    LABEL_FIELD_NUMBER: _ClassVar[int]
    QUOTA_KB_FIELD_NUMBER: _ClassVar[int]
    JOURNAL_FIELD_NUMBER: _ClassVar[int]
    JOURNAL_QUOTA_KB_FIELD_NUMBER: _ClassVar[int]
    BASE_PRIORITY_FIELD_NUMBER: _ClassVar[int]
    SET_ALLOWED_SENDERS_FIELD_NUMBER: _ClassVar[int]
    ALLOWED_SENDERS_FIELD_NUMBER: _ClassVar[int]
    RETRY_POLICY_FIELD_NUMBER: _ClassVar[int]
    name: str
    label: str
    quota_kb: int
    journal: bool
    journal_quota_kb: int
    base_priority: int
    set_allowed_senders: bool
    allowed_senders: _containers.RepeatedScalarFieldContainer[str]
    retry_policy: str
    def __init__(self, name: _Optional[str] = ..., label: _Optional[str] = ..., quota_kb: _Optional[int] = ..., journal: _Optional[bool] = ..., journal_quota_kb: _Optional[int] = ..., base_priority: _Optional[int] = ..., set_allowed_senders: _Optional[bool] = ..., allowed_senders: _Optional[_Iterable[str]] = ..., retry_policy: _Optional[str] = ...) -> None: ...

class MoveMessageRequest(_message.Message):
    __slots__ = ("handle", "transaction", "lookup_id", "to", "return_after")
    HANDLE_FIELD_NUMBER: _ClassVar[int]
    TRANSACTION_FIELD_NUMBER: _ClassVar[int]
    LOOKUP_ID_FIELD_NUMBER: _ClassVar[int]
    TO_FIELD_NUMBER: _ClassVar[int]
    RETURN_AFTER_FIELD_NUMBER: _ClassVar[int]
    handle: int
    transaction: bytes
    lookup_id: int
    to: str
    return_after: float
    def __init__(self, handle: _Optional[int] = ..., transaction: _Optional[bytes] = ..., lookup_id: _Optional[int] = ..., to: _Optional[str] = ..., return_after: _Optional[float] = ...) -> None: ...

class MoveMessageReply(_message.Message):
    __slots__ = ("lookup_id",)
    LOOKUP_ID_FIELD_NUMBER: _ClassVar[int]
    lookup_id: int
    def __init__(self, lookup_id: _Optional[int] = ...) -> None: ...

class OutgoingStateRequest(_message.Message):
    __slots__ = ("format_name", "suspended")
    FORMAT_NAME_FIELD_NUMBER: _ClassVar[int]
    SUSPENDED_FIELD_NUMBER: _ClassVar[int]
    format_name: str
    suspended: bool
    def __init__(self, format_name: _Optional[str] = ..., suspended: _Optional[bool] = ...) -> None: ...

class QueueStatus(_message.Message):
    __slots__ = ("name", "kind", "transactional", "message_count", "total_bytes", "oldest_arrived_time")
    NAME_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    TRANSACTIONAL_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_COUNT_FIELD_NUMBER: _ClassVar[int]
    TOTAL_BYTES_FIELD_NUMBER: _ClassVar[int]
    OLDEST_ARRIVED_TIME_FIELD_NUMBER: _ClassVar[int]
    name: str
    kind: str
    transactional: bool
    message_count: int
    total_bytes: int
    oldest_arrived_time: int
    def __init__(self, name: _Optional[str] = ..., kind: _Optional[str] = ..., transactional: _Optional[bool] = ..., message_count: _Optional[int] = ..., total_bytes: _Optional[int] = ..., oldest_arrived_time: _Optional[int] = ...) -> None: ...

class OutgoingQueueStatus(_message.Message):
    __slots__ = ("format_name", "next_hop", "state", "waiting", "in_flight", "tx_sequence_id", "next_tx_sequence_number", "last_acked_sequence_id", "last_acked_number", "last_unacked_sequence_id", "last_unacked_number", "retry_at", "window", "round_trip", "rejected")
    class RejectedEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    FORMAT_NAME_FIELD_NUMBER: _ClassVar[int]
    NEXT_HOP_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    WAITING_FIELD_NUMBER: _ClassVar[int]
    IN_FLIGHT_FIELD_NUMBER: _ClassVar[int]
    TX_SEQUENCE_ID_FIELD_NUMBER: _ClassVar[int]
    NEXT_TX_SEQUENCE_NUMBER_FIELD_NUMBER: _ClassVar[int]
    LAST_ACKED_SEQUENCE_ID_FIELD_NUMBER: _ClassVar[int]
    LAST_ACKED_NUMBER_FIELD_NUMBER: _ClassVar[int]
    LAST_UNACKED_SEQUENCE_ID_FIELD_NUMBER: _ClassVar[int]
    LAST_UNACKED_NUMBER_FIELD_NUMBER: _ClassVar[int]
    RETRY_AT_FIELD_NUMBER: _ClassVar[int]
    WINDOW_FIELD_NUMBER: _ClassVar[int]
    ROUND_TRIP_FIELD_NUMBER: _ClassVar[int]
    REJECTED_FIELD_NUMBER: _ClassVar[int]
    format_name: str
    next_hop: str
    state: str
    waiting: int
    in_flight: int
    tx_sequence_id: int
    next_tx_sequence_number: int
    last_acked_sequence_id: int
    last_acked_number: int
    last_unacked_sequence_id: int
    last_unacked_number: int
    retry_at: float
    window: int
    round_trip: float
    rejected: _containers.ScalarMap[str, int]
    def __init__(self, format_name: _Optional[str] = ..., next_hop: _Optional[str] = ..., state: _Optional[str] = ..., waiting: _Optional[int] = ..., in_flight: _Optional[int] = ..., tx_sequence_id: _Optional[int] = ..., next_tx_sequence_number: _Optional[int] = ..., last_acked_sequence_id: _Optional[int] = ..., last_acked_number: _Optional[int] = ..., last_unacked_sequence_id: _Optional[int] = ..., last_unacked_number: _Optional[int] = ..., retry_at: _Optional[float] = ..., window: _Optional[int] = ..., round_trip: _Optional[float] = ..., rejected: _Optional[_Mapping[str, int]] = ...) -> None: ...

class IncomingSequenceStatus(_message.Message):
    __slots__ = ("source_qm", "destination", "tx_sequence_id", "tx_sequence_number", "reject_count", "last_access_time", "last_reject_reason", "last_reject_tx_sequence_id", "last_reject_number", "last_reject_previous")
    SOURCE_QM_FIELD_NUMBER: _ClassVar[int]
    DESTINATION_FIELD_NUMBER: _ClassVar[int]
    TX_SEQUENCE_ID_FIELD_NUMBER: _ClassVar[int]
    TX_SEQUENCE_NUMBER_FIELD_NUMBER: _ClassVar[int]
    REJECT_COUNT_FIELD_NUMBER: _ClassVar[int]
    LAST_ACCESS_TIME_FIELD_NUMBER: _ClassVar[int]
    LAST_REJECT_REASON_FIELD_NUMBER: _ClassVar[int]
    LAST_REJECT_TX_SEQUENCE_ID_FIELD_NUMBER: _ClassVar[int]
    LAST_REJECT_NUMBER_FIELD_NUMBER: _ClassVar[int]
    LAST_REJECT_PREVIOUS_FIELD_NUMBER: _ClassVar[int]
    source_qm: str
    destination: str
    tx_sequence_id: int
    tx_sequence_number: int
    reject_count: int
    last_access_time: float
    last_reject_reason: str
    last_reject_tx_sequence_id: int
    last_reject_number: int
    last_reject_previous: int
    def __init__(self, source_qm: _Optional[str] = ..., destination: _Optional[str] = ..., tx_sequence_id: _Optional[int] = ..., tx_sequence_number: _Optional[int] = ..., reject_count: _Optional[int] = ..., last_access_time: _Optional[float] = ..., last_reject_reason: _Optional[str] = ..., last_reject_tx_sequence_id: _Optional[int] = ..., last_reject_number: _Optional[int] = ..., last_reject_previous: _Optional[int] = ...) -> None: ...

class ResetSequenceRequest(_message.Message):
    __slots__ = ("source_qm", "destination", "tx_sequence_id", "tx_sequence_number")
    SOURCE_QM_FIELD_NUMBER: _ClassVar[int]
    DESTINATION_FIELD_NUMBER: _ClassVar[int]
    TX_SEQUENCE_ID_FIELD_NUMBER: _ClassVar[int]
    TX_SEQUENCE_NUMBER_FIELD_NUMBER: _ClassVar[int]
    source_qm: str
    destination: str
    tx_sequence_id: int
    tx_sequence_number: int
    def __init__(self, source_qm: _Optional[str] = ..., destination: _Optional[str] = ..., tx_sequence_id: _Optional[int] = ..., tx_sequence_number: _Optional[int] = ...) -> None: ...

class ResetSequenceReply(_message.Message):
    __slots__ = ("before_tx_sequence_id", "before_tx_sequence_number", "after_tx_sequence_id", "after_tx_sequence_number")
    BEFORE_TX_SEQUENCE_ID_FIELD_NUMBER: _ClassVar[int]
    BEFORE_TX_SEQUENCE_NUMBER_FIELD_NUMBER: _ClassVar[int]
    AFTER_TX_SEQUENCE_ID_FIELD_NUMBER: _ClassVar[int]
    AFTER_TX_SEQUENCE_NUMBER_FIELD_NUMBER: _ClassVar[int]
    before_tx_sequence_id: int
    before_tx_sequence_number: int
    after_tx_sequence_id: int
    after_tx_sequence_number: int
    def __init__(self, before_tx_sequence_id: _Optional[int] = ..., before_tx_sequence_number: _Optional[int] = ..., after_tx_sequence_id: _Optional[int] = ..., after_tx_sequence_number: _Optional[int] = ...) -> None: ...

class StatusReply(_message.Message):
    __slots__ = ("qm_guid", "data_dir", "running", "transfer", "pid", "endpoints", "time", "queues", "outgoing", "incoming")
    class EndpointsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    QM_GUID_FIELD_NUMBER: _ClassVar[int]
    DATA_DIR_FIELD_NUMBER: _ClassVar[int]
    RUNNING_FIELD_NUMBER: _ClassVar[int]
    TRANSFER_FIELD_NUMBER: _ClassVar[int]
    PID_FIELD_NUMBER: _ClassVar[int]
    ENDPOINTS_FIELD_NUMBER: _ClassVar[int]
    TIME_FIELD_NUMBER: _ClassVar[int]
    QUEUES_FIELD_NUMBER: _ClassVar[int]
    OUTGOING_FIELD_NUMBER: _ClassVar[int]
    INCOMING_FIELD_NUMBER: _ClassVar[int]
    qm_guid: str
    data_dir: str
    running: bool
    transfer: bool
    pid: int
    endpoints: _containers.ScalarMap[str, str]
    time: float
    queues: _containers.RepeatedCompositeFieldContainer[QueueStatus]
    outgoing: _containers.RepeatedCompositeFieldContainer[OutgoingQueueStatus]
    incoming: _containers.RepeatedCompositeFieldContainer[IncomingSequenceStatus]
    def __init__(self, qm_guid: _Optional[str] = ..., data_dir: _Optional[str] = ..., running: _Optional[bool] = ..., transfer: _Optional[bool] = ..., pid: _Optional[int] = ..., endpoints: _Optional[_Mapping[str, str]] = ..., time: _Optional[float] = ..., queues: _Optional[_Iterable[_Union[QueueStatus, _Mapping]]] = ..., outgoing: _Optional[_Iterable[_Union[OutgoingQueueStatus, _Mapping]]] = ..., incoming: _Optional[_Iterable[_Union[IncomingSequenceStatus, _Mapping]]] = ...) -> None: ...

class RangeQuery(_message.Message):
    __slots__ = ("queue", "after", "through")
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    AFTER_FIELD_NUMBER: _ClassVar[int]
    THROUGH_FIELD_NUMBER: _ClassVar[int]
    queue: str
    after: int
    through: int
    def __init__(self, queue: _Optional[str] = ..., after: _Optional[int] = ..., through: _Optional[int] = ...) -> None: ...

class LookupRangesRequest(_message.Message):
    __slots__ = ("queries", "with_bytes")
    QUERIES_FIELD_NUMBER: _ClassVar[int]
    WITH_BYTES_FIELD_NUMBER: _ClassVar[int]
    queries: _containers.RepeatedCompositeFieldContainer[RangeQuery]
    with_bytes: bool
    def __init__(self, queries: _Optional[_Iterable[_Union[RangeQuery, _Mapping]]] = ..., with_bytes: _Optional[bool] = ...) -> None: ...

class LookupRangeResult(_message.Message):
    __slots__ = ("first", "last", "count", "bytes")
    FIRST_FIELD_NUMBER: _ClassVar[int]
    LAST_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    BYTES_FIELD_NUMBER: _ClassVar[int]
    first: int
    last: int
    count: int
    bytes: int
    def __init__(self, first: _Optional[int] = ..., last: _Optional[int] = ..., count: _Optional[int] = ..., bytes: _Optional[int] = ...) -> None: ...

class LookupRangesReply(_message.Message):
    __slots__ = ("ranges",)
    RANGES_FIELD_NUMBER: _ClassVar[int]
    ranges: _containers.RepeatedCompositeFieldContainer[LookupRangeResult]
    def __init__(self, ranges: _Optional[_Iterable[_Union[LookupRangeResult, _Mapping]]] = ...) -> None: ...

class NthLookupIdRequest(_message.Message):
    __slots__ = ("queue", "after", "n", "through")
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    AFTER_FIELD_NUMBER: _ClassVar[int]
    N_FIELD_NUMBER: _ClassVar[int]
    THROUGH_FIELD_NUMBER: _ClassVar[int]
    queue: str
    after: int
    n: int
    through: int
    def __init__(self, queue: _Optional[str] = ..., after: _Optional[int] = ..., n: _Optional[int] = ..., through: _Optional[int] = ...) -> None: ...

class NthLookupIdReply(_message.Message):
    __slots__ = ("lookup_id",)
    LOOKUP_ID_FIELD_NUMBER: _ClassVar[int]
    lookup_id: int
    def __init__(self, lookup_id: _Optional[int] = ...) -> None: ...

class PeekRangeRequest(_message.Message):
    __slots__ = ("queue", "after", "through", "max_count", "reply_format")
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    AFTER_FIELD_NUMBER: _ClassVar[int]
    THROUGH_FIELD_NUMBER: _ClassVar[int]
    MAX_COUNT_FIELD_NUMBER: _ClassVar[int]
    REPLY_FORMAT_FIELD_NUMBER: _ClassVar[int]
    queue: str
    after: int
    through: int
    max_count: int
    reply_format: int
    def __init__(self, queue: _Optional[str] = ..., after: _Optional[int] = ..., through: _Optional[int] = ..., max_count: _Optional[int] = ..., reply_format: _Optional[int] = ...) -> None: ...

class RemoveThroughRequest(_message.Message):
    __slots__ = ("positions",)
    class PositionsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    POSITIONS_FIELD_NUMBER: _ClassVar[int]
    positions: _containers.ScalarMap[str, int]
    def __init__(self, positions: _Optional[_Mapping[str, int]] = ...) -> None: ...

class RemoveThroughReply(_message.Message):
    __slots__ = ("count",)
    COUNT_FIELD_NUMBER: _ClassVar[int]
    count: int
    def __init__(self, count: _Optional[int] = ...) -> None: ...

class SendIdempotentRequest(_message.Message):
    __slots__ = ("queue", "messages", "identities")
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    IDENTITIES_FIELD_NUMBER: _ClassVar[int]
    queue: str
    messages: _containers.RepeatedCompositeFieldContainer[OutgoingMessage]
    identities: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, queue: _Optional[str] = ..., messages: _Optional[_Iterable[_Union[OutgoingMessage, _Mapping]]] = ..., identities: _Optional[_Iterable[str]] = ...) -> None: ...

class SendIdempotentReply(_message.Message):
    __slots__ = ("lookup_ids",)
    LOOKUP_IDS_FIELD_NUMBER: _ClassVar[int]
    lookup_ids: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, lookup_ids: _Optional[_Iterable[int]] = ...) -> None: ...

class Empty(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class SessionPing(_message.Message):
    __slots__ = ("seq",)
    SEQ_FIELD_NUMBER: _ClassVar[int]
    seq: int
    def __init__(self, seq: _Optional[int] = ...) -> None: ...

class SessionPong(_message.Message):
    __slots__ = ("session_id", "session_timeout", "seq", "pending_cleanup")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_TIMEOUT_FIELD_NUMBER: _ClassVar[int]
    SEQ_FIELD_NUMBER: _ClassVar[int]
    PENDING_CLEANUP_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    session_timeout: float
    seq: int
    pending_cleanup: float
    def __init__(self, session_id: _Optional[str] = ..., session_timeout: _Optional[float] = ..., seq: _Optional[int] = ..., pending_cleanup: _Optional[float] = ...) -> None: ...

class OpenQueueRequest(_message.Message):
    __slots__ = ("queue", "access", "share_mode")
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    ACCESS_FIELD_NUMBER: _ClassVar[int]
    SHARE_MODE_FIELD_NUMBER: _ClassVar[int]
    queue: str
    access: int
    share_mode: int
    def __init__(self, queue: _Optional[str] = ..., access: _Optional[int] = ..., share_mode: _Optional[int] = ...) -> None: ...

class OpenQueueReply(_message.Message):
    __slots__ = ("handle",)
    HANDLE_FIELD_NUMBER: _ClassVar[int]
    handle: int
    def __init__(self, handle: _Optional[int] = ...) -> None: ...

class HandleRequest(_message.Message):
    __slots__ = ("handle",)
    HANDLE_FIELD_NUMBER: _ClassVar[int]
    handle: int
    def __init__(self, handle: _Optional[int] = ...) -> None: ...

class CreateCursorReply(_message.Message):
    __slots__ = ("cursor",)
    CURSOR_FIELD_NUMBER: _ClassVar[int]
    cursor: int
    def __init__(self, cursor: _Optional[int] = ...) -> None: ...

class CloseCursorRequest(_message.Message):
    __slots__ = ("handle", "cursor")
    HANDLE_FIELD_NUMBER: _ClassVar[int]
    CURSOR_FIELD_NUMBER: _ClassVar[int]
    handle: int
    cursor: int
    def __init__(self, handle: _Optional[int] = ..., cursor: _Optional[int] = ...) -> None: ...

class PurgeReply(_message.Message):
    __slots__ = ("count",)
    COUNT_FIELD_NUMBER: _ClassVar[int]
    count: int
    def __init__(self, count: _Optional[int] = ...) -> None: ...

class ReadRequest(_message.Message):
    __slots__ = ("handle", "action", "lookup_id", "cursor", "timeout_ms", "transaction", "max_count", "request_id", "reply_format")
    HANDLE_FIELD_NUMBER: _ClassVar[int]
    ACTION_FIELD_NUMBER: _ClassVar[int]
    LOOKUP_ID_FIELD_NUMBER: _ClassVar[int]
    CURSOR_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    TRANSACTION_FIELD_NUMBER: _ClassVar[int]
    MAX_COUNT_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    REPLY_FORMAT_FIELD_NUMBER: _ClassVar[int]
    handle: int
    action: int
    lookup_id: int
    cursor: int
    timeout_ms: int
    transaction: bytes
    max_count: int
    request_id: int
    reply_format: int
    def __init__(self, handle: _Optional[int] = ..., action: _Optional[int] = ..., lookup_id: _Optional[int] = ..., cursor: _Optional[int] = ..., timeout_ms: _Optional[int] = ..., transaction: _Optional[bytes] = ..., max_count: _Optional[int] = ..., request_id: _Optional[int] = ..., reply_format: _Optional[int] = ...) -> None: ...

class ReadReply(_message.Message):
    __slots__ = ("messages", "packed")
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    PACKED_FIELD_NUMBER: _ClassVar[int]
    messages: _containers.RepeatedCompositeFieldContainer[Message]
    packed: bytes
    def __init__(self, messages: _Optional[_Iterable[_Union[Message, _Mapping]]] = ..., packed: _Optional[bytes] = ...) -> None: ...

class CancelReceiveRequest(_message.Message):
    __slots__ = ("handle", "request_id")
    HANDLE_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    handle: int
    request_id: int
    def __init__(self, handle: _Optional[int] = ..., request_id: _Optional[int] = ...) -> None: ...

class EndReceiveRequest(_message.Message):
    __slots__ = ("handle", "ack", "request_ids", "method")
    HANDLE_FIELD_NUMBER: _ClassVar[int]
    ACK_FIELD_NUMBER: _ClassVar[int]
    REQUEST_IDS_FIELD_NUMBER: _ClassVar[int]
    METHOD_FIELD_NUMBER: _ClassVar[int]
    handle: int
    ack: int
    request_ids: _containers.RepeatedScalarFieldContainer[int]
    method: EndMethod
    def __init__(self, handle: _Optional[int] = ..., ack: _Optional[int] = ..., request_ids: _Optional[_Iterable[int]] = ..., method: _Optional[_Union[EndMethod, str]] = ...) -> None: ...

class EndReceiveReply(_message.Message):
    __slots__ = ("status",)
    STATUS_FIELD_NUMBER: _ClassVar[int]
    status: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, status: _Optional[_Iterable[int]] = ...) -> None: ...

class SetAckClassRequest(_message.Message):
    __slots__ = ("handle", "transaction", "lookup_id", "message_class")
    HANDLE_FIELD_NUMBER: _ClassVar[int]
    TRANSACTION_FIELD_NUMBER: _ClassVar[int]
    LOOKUP_ID_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_CLASS_FIELD_NUMBER: _ClassVar[int]
    handle: int
    transaction: bytes
    lookup_id: int
    message_class: int
    def __init__(self, handle: _Optional[int] = ..., transaction: _Optional[bytes] = ..., lookup_id: _Optional[int] = ..., message_class: _Optional[int] = ...) -> None: ...

class OutgoingMessage(_message.Message):
    __slots__ = ("body", "label", "priority", "correlation_id", "app_specific", "body_type", "delivery", "time_to_reach_queue", "time_to_be_received", "ack_flags", "admin_queue", "response_queue", "journal", "dead_letter", "extension")
    BODY_FIELD_NUMBER: _ClassVar[int]
    LABEL_FIELD_NUMBER: _ClassVar[int]
    PRIORITY_FIELD_NUMBER: _ClassVar[int]
    CORRELATION_ID_FIELD_NUMBER: _ClassVar[int]
    APP_SPECIFIC_FIELD_NUMBER: _ClassVar[int]
    BODY_TYPE_FIELD_NUMBER: _ClassVar[int]
    DELIVERY_FIELD_NUMBER: _ClassVar[int]
    TIME_TO_REACH_QUEUE_FIELD_NUMBER: _ClassVar[int]
    TIME_TO_BE_RECEIVED_FIELD_NUMBER: _ClassVar[int]
    ACK_FLAGS_FIELD_NUMBER: _ClassVar[int]
    ADMIN_QUEUE_FIELD_NUMBER: _ClassVar[int]
    RESPONSE_QUEUE_FIELD_NUMBER: _ClassVar[int]
    JOURNAL_FIELD_NUMBER: _ClassVar[int]
    DEAD_LETTER_FIELD_NUMBER: _ClassVar[int]
    EXTENSION_FIELD_NUMBER: _ClassVar[int]
    body: bytes
    label: str
    priority: int
    correlation_id: bytes
    app_specific: int
    body_type: int
    delivery: int
    time_to_reach_queue: int
    time_to_be_received: int
    ack_flags: int
    admin_queue: str
    response_queue: str
    journal: bool
    dead_letter: bool
    extension: bytes
    def __init__(self, body: _Optional[bytes] = ..., label: _Optional[str] = ..., priority: _Optional[int] = ..., correlation_id: _Optional[bytes] = ..., app_specific: _Optional[int] = ..., body_type: _Optional[int] = ..., delivery: _Optional[int] = ..., time_to_reach_queue: _Optional[int] = ..., time_to_be_received: _Optional[int] = ..., ack_flags: _Optional[int] = ..., admin_queue: _Optional[str] = ..., response_queue: _Optional[str] = ..., journal: _Optional[bool] = ..., dead_letter: _Optional[bool] = ..., extension: _Optional[bytes] = ...) -> None: ...

class SendRequest(_message.Message):
    __slots__ = ("handle", "transaction", "messages")
    HANDLE_FIELD_NUMBER: _ClassVar[int]
    TRANSACTION_FIELD_NUMBER: _ClassVar[int]
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    handle: int
    transaction: bytes
    messages: _containers.RepeatedCompositeFieldContainer[OutgoingMessage]
    def __init__(self, handle: _Optional[int] = ..., transaction: _Optional[bytes] = ..., messages: _Optional[_Iterable[_Union[OutgoingMessage, _Mapping]]] = ...) -> None: ...

class SendReceipt(_message.Message):
    __slots__ = ("id_lineage", "id_uniquifier", "lookup_id")
    ID_LINEAGE_FIELD_NUMBER: _ClassVar[int]
    ID_UNIQUIFIER_FIELD_NUMBER: _ClassVar[int]
    LOOKUP_ID_FIELD_NUMBER: _ClassVar[int]
    id_lineage: bytes
    id_uniquifier: int
    lookup_id: int
    def __init__(self, id_lineage: _Optional[bytes] = ..., id_uniquifier: _Optional[int] = ..., lookup_id: _Optional[int] = ...) -> None: ...

class SendReply(_message.Message):
    __slots__ = ("receipts",)
    RECEIPTS_FIELD_NUMBER: _ClassVar[int]
    receipts: _containers.RepeatedCompositeFieldContainer[SendReceipt]
    def __init__(self, receipts: _Optional[_Iterable[_Union[SendReceipt, _Mapping]]] = ...) -> None: ...

class TransactionRequest(_message.Message):
    __slots__ = ("transaction",)
    TRANSACTION_FIELD_NUMBER: _ClassVar[int]
    transaction: bytes
    def __init__(self, transaction: _Optional[bytes] = ...) -> None: ...

class StepOp(_message.Message):
    __slots__ = ("read", "start_receive", "end_receive", "commit", "abort", "give_back", "send")
    READ_FIELD_NUMBER: _ClassVar[int]
    START_RECEIVE_FIELD_NUMBER: _ClassVar[int]
    END_RECEIVE_FIELD_NUMBER: _ClassVar[int]
    COMMIT_FIELD_NUMBER: _ClassVar[int]
    ABORT_FIELD_NUMBER: _ClassVar[int]
    GIVE_BACK_FIELD_NUMBER: _ClassVar[int]
    SEND_FIELD_NUMBER: _ClassVar[int]
    read: ReadRequest
    start_receive: ReadRequest
    end_receive: EndReceiveRequest
    commit: TransactionRequest
    abort: TransactionRequest
    give_back: TransactionRequest
    send: SendRequest
    def __init__(self, read: _Optional[_Union[ReadRequest, _Mapping]] = ..., start_receive: _Optional[_Union[ReadRequest, _Mapping]] = ..., end_receive: _Optional[_Union[EndReceiveRequest, _Mapping]] = ..., commit: _Optional[_Union[TransactionRequest, _Mapping]] = ..., abort: _Optional[_Union[TransactionRequest, _Mapping]] = ..., give_back: _Optional[_Union[TransactionRequest, _Mapping]] = ..., send: _Optional[_Union[SendRequest, _Mapping]] = ...) -> None: ...

class StepRequest(_message.Message):
    __slots__ = ("ops",)
    OPS_FIELD_NUMBER: _ClassVar[int]
    ops: _containers.RepeatedCompositeFieldContainer[StepOp]
    def __init__(self, ops: _Optional[_Iterable[_Union[StepOp, _Mapping]]] = ...) -> None: ...

class StepResult(_message.Message):
    __slots__ = ("hresult", "details", "read", "end_receive", "send")
    HRESULT_FIELD_NUMBER: _ClassVar[int]
    DETAILS_FIELD_NUMBER: _ClassVar[int]
    READ_FIELD_NUMBER: _ClassVar[int]
    END_RECEIVE_FIELD_NUMBER: _ClassVar[int]
    SEND_FIELD_NUMBER: _ClassVar[int]
    hresult: int
    details: str
    read: ReadReply
    end_receive: EndReceiveReply
    send: SendReply
    def __init__(self, hresult: _Optional[int] = ..., details: _Optional[str] = ..., read: _Optional[_Union[ReadReply, _Mapping]] = ..., end_receive: _Optional[_Union[EndReceiveReply, _Mapping]] = ..., send: _Optional[_Union[SendReply, _Mapping]] = ...) -> None: ...

class StepReply(_message.Message):
    __slots__ = ("results",)
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[StepResult]
    def __init__(self, results: _Optional[_Iterable[_Union[StepResult, _Mapping]]] = ...) -> None: ...

class Message(_message.Message):
    __slots__ = ("body", "label", "lookup_id", "id_lineage", "id_uniquifier", "message_class", "priority", "correlation_id", "app_specific", "body_type", "delivery", "sent_time", "arrived_time", "time_to_reach_queue", "time_to_be_received", "destination_queue", "admin_queue", "response_queue", "ack_flags", "positive_journaling", "negative_journaling", "transactional", "first_in_transaction", "last_in_transaction", "source_machine", "extension", "request_id", "tx_sequence_id", "tx_sequence_number", "abort_count", "move_count")
    BODY_FIELD_NUMBER: _ClassVar[int]
    LABEL_FIELD_NUMBER: _ClassVar[int]
    LOOKUP_ID_FIELD_NUMBER: _ClassVar[int]
    ID_LINEAGE_FIELD_NUMBER: _ClassVar[int]
    ID_UNIQUIFIER_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_CLASS_FIELD_NUMBER: _ClassVar[int]
    PRIORITY_FIELD_NUMBER: _ClassVar[int]
    CORRELATION_ID_FIELD_NUMBER: _ClassVar[int]
    APP_SPECIFIC_FIELD_NUMBER: _ClassVar[int]
    BODY_TYPE_FIELD_NUMBER: _ClassVar[int]
    DELIVERY_FIELD_NUMBER: _ClassVar[int]
    SENT_TIME_FIELD_NUMBER: _ClassVar[int]
    ARRIVED_TIME_FIELD_NUMBER: _ClassVar[int]
    TIME_TO_REACH_QUEUE_FIELD_NUMBER: _ClassVar[int]
    TIME_TO_BE_RECEIVED_FIELD_NUMBER: _ClassVar[int]
    DESTINATION_QUEUE_FIELD_NUMBER: _ClassVar[int]
    ADMIN_QUEUE_FIELD_NUMBER: _ClassVar[int]
    RESPONSE_QUEUE_FIELD_NUMBER: _ClassVar[int]
    ACK_FLAGS_FIELD_NUMBER: _ClassVar[int]
    POSITIVE_JOURNALING_FIELD_NUMBER: _ClassVar[int]
    NEGATIVE_JOURNALING_FIELD_NUMBER: _ClassVar[int]
    TRANSACTIONAL_FIELD_NUMBER: _ClassVar[int]
    FIRST_IN_TRANSACTION_FIELD_NUMBER: _ClassVar[int]
    LAST_IN_TRANSACTION_FIELD_NUMBER: _ClassVar[int]
    SOURCE_MACHINE_FIELD_NUMBER: _ClassVar[int]
    EXTENSION_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    TX_SEQUENCE_ID_FIELD_NUMBER: _ClassVar[int]
    TX_SEQUENCE_NUMBER_FIELD_NUMBER: _ClassVar[int]
    ABORT_COUNT_FIELD_NUMBER: _ClassVar[int]
    MOVE_COUNT_FIELD_NUMBER: _ClassVar[int]
    body: bytes
    label: str
    lookup_id: int
    id_lineage: bytes
    id_uniquifier: int
    message_class: int
    priority: int
    correlation_id: bytes
    app_specific: int
    body_type: int
    delivery: int
    sent_time: int
    arrived_time: int
    time_to_reach_queue: int
    time_to_be_received: int
    destination_queue: str
    admin_queue: str
    response_queue: str
    ack_flags: int
    positive_journaling: bool
    negative_journaling: bool
    transactional: bool
    first_in_transaction: bool
    last_in_transaction: bool
    source_machine: bytes
    extension: bytes
    request_id: int
    tx_sequence_id: int
    tx_sequence_number: int
    abort_count: int
    move_count: int
    def __init__(self, body: _Optional[bytes] = ..., label: _Optional[str] = ..., lookup_id: _Optional[int] = ..., id_lineage: _Optional[bytes] = ..., id_uniquifier: _Optional[int] = ..., message_class: _Optional[int] = ..., priority: _Optional[int] = ..., correlation_id: _Optional[bytes] = ..., app_specific: _Optional[int] = ..., body_type: _Optional[int] = ..., delivery: _Optional[int] = ..., sent_time: _Optional[int] = ..., arrived_time: _Optional[int] = ..., time_to_reach_queue: _Optional[int] = ..., time_to_be_received: _Optional[int] = ..., destination_queue: _Optional[str] = ..., admin_queue: _Optional[str] = ..., response_queue: _Optional[str] = ..., ack_flags: _Optional[int] = ..., positive_journaling: _Optional[bool] = ..., negative_journaling: _Optional[bool] = ..., transactional: _Optional[bool] = ..., first_in_transaction: _Optional[bool] = ..., last_in_transaction: _Optional[bool] = ..., source_machine: _Optional[bytes] = ..., extension: _Optional[bytes] = ..., request_id: _Optional[int] = ..., tx_sequence_id: _Optional[int] = ..., tx_sequence_number: _Optional[int] = ..., abort_count: _Optional[int] = ..., move_count: _Optional[int] = ...) -> None: ...

class CreateQueueRequest(_message.Message):
    __slots__ = ("path", "transactional", "label", "quota_kb", "journal", "journal_quota_kb", "allowed_senders")
    PATH_FIELD_NUMBER: _ClassVar[int]
    TRANSACTIONAL_FIELD_NUMBER: _ClassVar[int]
    LABEL_FIELD_NUMBER: _ClassVar[int]
    QUOTA_KB_FIELD_NUMBER: _ClassVar[int]
    JOURNAL_FIELD_NUMBER: _ClassVar[int]
    JOURNAL_QUOTA_KB_FIELD_NUMBER: _ClassVar[int]
    ALLOWED_SENDERS_FIELD_NUMBER: _ClassVar[int]
    path: str
    transactional: bool
    label: str
    quota_kb: int
    journal: bool
    journal_quota_kb: int
    allowed_senders: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, path: _Optional[str] = ..., transactional: _Optional[bool] = ..., label: _Optional[str] = ..., quota_kb: _Optional[int] = ..., journal: _Optional[bool] = ..., journal_quota_kb: _Optional[int] = ..., allowed_senders: _Optional[_Iterable[str]] = ...) -> None: ...

class QueueName(_message.Message):
    __slots__ = ("name",)
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class ListQueuesRequest(_message.Message):
    __slots__ = ("include_system",)
    INCLUDE_SYSTEM_FIELD_NUMBER: _ClassVar[int]
    include_system: bool
    def __init__(self, include_system: _Optional[bool] = ...) -> None: ...

class ListQueuesReply(_message.Message):
    __slots__ = ("queues",)
    QUEUES_FIELD_NUMBER: _ClassVar[int]
    queues: _containers.RepeatedCompositeFieldContainer[QueueInfo]
    def __init__(self, queues: _Optional[_Iterable[_Union[QueueInfo, _Mapping]]] = ...) -> None: ...

class QueueInfo(_message.Message):
    __slots__ = ("path", "kind", "transactional", "label", "quota_kb", "journal", "journal_quota_kb", "private_number", "created_time", "modify_time", "message_count", "total_bytes", "destination", "allowed_senders", "retry_policy")
    PATH_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    TRANSACTIONAL_FIELD_NUMBER: _ClassVar[int]
    LABEL_FIELD_NUMBER: _ClassVar[int]
    QUOTA_KB_FIELD_NUMBER: _ClassVar[int]
    JOURNAL_FIELD_NUMBER: _ClassVar[int]
    JOURNAL_QUOTA_KB_FIELD_NUMBER: _ClassVar[int]
    PRIVATE_NUMBER_FIELD_NUMBER: _ClassVar[int]
    CREATED_TIME_FIELD_NUMBER: _ClassVar[int]
    MODIFY_TIME_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_COUNT_FIELD_NUMBER: _ClassVar[int]
    TOTAL_BYTES_FIELD_NUMBER: _ClassVar[int]
    DESTINATION_FIELD_NUMBER: _ClassVar[int]
    ALLOWED_SENDERS_FIELD_NUMBER: _ClassVar[int]
    RETRY_POLICY_FIELD_NUMBER: _ClassVar[int]
    path: str
    kind: str
    transactional: bool
    label: str
    quota_kb: int
    journal: bool
    journal_quota_kb: int
    private_number: int
    created_time: int
    modify_time: int
    message_count: int
    total_bytes: int
    destination: str
    allowed_senders: _containers.RepeatedScalarFieldContainer[str]
    retry_policy: str
    def __init__(self, path: _Optional[str] = ..., kind: _Optional[str] = ..., transactional: _Optional[bool] = ..., label: _Optional[str] = ..., quota_kb: _Optional[int] = ..., journal: _Optional[bool] = ..., journal_quota_kb: _Optional[int] = ..., private_number: _Optional[int] = ..., created_time: _Optional[int] = ..., modify_time: _Optional[int] = ..., message_count: _Optional[int] = ..., total_bytes: _Optional[int] = ..., destination: _Optional[str] = ..., allowed_senders: _Optional[_Iterable[str]] = ..., retry_policy: _Optional[str] = ...) -> None: ...
