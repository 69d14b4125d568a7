"""Format names and path names (MS-MQMQ 2.1): parse, print, compare, errors."""

from __future__ import annotations

from uuid import UUID

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from openmsmq.errors import HResult, MQError
from openmsmq.wire.format_name import (
    ORDER_QUEUE_PRIVATE_ID,
    ConnectorFormatName,
    DirectFormatName,
    DirectProtocol,
    DistributionListFormatName,
    FormatName,
    LocalIdentity,
    MachineFormatName,
    MulticastFormatName,
    MultipleElementFormatName,
    PrivateFormatName,
    PublicFormatName,
    QueueFormatType,
    QueuePathName,
    QueueSuffixType,
    order_queue_direct,
    order_queue_private,
    parse_direct_id,
    parse_format_name,
    parse_path_name,
)

G = "3F2504E0-4F89-11D3-9A0C-0305E82C3301"
g = G.lower()
GU = UUID(G)
TCP, OS, HTTP, HTTPS = DirectProtocol.TCP, DirectProtocol.OS, DirectProtocol.HTTP, DirectProtocol.HTTPS
S = QueueSuffixType

# (input, canonical text, expected value)
EXAMPLES: list[tuple[str, str, FormatName]] = [
    # MS-MQMQ 2.1.2 direct names; data-model.md §11.3 examples
    (
        "DIRECT=TCP:192.0.2.10\\PRIVATE$\\orders",
        "DIRECT=TCP:192.0.2.10\\PRIVATE$\\orders",
        DirectFormatName(TCP, "192.0.2.10", "orders", private=True),
    ),
    (
        "DIRECT=OS:mq01.example.com\\private$\\orders;JOURNAL",
        "DIRECT=OS:mq01.example.com\\PRIVATE$\\orders;JOURNAL",
        DirectFormatName(OS, "mq01.example.com", "orders", True, S.JOURNAL),
    ),
    (
        "direct=tcp:192.0.2.10\\private$\\orders;poison",
        "DIRECT=TCP:192.0.2.10\\PRIVATE$\\orders;poison",
        DirectFormatName(TCP, "192.0.2.10", "orders", True, S.SUBQUEUE, "poison"),
    ),
    ("DIRECT=OS:mq01\\Orders", "DIRECT=OS:mq01\\Orders", DirectFormatName(OS, "mq01", "Orders")),
    ("DIRECT=OS:.\\private$\\q", "DIRECT=OS:.\\PRIVATE$\\q", DirectFormatName(OS, ".", "q", True)),
    (
        "DIRECT=TCP:::0001\\SYSTEM$;deadxact",
        "DIRECT=TCP:::1\\SYSTEM$;DEADXACT",
        DirectFormatName(TCP, "::1", "", suffix=S.DEADXACT),
    ),
    (
        "DIRECT=TCP:10.0.0.1\\system$;DEADLETTER",
        "DIRECT=TCP:10.0.0.1\\SYSTEM$;DEADLETTER",
        DirectFormatName(TCP, "10.0.0.1", "", suffix=S.DEADLETTER),
    ),
    (
        "DIRECT=OS:h\\SYSTEM$;Journal",
        "DIRECT=OS:h\\SYSTEM$;JOURNAL",
        DirectFormatName(OS, "h", "", suffix=S.JOURNAL),
    ),
    (
        "DIRECT=HTTP://web.example.com/msmq/private$/orders",
        "DIRECT=HTTP://web.example.com/MSMQ\\PRIVATE$\\orders",
        DirectFormatName(HTTP, "web.example.com", "orders", True),
    ),
    (
        "DIRECT=HTTPS://[::0001]:8443/MSMQ\\q",
        "DIRECT=HTTPS://[::1]:8443/MSMQ\\q",
        DirectFormatName(HTTPS, "[::1]:8443", "q"),
    ),
    (
        "DIRECT=IPX:00000001:00A0C9123456\\q",
        "DIRECT=IPX:00000001:00a0c9123456\\q",
        DirectFormatName(DirectProtocol.IPX, "00000001:00a0c9123456", "q"),
    ),
    # MS-MQQB 3.1.7.17 order queue forms (protocol.md §10)
    (
        "DIRECT=TCP:127.0.0.1\\PRIVATE$\\order_queue$",
        "DIRECT=TCP:127.0.0.1\\PRIVATE$\\order_queue$",
        order_queue_direct("127.0.0.1"),
    ),
    (f"PRIVATE={G}\\00000004", f"PRIVATE={g}\\00000004", order_queue_private(GU)),
    # MS-MQMQ 2.1.3 / 2.1.4 / 2.1.5 / 2.1.6
    (f"PRIVATE={G}\\A", f"PRIVATE={g}\\0000000a", PrivateFormatName(GU, 10)),
    (
        f"private={g}\\FFFFFFFF;journal",
        f"PRIVATE={g}\\ffffffff;JOURNAL",
        PrivateFormatName(GU, 0xFFFFFFFF, True),
    ),
    (f"PUBLIC={G}", f"PUBLIC={g}", PublicFormatName(GU)),
    (f"PUBLIC={G};JOURNAL", f"PUBLIC={g};JOURNAL", PublicFormatName(GU, True)),
    (f"DL={G}", f"DL={g}", DistributionListFormatName(GU)),
    (
        f"DL={G}@corp.example.com",
        f"DL={g}@corp.example.com",
        DistributionListFormatName(GU, "corp.example.com"),
    ),
    (f"MACHINE={G}", f"MACHINE={g}", MachineFormatName(GU)),
    (f"MACHINE={G};deadxact", f"MACHINE={g};DEADXACT", MachineFormatName(GU, S.DEADXACT)),
    (f"CONNECTOR={G};XACTONLY", f"CONNECTOR={g};XACTONLY", ConnectorFormatName(GU, True)),
    ("MULTICAST=224.1.2.3:8001", "MULTICAST=224.1.2.3:8001", MulticastFormatName("224.1.2.3", 8001)),
    (
        "MULTICAST=239.255.255.255:65535",
        "MULTICAST=239.255.255.255:65535",
        MulticastFormatName("239.255.255.255", 65535),
    ),
    # MS-MQMQ 2.1.7 example shape: direct, public, DL
    (
        f"DIRECT=TCP:10.0.0.1\\q,PUBLIC={G},DL={G}",
        f"DIRECT=TCP:10.0.0.1\\q,PUBLIC={g},DL={g}",
        MultipleElementFormatName(
            (DirectFormatName(TCP, "10.0.0.1", "q"), PublicFormatName(GU), DistributionListFormatName(GU))
        ),
    ),
]


