"""Bounded fuzzing of the decoders: arbitrary or mutated bytes yield packets or WireError, nothing else.

Any input the decoder accepts must re-encode to exactly the same bytes.
"""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from openmsmq.errors import WireError
from openmsmq.wire import PacketDecoder, decode_packet

from . import strategies as S
from .frames import FRAME3_ESTABLISH_REQUEST, FRAME5_PARAMETERS_REQUEST, FRAME8_SESSION_ACK, frame7_completed

FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def feed_whole_and_bytewise(data: bytes) -> None:
    whole: list[Any] = []
    try:
        whole = PacketDecoder().feed(data)
    except WireError:
        whole = ["error"]
    bytewise: list[Any] = []
    decoder = PacketDecoder()
    try:
        for i in range(len(data)):
            bytewise.extend(decoder.feed(data[i : i + 1]))
    except WireError:
        bytewise.append("error")
    # Same verdict either way; every accepted packet re-encodes byte for byte.
    assert whole == bytewise
    consumed = b"".join(p.encode() for p in whole if p != "error")
    assert data.startswith(consumed)


@FUZZ
@given(st.binary(max_size=600))
def test_arbitrary_bytes(data: bytes) -> None:
    feed_whole_and_bytewise(data)


@FUZZ
@given(st.binary(max_size=200))
def test_arbitrary_bytes_after_valid_base_header(tail: bytes) -> None:
    # A plausible BaseHeader steers the fuzzer past the signature check.
    size = (len(tail) + 16) & ~3
    head = bytes([0x10, 0]) + (tail[:2] or b"\x03\x00") + b"LIOR" + size.to_bytes(4, "little") + b"\xff" * 4
    feed_whole_and_bytewise(head + tail)


SEEDS = [FRAME3_ESTABLISH_REQUEST, FRAME5_PARAMETERS_REQUEST, FRAME8_SESSION_ACK, frame7_completed()[:2224]]


@FUZZ
@given(
    st.one_of(st.sampled_from(SEEDS), S.packets.map(lambda p: p.encode())),
    st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 255)), min_size=1, max_size=6),
)
def test_mutated_valid_packets(seed: bytes, mutations: list[tuple[int, int]]) -> None:
    data = bytearray(seed)
    for pos, value in mutations:
        data[pos % len(data)] = value
    try:
        packet = decode_packet(bytes(data))
    except WireError:
        return
    assert packet.encode() == bytes(data)
