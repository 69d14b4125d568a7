"""Decoded values are ordinary frozen values: the decoders' fast constructor is invisible.

The decoders build values with :func:`openmsmq.wire.fast.fast_constructor` instead of
the dataclasses' ``__init__``; these tests check that what comes out is the same thing
as a value constructed normally: the exact class, equal, same hash and repr, no
``__dict__``, and immutable (assigning or deleting any field raises).
"""

from __future__ import annotations

import copy
import dataclasses
import pickle
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given, settings

from openmsmq.wire import (
    DirectQueueFormatName,
    OrderAck,
    OrderAckBody,
    SessionHeader,
    TransactionHeader,
    TxSequenceId,
    UserHeader,
    UserMessage,
    decode_packet,
)
from openmsmq.wire.fast import fast_constructor

from . import strategies as S

FAST = settings(max_examples=100, deadline=None)


def _values(obj: Any) -> Iterator[Any]:
    """``obj`` and every dataclass value reachable through its fields, depth first."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        yield obj
        for f in dataclasses.fields(obj):
            yield from _values(getattr(obj, f.name))
    elif isinstance(obj, tuple):
        for item in obj:
            yield from _values(item)


def _assert_frozen(value: Any) -> None:
    assert not hasattr(value, "__dict__")
    for f in dataclasses.fields(value):
        before = getattr(value, f.name)
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(value, f.name, before)
        with pytest.raises(dataclasses.FrozenInstanceError):
            delattr(value, f.name)
        assert getattr(value, f.name) is before


def _assert_same_value(decoded: Any, built: Any) -> None:
    """``decoded`` (from the wire) equals ``built``, and each value in it is indistinguishable
    from one made by the class's ``__init__`` from the same field values."""
    assert type(decoded) is type(built)
    assert decoded == built and built == decoded
    assert hash(decoded) == hash(built)
    for a, b in zip(_values(decoded), _values(built), strict=True):
        assert type(a) is type(b)
        assert a == b
        _assert_frozen(a)
        # replace() with no changes runs the generated __init__ on the same field values
        # (built values may hold IntEnum members where decoded ones hold ints: the repr
        # of the pair differs, but not that of a value and its __init__ twin).
        twin = dataclasses.replace(a)
        assert twin == a and hash(twin) == hash(a) and repr(twin) == repr(a)


def _transactional() -> UserMessage:
    return UserMessage.build(
        source_qm=uuid.UUID("557358d1-9150-9595-4997-b6e611ea26c6"),
        message_id=2286,
        destination_queue=DirectQueueFormatName("TCP:10.0.0.2\\PRIVATE$\\orders"),
        body=bytes(range(256)),
        sent_time=1_700_000_000,
        label="order 42",
        transaction=TransactionHeader(
            TxSequenceId(1_700_000_000, 7), 42, 41, TransactionHeader.make_flags(first=True, last=True)
        ),
        session=SessionHeader(3, 2, 0, 5, 4),
    )


def test_decoded_user_message_is_an_ordinary_frozen_value() -> None:
    built = _transactional()
    decoded = decode_packet(built.encode())
    assert isinstance(decoded, UserMessage)
    _assert_same_value(decoded, built)
    assert decoded.transaction is not None and decoded.session is not None
    # the nested values the fast constructor built are really there, and frozen
    kinds = {type(v) for v in _values(decoded)}
    assert {UserMessage, UserHeader, TransactionHeader, TxSequenceId, SessionHeader} <= kinds


def test_decoded_values_work_with_replace_copy_pickle_and_sets() -> None:
    built = _transactional()
    decoded = decode_packet(built.encode())
    assert isinstance(decoded, UserMessage)
    changed = dataclasses.replace(decoded, base_flags=5)
    assert changed.priority == 5 and decoded.priority == built.priority
    assert copy.copy(decoded) == built
    assert copy.deepcopy(decoded) == built
    assert pickle.loads(pickle.dumps(decoded)) == built
    assert len({decoded, built, decode_packet(built.encode())}) == 1
    assert decoded.encode() == built.encode()