@pytest.mark.parametrize(("text", "canonical", "expected"), EXAMPLES, ids=[e[0][:50] for e in EXAMPLES])
def test_parse_examples(text: str, canonical: str, expected: FormatName) -> None:
    parsed = parse_format_name(text)
    assert parsed == expected
    assert str(parsed) == canonical
    assert str(parse_format_name(canonical)) == canonical
    assert parse_format_name(canonical) == parsed


# (input, fragment of the message, position)
ERRORS = [
    ("", "empty format name", 0),
    ("FOO=1", "unknown format name type 'FOO'", 0),
    ("orders", "expected '<TYPE>='", 0),
    (".\\private$\\q", "a path name?", 0),
    ("DIRECT=SMTP:a\\q", "unknown direct protocol 'SMTP'", 7),
    ("DIRECT=TCP", "expected ':'", 10),
    ("DIRECT=TCP:mq01\\q", "TCP address 'mq01' is not an IPv4 or IPv6", 11),
    ("DIRECT=TCP:fe80::1%eth0\\q", "is not an IPv4 or IPv6", 11),
    ("DIRECT=TCP:1.2.3.4", "expected '\\' between address and queue name", 18),
    ("DIRECT=TCP:1.2.3.4\\", "empty queue name", 19),
    ("DIRECT=TCP:1.2.3.4\\private$\\", "empty queue name", 28),
    ("DIRECT=TCP:1.2.3.4\\private$", "missing queue name after private$", 27),
    ("DIRECT=TCP:1.2.3.4\\a+b", "character '+' not allowed in queue name", 20),
    ("DIRECT=TCP:1.2.3.4\\a b", "character ' ' not allowed in queue name", 20),
    ("DIRECT=TCP:1.2.3.4\\" + "q" * 125, "queue name longer than 124", 19),
    ("DIRECT=TCP:1.2.3.4\\q;" + "s" * 33, "subqueue name longer than 32", 21),
    ("DIRECT=TCP:1.2.3.4\\q;", "empty subqueue name", 21),
    ("DIRECT=TCP:1.2.3.4\\q;deadletter", "suffix ;DEADLETTER not allowed after a queue name", 21),
    ("DIRECT=TCP:1.2.3.4\\q;XACTONLY", "suffix ;XACTONLY not allowed", 21),
    ("DIRECT=TCP:1.2.3.4\\SYSTEM$", "after SYSTEM$", 26),
    ("DIRECT=TCP:1.2.3.4\\SYSTEM$;FOO", "unknown system queue 'FOO'", 27),
    ("DIRECT=OS:\\q", "empty computer name", 10),
    ("DIRECT=HTTP:host/msmq\\q", "expected '//host[:port]/MSMQ'", 12),
    ("DIRECT=HTTP://host", "expected '/MSMQ' after the HTTP host", 18),
    ("DIRECT=HTTP://host/web\\q", "expected '/MSMQ\\'", 18),
    ("DIRECT=HTTP://host:99999/msmq\\q", "HTTP port '99999'", 19),
    ("DIRECT=HTTP://[zz]/msmq\\q", "bad bracketed IPv6 host", 14),
    (f"PUBLIC={{{G}}}", "write it without braces", 7),
    ("PUBLIC=1234", "queue GUID '1234' is not a GUID", 7),
    (f"PUBLIC={G};DEADLETTER", "suffix 'DEADLETTER' not allowed here (allowed: ;JOURNAL)", 44),
    (f"PRIVATE={G}", "expected '\\<hex queue number>'", 44),
    (f"PRIVATE={G}\\123456789", "is not 1 to 8 hex digits", 45),
    (f"PRIVATE={G}\\xyz", "private queue number 'xyz'", 45),
    (f"MACHINE={G};XACTONLY", "suffix 'XACTONLY' not allowed here", 45),
    (f"CONNECTOR={G};JOURNAL", "allowed: ;XACTONLY", 47),
    (f"DL={G}@", "empty domain name", 40),
    ("MULTICAST=10.0.0.1:80", "outside 224.0.0.0-239.255.255.255", 10),
    ("MULTICAST=224.1.2.3", "expected ':port'", 19),
    ("MULTICAST=224.01.2.3:80", "not a dotted IPv4 address", 10),
    ("MULTICAST=224.1.2.3:65536", "multicast port '65536'", 20),
    ("DIRECT=OS:a\\b,,PUBLIC=x", "empty element", 14),
    ("DIRECT=OS:a\\b,", "empty element", 14),
    (f"DIRECT=OS:a\\b,MACHINE={G};JOURNAL", "a MACHINE= name cannot be an element", 14),
    ("DIRECT=OS:a\\b,DIRECT=OS:a\\b;JOURNAL", "journal or dead-letter queue cannot be an element", 14),
    ("dırect=OS:a\\b", "unknown format name type", 0),  # only ASCII case folding for keywords
]


