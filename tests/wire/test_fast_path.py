"""The UserMessage fast paths agree with the general codec on every input.

Decode: :func:`decode_user_message` takes a fast path for the common transfer shape
(direct DestinationQueue, no admin / response queue, optional TransactionHeader
without ConnectorQMGuid, no Security / Debug / SOAP / MQF header). For any bytes, it
must return exactly what the header-by-header decoder returns, or raise the same
WireError. Encode: :meth:`UserMessage.encode` takes a fast path for the same shape and
must produce the general encoder's bytes.
"""

from __future__ import annotations

import struct
import uuid
from dataclasses import replace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from openmsmq.errors import LocalProtocolError, WireError
from openmsmq.wire import (
    DirectQueueFormatName,
    SessionHeader,
    TransactionHeader,
    TxSequenceId,
    UserMessage,
    decode_packet,
)
from openmsmq.wire import message as message_module
from openmsmq.wire.message import _decode_general, decode_user_message

from . import strategies as S

_BASE = struct.Struct("<BBHIII")
CHECKS = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])

direct_queues = st.builds(
    DirectQueueFormatName,
    st.sampled_from(["TCP:10.0.0.2\\PRIVATE$\\orders", "TCP:h\\private$\\q", "OS:x\\PRIVATE$\\abc"]),
    st.sampled_from([b"", b"\x00\x00", b"\x01\x02"]),
)


@st.composite
def common_messages(draw: st.DrawFn) -> UserMessage:
    """UserMessages of the fast path's shape (sometimes with a trailing SessionHeader)."""
    m = draw(S.user_messages())
    user = replace(m.user, destination_queue=draw(direct_queues), admin_queue=None, response_queue=None,
                   connector_type=None)  # fmt: skip
    tx = m.transaction
    if tx is not None and draw(st.booleans()):
        tx = replace(tx, connector_qm_guid=None)
    return replace(m, user=user, transaction=tx, security=None, debug=None, soap=None, multi_queue=None,
                   base_flags=m.base_flags & ~0x100)  # fmt: skip


def _verdict(fn: object, data: bytes) -> object:
    _, reserved, flags, _, size, ttrq = _BASE.unpack_from(data, 0)
    try:
        return fn(data, flags, reserved, size, ttrq)  # type: ignore[operator]
    except WireError as exc:
        return ("error", str(exc))


@CHECKS
@given(common_messages())
def test_fast_decode_equals_general_decode(m: UserMessage) -> None:
    data = m.encode()
    first = decode_packet(data)  # fills the direct-name memo the fast path relies on
    assert first == decode_packet(data)
    assert _verdict(decode_user_message, data) == _verdict(_decode_general, data)
    assert decode_packet(data).encode() == data


@CHECKS
@given(
    common_messages(),
    st.lists(st.tuples(st.integers(16, 400), st.integers(0, 255)), min_size=1, max_size=4),
)
def test_fast_decode_same_verdict_on_mutations(m: UserMessage, mutations: list[tuple[int, int]]) -> None:
    data = m.encode()
    decode_packet(data)
    mutated = bytearray(data)
    for pos, value in mutations:
        if pos < len(mutated):
            mutated[pos] = value
    raw = bytes(mutated)
    fast = _verdict(decode_user_message, raw)
    assert fast == _verdict(_decode_general, raw)
    if not isinstance(fast, tuple):
        assert fast.encode() == raw  # type: ignore[attr-defined]


@CHECKS
@given(st.lists(common_messages(), min_size=2, max_size=6), st.lists(st.integers(0, 5), max_size=12))
def test_fast_decode_of_a_stream_equals_general_decode(ms: list[UserMessage], order: list[int]) -> None:
    """Packets decoded one after another (the fast path reuses the previous packet's GUIDs,
    TxSequenceID and DestinationQueue when their bytes repeat): each equals its general
    decode, whatever came before it, in runs of equal packets and alternating ones."""
    datas = [m.encode() for m in ms]
    for data in datas:
        decode_packet(data)  # fills the direct-name memo the fast path relies on
    for i in [*range(len(datas)), *order, *reversed(range(len(datas)))]:
        data = datas[i % len(datas)]
        assert _verdict(decode_user_message, data) == _verdict(_decode_general, data)


def test_fast_path_is_taken(monkeypatch: pytest.MonkeyPatch) -> None:
    m = UserMessage.build(
        source_qm=uuid.UUID(int=1),
        message_id=1,
        destination_queue=DirectQueueFormatName("TCP:10.0.0.2\\PRIVATE$\\fast"),
        body=b"abc",
        sent_time=5,
        label="L",
        transaction=TransactionHeader(TxSequenceId(1, 2), 3, 2, 0xC),
    )
    data = m.encode()
    assert decode_packet(data) == m  # the first decode fills the direct-name memo

    def refuse(*args: object) -> UserMessage:
        raise AssertionError("general path used")

    monkeypatch.setattr(message_module, "_decode_general", refuse)
    assert decode_packet(data) == m
    with_session = m.with_session(SessionHeader(1, window_size=7))
    assert decode_packet(with_session.encode()) == with_session


@CHECKS
@given(common_messages(), st.booleans())
def test_fast_encode_equals_general_encode(m: UserMessage, label_cached: bool) -> None:
    if label_cached:
        m.encode()  # the second encode finds label and direct name in the memo caches
    assert m.encode() == m._encode_general()


def test_fast_encode_errors_match_general() -> None:
    m = UserMessage.build(
        source_qm=uuid.UUID(int=1),
        message_id=1,
        destination_queue=DirectQueueFormatName("TCP:10.0.0.2\\PRIVATE$\\fast"),
        body=b"abc",
        sent_time=5,
        transaction=TransactionHeader(TxSequenceId(1, 2), 3, 2, 0xC),
    )
    bad_corr = replace(m, properties=replace(m.properties, correlation_id=b"short"))
    with pytest.raises(LocalProtocolError, match="CorrelationID"):
        bad_corr.encode()
    big = replace(m, properties=replace(m.properties, body=bytes(4 * 1024 * 1024)))
    with pytest.raises(LocalProtocolError, match="4 MiB"):
        big.encode()
    express = replace(m, user=replace(m.user, flags=0))
    with pytest.raises(LocalProtocolError, match="express"):
        express.encode()
