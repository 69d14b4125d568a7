"""The example frames of MS-MQQB section 4.1 (hex dumps transcribed from the spec text).

FRAME 7's dump in the spec is truncated after 1650 of its 2224 bytes; see
:func:`frame7_completed` and the test that documents it.
"""

from __future__ import annotations


def _hex(text: str) -> bytes:
    return bytes.fromhex(" ".join(text.split()))


#: MS-MQQB 4.1.1 FRAME 1: Ping Request (UDP, not an MS-MQQB TCP packet).
FRAME1_PING_REQUEST = _hex("01 7D 48 55 04 00 00 00 D1 58 73 55 50 91 95 95 49 97 B6 E6 11 EA 26 C6")
#: MS-MQQB 4.1.2 FRAME 2: Ping Response (UDP).
FRAME2_PING_RESPONSE = _hex("95 B2 48 55 04 00 00 00 07 89 CD 43 4C 39 11 8F 44 45 90 78 90 9E A0 FC")

#: MS-MQQB 4.1.3 FRAME 3: EstablishConnection request, 572 bytes.
FRAME3_ESTABLISH_REQUEST = (
    _hex(
        """
        10 C0 0B 00 4C 49 4F 52 3C 02 00 00 FF FF FF FF
        00 00 02 00 D1 58 73 55 50 91 95 95 49 97 B6 E6
        11 EA 26 C6 07 89 CD 43 4C 39 11 8F 44 45 90 78
        90 9E A0 FC 4E CA DE 1D 10 03 00 00
        """
    )
    + b"\x5a" * 512
)

#: MS-MQQB 4.1.4 FRAME 4: EstablishConnection response, 572 bytes.
FRAME4_ESTABLISH_RESPONSE = (
    _hex(
        """
        10 5A 0B 00 4C 49 4F 52 3C 02 00 00 FF FF FF FF
        00 00 02 00 05 23 74 1F 5E BE 77 41 BC 77 C4 DD
        77 19 E4 74 EB 6A 3A 3C 67 F5 43 41 87 D3 85 CF
        4D 68 CE B4 4E CA DE 1D 10 03 00 00
        """
    )
    + b"\x5a" * 512
)

#: MS-MQQB 4.1.5 FRAME 5: ConnectionParameters request.
FRAME5_PARAMETERS_REQUEST = _hex(
    """
    10 C0 0B 00 4C 49 4F 52 20 00 00 00 FF FF FF FF
    00 00 03 00 D8 05 00 00 C0 D4 01 00 00 00 40 00
    """
)

#: MS-MQQB 4.1.6 FRAME 6: ConnectionParameters response (same bytes as the request).
FRAME6_PARAMETERS_RESPONSE = _hex(
    """
    10 C0 0B 00 4C 49 4F 52 20 00 00 00 FF FF FF FF
    00 00 03 00 D8 05 00 00 C0 D4 01 00 00 00 40 00
    """
)

#: MS-MQQB 4.1.7 FRAME 7 as printed: the first 1650 bytes of a 2224-byte UserMessage.
FRAME7_USER_MESSAGE_AS_PRINTED = (
    _hex(
        """
        10 00 03 00 4C 49 4F 52 B0 08 00 00 00 46 05 00
        D1 58 73 55 50 91 95 95 49 97 B6 E6 11 EA 26 C6
        00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00
        FF FF FF FF 4C 49 4F 52 EE 08 00 00 00 1C 28 00
        1A 00 4F 00 53 00 3A 00 61 00 30 00 34 00 62 00
        6D 00 30 00 32 00 5C 00 71 00 00 00 01 00 1C 00
        00 00 00 00 00 00 00 00 00 00 00 00 01 05 00 00
        00 00 00 05 15 00 00 00 AD 4A 9E BD 36 D9 FA 3D
        63 A6 56 DA E8 03 00 00 0F 0F 00 00 00 00 00 00
        00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00
        08 00 00 00 00 00 00 00 D0 07 00 00 D0 07 00 00
        00 00 00 00 04 80 00 00 01 68 00 00 00 00 00 00
        6D 00 71 00 73 00 65 00 6E 00 64 00 65 00 72 00
        20 00 6C 00 61 00 62 00 65 00 6C 00 00 00 61 00
        """
    )
    + b"a\x00" * 713
)

#: Offset of FRAME 7's MessageBody: 16 + 76 (UserHeader) + 44 (SecurityHeader) + 56 + 30 (label).
FRAME7_BODY_OFFSET = 222


def frame7_completed(padding: bytes = b"\x00\x00") -> bytes:
    """FRAME 7 completed as its own fields describe it: 1000 UTF-16 'a's of body, 2 padding bytes.

    The padding values are not in the spec (they are unconstrained); zeros are assumed.
    """
    head = FRAME7_USER_MESSAGE_AS_PRINTED[:FRAME7_BODY_OFFSET]
    return head + b"a\x00" * 1000 + padding


#: MS-MQQB 4.1.8 FRAME 8: SessionAck.
FRAME8_SESSION_ACK = _hex(
    """
    10 CD 1B 00 4C 49 4F 52 24 00 00 00 FF FF FF FF
    00 00 01 00 01 00 00 00 00 00 00 00 00 00 00 00
    40 00 00 00
    """
)