@pytest.mark.parametrize(("text", "fragment", "pos"), ERRORS, ids=[e[0][:40] for e in ERRORS])
def test_errors_name_the_token_and_position(text: str, fragment: str, pos: int) -> None:
    with pytest.raises(MQError) as info:
        parse_format_name(text)
    assert info.value.hresult is HResult.MQ_ERROR_ILLEGAL_FORMATNAME
    assert fragment in info.value.message
    assert f"at position {pos} " in info.value.message


def test_non_string_input_is_an_illegal_format_name() -> None:
    with pytest.raises(MQError) as info:
        parse_format_name(b"DIRECT=OS:a\\b")  # type: ignore[arg-type]
    assert info.value.hresult is HResult.MQ_ERROR_ILLEGAL_FORMATNAME


def test_case_insensitive_equality_and_hash() -> None:
    a = parse_format_name("DIRECT=OS:MQ01\\PRIVATE$\\Orders")
    b = parse_format_name("direct=os:mq01\\private$\\ORDERS")
    assert a == b and hash(a) == hash(b) and len({a, b}) == 1
    assert str(a) == "DIRECT=OS:MQ01\\PRIVATE$\\Orders"  # the spelling is kept
    assert a != parse_format_name("DIRECT=OS:mq01\\orders")  # public vs private
    assert a != parse_format_name("DIRECT=OS:mq01\\PRIVATE$\\Orders;JOURNAL")
    assert PublicFormatName(GU) != DistributionListFormatName(GU)
    assert PrivateFormatName(GU, 1) == parse_format_name(f"PRIVATE={G}\\1")
    assert a != "DIRECT=OS:MQ01\\PRIVATE$\\Orders"  # no comparison with plain strings