def test_decoded_order_ack_is_an_ordinary_frozen_value() -> None:
    from openmsmq.wire import ORDER_QUEUE_ID, PrivateQueueFormatNameId

    built = OrderAck.build(
        OrderAckBody.for_number(TxSequenceId(1_700_000_000, 7), 42),
        source_qm=uuid.UUID("fca09e90-7890-4544-8f11-394c43cd8907"),
        destination_queue=PrivateQueueFormatNameId(ORDER_QUEUE_ID),
        destination_qm=uuid.UUID("557358d1-9150-9595-4997-b6e611ea26c6"),
        sent_time=1_700_000_001,
    )
    decoded = decode_packet(built.encode())
    _assert_same_value(decoded, built)
    assert isinstance(decoded, OrderAck)
    _assert_same_value(decoded.body, built.body)


def test_memoised_values_are_shared_but_immutable() -> None:
    """Decoders share memoised values (TxSequenceIds, direct format names); sharing is safe."""
    a = decode_packet(_transactional().encode())
    b = decode_packet(_transactional().encode())
    assert isinstance(a, UserMessage) and isinstance(b, UserMessage)
    assert a is not b and a.user is not b.user
    assert a.transaction is not None and b.transaction is not None
    _assert_frozen(a.transaction.tx_sequence_id)
    _assert_frozen(a.user.destination_queue)
    assert a == b


@FAST
@given(S.packets)
def test_every_decoded_packet_is_frozen_and_equal(packet: Any) -> None:
    _assert_same_value(decode_packet(packet.encode()), packet)


@pytest.mark.parametrize("swap", [True, False])
def test_fast_constructor_strategies(swap: bool) -> None:
    """Both strategies (layout twin + __class__, member descriptors) give ordinary values."""
    make = fast_constructor(TransactionHeader, swap=swap)
    built = TransactionHeader(TxSequenceId(1, 2), 3, 2, 0x4, uuid.UUID(int=7))
    made = make(TxSequenceId(1, 2), 3, 2, 0x4, uuid.UUID(int=7))
    _assert_same_value(made, built)
    make_msg = fast_constructor(UserMessage, swap=swap)
    msg = _transactional()
    fields = [getattr(msg, f.name) for f in dataclasses.fields(UserMessage)]
    _assert_same_value(make_msg(*fields), msg)


def test_fast_constructor_needs_a_slots_dataclass() -> None:
    @dataclasses.dataclass(frozen=True)
    class NoSlots:
        x: int

    class NotADataclass:
        __slots__ = ("x",)

    @dataclasses.dataclass(frozen=True, slots=True)
    class Checked:
        x: int

        def __post_init__(self) -> None:
            if self.x < 0:
                raise ValueError("negative")

    with pytest.raises(TypeError):
        fast_constructor(NoSlots)
    with pytest.raises(TypeError):
        fast_constructor(NotADataclass)
    with pytest.raises(TypeError, match="__post_init__"):
        fast_constructor(Checked)


@pytest.mark.parametrize("swap", [True, False])
def test_fast_constructor_with_named_fields(swap: bool) -> None:
    """``fields=``: the named fields in the given order, declared defaults for the others."""
    named = ["tx_sequence_number", "tx_sequence_id", "previous_tx_sequence_number"]
    make = fast_constructor(TransactionHeader, swap=swap, fields=named)
    _assert_same_value(make(3, TxSequenceId(1, 2), 2), TransactionHeader(TxSequenceId(1, 2), 3, 2))
    with pytest.raises(TypeError, match="no plain default"):
        fast_constructor(TransactionHeader, swap=swap, fields=["tx_sequence_id"])
    with pytest.raises(TypeError, match="distinct fields"):
        fast_constructor(TransactionHeader, swap=swap, fields=["tx_sequence_id", "tx_sequence_id"])
    with pytest.raises(TypeError, match="distinct fields"):
        fast_constructor(TransactionHeader, swap=swap, fields=["nope"])