def test_multiple_element_unique_elements() -> None:
    m = parse_format_name(f"DIRECT=OS:a\\Q,PUBLIC={G},direct=os:A\\q")
    assert isinstance(m, MultipleElementFormatName)
    assert len(m.elements) == 3
    assert m.unique_elements() == (DirectFormatName(OS, "a", "Q"), PublicFormatName(GU))
    assert m.queue_format_type is QueueFormatType.UNKNOWN


def test_kinds_and_suffix_helpers() -> None:
    xact_dl = parse_format_name(f"MACHINE={G};DEADXACT")
    assert xact_dl.is_transactional_dead_letter and xact_dl.is_read_only and xact_dl.is_system
    assert not xact_dl.is_dead_letter
    dl = parse_format_name("DIRECT=TCP:10.0.0.1\\SYSTEM$;DEADLETTER")
    assert isinstance(dl, DirectFormatName)
    assert dl.is_dead_letter and dl.is_machine_queue and dl.queue_path == "system$;DEADLETTER"
    assert dl.suffix_type.system_flag == 0x80
    poison = parse_format_name("DIRECT=TCP:10.0.0.1\\private$\\orders;Poison")
    assert isinstance(poison, DirectFormatName)
    assert poison.is_poison and not poison.is_read_only
    assert poison.queue_format_type is QueueFormatType.SUBQUEUE
    assert poison.suffix_type is S.SUBQUEUE and poison.suffix_type.system_flag == 0
    assert poison.queue_path == "private$\\orders"
    assert str(poison.base()) == "DIRECT=TCP:10.0.0.1\\PRIVATE$\\orders"
    assert str(poison.journal()) == "DIRECT=TCP:10.0.0.1\\PRIVATE$\\orders;JOURNAL"
    assert poison.journal().is_journal
    assert parse_format_name("DIRECT=OS:h\\orders").queue_path == "orders"  # type: ignore[union-attr]
    assert PrivateFormatName(GU, 7).journal() == parse_format_name(f"PRIVATE={G}\\7;JOURNAL")
    assert PrivateFormatName(GU, 7, True).base() == PrivateFormatName(GU, 7)


def test_order_queue_detection() -> None:
    assert parse_format_name("DIRECT=TCP:10.0.0.1\\private$\\ORDER_QUEUE$").is_order_queue
    assert parse_format_name(f"PRIVATE={G}\\4").is_order_queue
    assert order_queue_private(GU).queue_number == ORDER_QUEUE_PRIVATE_ID
    assert order_queue_private(GU).is_system
    assert not parse_format_name("DIRECT=TCP:10.0.0.1\\order_queue$").is_order_queue  # public name
    assert not parse_format_name(f"PRIVATE={G}\\5").is_order_queue


def test_is_local_to() -> None:
    other = UUID(int=1)
    me = LocalIdentity(GU, addresses=frozenset({"127.0.0.2", "::1"}), names=frozenset({"MQ01"}))
    assert parse_format_name("DIRECT=TCP:127.0.0.2\\q").is_local_to(me)
    assert parse_format_name("DIRECT=TCP:0:0::1\\q").is_local_to(me)
    assert not parse_format_name("DIRECT=TCP:127.0.0.1\\q").is_local_to(me)
    assert parse_format_name("DIRECT=OS:mq01\\q").is_local_to(me)
    assert parse_format_name("DIRECT=OS:.\\q").is_local_to(me)
    assert not parse_format_name("DIRECT=OS:mq02\\q").is_local_to(me)
    assert parse_format_name("DIRECT=HTTP://mq01:80/msmq\\q").is_local_to(me)
    assert parse_format_name(f"PRIVATE={G}\\1").is_local_to(me)
    assert not PrivateFormatName(other, 1).is_local_to(me)
    assert MachineFormatName(GU, S.JOURNAL).is_local_to(me)
    assert not PublicFormatName(GU).is_local_to(me)  # needs a directory
    assert not parse_format_name(f"DIRECT=OS:mq01\\a,PRIVATE={G}\\1").is_local_to(me)


def test_http_host_and_port() -> None:
    h = parse_format_name("DIRECT=HTTP://web/msmq\\q")
    hs = parse_format_name("DIRECT=HTTPS://[2001:db8::1]:8443/msmq\\q")
    t = parse_format_name("DIRECT=TCP:10.0.0.1\\q")
    assert (
        isinstance(h, DirectFormatName)
        and isinstance(hs, DirectFormatName)
        and isinstance(t, DirectFormatName)
    )
    assert (h.host, h.port) == ("web", 80)
    assert (hs.host, hs.port) == ("2001:db8::1", 8443)
    assert (t.host, t.port) == ("10.0.0.1", None)
    assert parse_format_name("DIRECT=HTTPS://web/msmq\\q").port == 443  # type: ignore[union-attr]


def test_direct_id_round_trip() -> None:
    d = parse_format_name("DIRECT=TCP:10.0.0.1\\private$\\orders")
    assert isinstance(d, DirectFormatName)
    assert d.direct_id == "TCP:10.0.0.1\\PRIVATE$\\orders"
    assert parse_direct_id(d.direct_id) == d
    for bad in ("OS:a\\b,DIRECT=OS:a\\c", "", "PUBLIC=x"):
        with pytest.raises(MQError) as info:
            parse_direct_id(bad)
        assert info.value.hresult is HResult.MQ_ERROR_ILLEGAL_FORMATNAME


def test_constructors_validate_and_normalize() -> None:
    d = DirectFormatName(TCP, "::0001", "orders", True)
    assert d.address == "::1" and str(d) == "DIRECT=TCP:::1\\PRIVATE$\\orders"
    assert DirectFormatName("TCP", "10.0.0.1", "q", suffix=1).suffix is S.JOURNAL  # type: ignore[arg-type]
    bad_values = [
        lambda: DirectFormatName(TCP, "10.0.0.1", "a;b"),
        lambda: DirectFormatName(TCP, "10.0.0.1", "a,b"),
        lambda: DirectFormatName(TCP, "host", "q"),
        lambda: DirectFormatName(TCP, "10.0.0.1", "q", suffix=S.DEADLETTER),
        lambda: DirectFormatName(TCP, "10.0.0.1", "q", suffix=S.SUBQUEUE),
        lambda: DirectFormatName(TCP, "10.0.0.1", "q", subqueue="x"),
        lambda: DirectFormatName(TCP, "10.0.0.1", ""),
        lambda: DirectFormatName("SMTP", "a", "q"),  # type: ignore[arg-type]
        lambda: PrivateFormatName(GU, 1 << 32),
        lambda: PrivateFormatName(GU, -1),
        lambda: PrivateFormatName(G, 1),  # type: ignore[arg-type]
        lambda: MachineFormatName(GU, S.SUBQUEUE),
        lambda: MulticastFormatName("10.0.0.1", 80),
        lambda: MulticastFormatName("224.0.0.1", "80"),  # type: ignore[arg-type]
        lambda: DistributionListFormatName(GU, "a,b"),
        lambda: MultipleElementFormatName((PublicFormatName(GU),)),
        lambda: MultipleElementFormatName((PublicFormatName(GU), MachineFormatName(GU, S.JOURNAL))),
        lambda: QueuePathName("a\\b", "q"),
    ]
    for make in bad_values:
        with pytest.raises(MQError) as info:
            make()
        assert info.value.hresult is HResult.MQ_ERROR_ILLEGAL_FORMATNAME


@pytest.mark.parametrize(
    ("text", "canonical", "queue_path"),
    [
        (".\\private$\\orders", ".\\private$\\orders", "private$\\orders"),
        ("MQ01\\PRIVATE$\\Orders;Poison", "MQ01\\private$\\Orders;Poison", "private$\\Orders;Poison"),
        ("mq01\\orders", "mq01\\orders", "orders"),
        ("mq01\\orders;journal", "mq01\\orders;JOURNAL", "orders;JOURNAL"),
        ("mq01\\SYSTEM$;deadxact", "mq01\\system$;DEADXACT", "system$;DEADXACT"),
    ],
)
def test_path_names(text: str, canonical: str, queue_path: str) -> None:
    p = parse_path_name(text)
    assert str(p) == canonical
    assert p.queue_path == queue_path
    assert parse_path_name(canonical) == p
    assert p.key == canonical.casefold()


def test_path_name_to_direct_and_back() -> None:
    p = parse_path_name(".\\private$\\orders")
    d = p.to_direct()
    assert str(d) == "DIRECT=OS:.\\PRIVATE$\\orders"
    assert str(p.to_direct(TCP, "10.0.0.1")) == "DIRECT=TCP:10.0.0.1\\PRIVATE$\\orders"
    assert d.path_name == p


@pytest.mark.parametrize(
    "text", ["", "noslash", "\\private$\\q", "a\\", "a\\private$\\", "a\\system$", "a\\q;deadxact"]
)
def test_path_name_errors(text: str) -> None:
    with pytest.raises(MQError) as info:
        parse_path_name(text)
    assert info.value.hresult is HResult.MQ_ERROR_ILLEGAL_FORMATNAME


# --------------------------------------------------------------------------------------------------
# Properties
# --------------------------------------------------------------------------------------------------

_name_chars = st.characters(codec="utf-8", exclude_characters='\\;+,"', min_codepoint=0x21).filter(
    lambda c: ord(c) < 0x80 or (c.isprintable() and not c.isspace())
)
queue_names = st.text(_name_chars, min_size=1, max_size=124).filter(
    lambda s: (
        s.casefold() not in ("private$", "system$") and not s.lower().startswith(("private$\\", "system$"))
    )
)
subqueue_names = st.text(_name_chars, min_size=1, max_size=32).filter(
    lambda s: s.lower() not in ("journal", "deadletter", "deadxact", "xactonly")
)
hostnames = st.from_regex(r"[A-Za-z0-9][A-Za-z0-9.\-]{0,40}", fullmatch=True)
uuids = st.uuids()


@st.composite
def direct_names(draw: st.DrawFn) -> DirectFormatName:
    protocol = draw(st.sampled_from([TCP, OS, HTTP, HTTPS]))
    if protocol is TCP:
        address = str(draw(st.ip_addresses()))
    elif protocol is OS:
        address = draw(hostnames)
    else:
        port = draw(st.none() | st.integers(0, 65535))
        address = draw(hostnames) + ("" if port is None else f":{port}")
    if draw(st.integers(0, 9)) == 0:
        return DirectFormatName(
            protocol, address, "", suffix=draw(st.sampled_from([S.JOURNAL, S.DEADLETTER, S.DEADXACT]))
        )
    kind = draw(st.sampled_from(["none", "journal", "sub"]))
    return DirectFormatName(
        protocol,
        address,
        draw(queue_names),
        draw(st.booleans()),
        {"none": S.NONE, "journal": S.JOURNAL, "sub": S.SUBQUEUE}[kind],
        draw(subqueue_names) if kind == "sub" else "",
    )


single_names = st.one_of(
    direct_names(),
    st.builds(PrivateFormatName, uuids, st.integers(0, 0xFFFFFFFF), st.booleans()),
    st.builds(PublicFormatName, uuids, st.booleans()),
    st.builds(MachineFormatName, uuids, st.sampled_from([S.NONE, S.JOURNAL, S.DEADLETTER, S.DEADXACT])),
    st.builds(ConnectorFormatName, uuids, st.booleans()),
    st.builds(DistributionListFormatName, uuids, st.just("") | hostnames),
    st.builds(
        MulticastFormatName, st.ip_addresses(v=4, network="224.0.0.0/4").map(str), st.integers(0, 65535)
    ),
)
sendable = single_names.filter(lambda n: not isinstance(n, MachineFormatName) and not n.is_read_only)
any_names = st.one_of(
    single_names,
    st.lists(sendable, min_size=2, max_size=4).map(lambda xs: MultipleElementFormatName(tuple(xs))),
)


@given(any_names)
def test_round_trip_from_values(value: FormatName) -> None:
    text = str(value)
    parsed = parse_format_name(text)
    assert parsed == value
    assert str(parsed) == text
    assert parsed.__dict__ == value.__dict__  # fields exactly, not just case-insensitively
    assert parse_format_name(text.upper()) == value  # case-insensitive everywhere


_TOKENS = [
    "DIRECT=",
    "direct=",
    "TCP:",
    "OS:",
    "HTTP://",
    "HTTPS:",
    "IPX:",
    "PUBLIC=",
    "PRIVATE=",
    "MACHINE=",
    "DL=",
    "CONNECTOR=",
    "MULTICAST=",
    "\\",
    "/",
    "PRIVATE$",
    "SYSTEM$",
    ";",
    "JOURNAL",
    "DEADXACT",
    "XACTONLY",
    ",",
    "@",
    ":",
    "[",
    "]",
    "%",
    "=",
    "1.2.3.4",
    "::1",
    "224.0.0.1",
    "/MSMQ",
    "a",
    "Q",
    "ß",
    "\x00",
    " ",
    "0",
    "65536",
    G,
    "{" + G + "}",
    "0000000A",
]


@settings(max_examples=400)
@given(st.text() | st.lists(st.sampled_from(_TOKENS), max_size=12).map("".join))
def test_arbitrary_text_gives_a_value_or_illegal_formatname(text: str) -> None:
    try:
        value = parse_format_name(text)
    except MQError as exc:
        assert exc.hresult is HResult.MQ_ERROR_ILLEGAL_FORMATNAME
        return
    canonical = str(value)
    assert parse_format_name(canonical) == value
    assert str(parse_format_name(canonical)) == canonical


@settings(max_examples=200)
@given(st.text() | st.lists(st.sampled_from(_TOKENS), max_size=8).map("".join))
def test_arbitrary_path_text_gives_a_value_or_illegal_formatname(text: str) -> None:
    try:
        value = parse_path_name(text)
    except MQError as exc:
        assert exc.hresult is HResult.MQ_ERROR_ILLEGAL_FORMATNAME
        return
    assert parse_path_name(str(value)) == value
