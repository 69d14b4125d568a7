"""Configuration: precedence, types and ranges, errors naming the key, render."""

from __future__ import annotations

import tomllib
import uuid
from pathlib import Path

import pytest

from openmsmq.config import (
    Config,
    Route,
    config_keys,
    load_config,
    parse_duration,
    parse_size,
    render_config,
    with_overrides,
)
from openmsmq.errors import ConfigError
from openmsmq.transfer.engine import TransferConfig, routes_from

ROOT = Path(__file__).resolve().parents[1]


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "qm.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_defaults() -> None:
    loaded = load_config(None, {}, {})
    c = loaded.config
    assert c == Config()
    assert c.qm.data_dir == Path("./data")
    assert (c.mqqb.listen_address, c.mqqb.port) == ("127.0.0.1", 1801)
    assert c.mqqb.allowed_peers == ("127.0.0.0/8", "::1/128")
    assert c.mqqb.peer_allowed("127.0.0.9") and c.mqqb.peer_allowed("::1")
    assert not c.mqqb.peer_allowed("10.0.0.1") and not c.mqqb.peer_allowed("garbage")
    # MS-MQQB 3.1.1.3 / 3.1.2 defaults (protocol.md §2, §8)
    assert c.protocol.order_ack_timeout == 0.5
    assert c.protocol.maximum_order_ack_delay == 10.0
    assert c.protocol.ack_wait_timeout == 20.0
    assert c.protocol.window_size == 1024
    assert c.protocol.resend_timer_table == (30.0,) * 3 + (300.0,) * 3 + (1800.0,) * 3 + (21600.0,)
    assert c.protocol.session_cleanup_interval == 300.0
    assert c.store.synchronous == "FULL"
    assert c.store.max_message_size == 4 * 1024 * 1024
    assert c.store.default_queue_quota is None
    assert c.remote.pending_request_cleanup == 300.0  # MS-MQRR 3.1.2, remote-read.md §6
    assert c.remote.port not in (c.mqqb.port, c.metrics.port)
    assert (c.log.level, c.log.format) == ("info", "kv")
    assert set(loaded.sources.values()) == {"default"}
    assert set(loaded.sources) == {k.dotted for k in config_keys()}


def test_precedence_default_file_env_flag(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """
[mqqb]
port = 1900
connect_backoff_max = "2m"
[log]
level = "warning"
format = "json"
[store]
max_message_size = "1MiB"
""",
    )
    env = {"OPENMSMQ_MQQB_PORT": "1901", "OPENMSMQ_LOG_LEVEL": "ERROR", "PATH": "/usr/bin"}
    flags = {"mqqb.port": 1902, "metrics.port": None}
    loaded = load_config(path, env, flags)
    c = loaded.config
    assert c.mqqb.port == 1902 and loaded.sources["mqqb.port"] == "flag:--mqqb-port"
    assert c.log.level == "error" and loaded.sources["log.level"] == "env:OPENMSMQ_LOG_LEVEL"
    assert c.log.format == "json" and loaded.sources["log.format"] == f"file:{path}"
    assert c.mqqb.connect_backoff_max == 120.0
    assert c.store.max_message_size == 1 << 20
    assert c.metrics.port == 9181 and loaded.sources["metrics.port"] == "default"  # None flag skipped
    assert loaded.path == path
    # env alone beats the file, the file alone beats the default
    assert load_config(path, env, {}).config.mqqb.port == 1901
    assert load_config(path, {}, {}).config.mqqb.port == 1900


def test_env_types_and_non_config_variables() -> None:
    env = {
        "OPENMSMQ_REMOTE_ENABLED": "off",
        "OPENMSMQ_PROTOCOL_ORDER_ACK_TIMEOUT": "250ms",
        "OPENMSMQ_PROTOCOL_WINDOW_SIZE": " 32 ",
        "OPENMSMQ_MQQB_ALLOWED_PEERS": "10.0.0.0/8, ::1/128",
        "OPENMSMQ_MQQB_ROUTES": "10.0.0.5=10.0.0.1:1801, mq2=[::1]:1802",
        "OPENMSMQ_STORE_DEFAULT_QUEUE_QUOTA": "unlimited",
        "OPENMSMQ_STORE_QM_QUOTA": "2GiB",
        "OPENMSMQ_REMOTE_TOKENS_FILE": "/etc/openmsmq/tokens",
        "OPENMSMQ_CONFIG": "/etc/openmsmq/qm.toml",  # not a section: not configuration
        "OPENMSMQ_CRASH_ROUNDS": "30",
    }
    c = load_config(None, env, {}).config
    assert c.remote.enabled is False
    assert c.protocol.order_ack_timeout == 0.25
    assert c.protocol.window_size == 32
    assert c.mqqb.allowed_peers == ("10.0.0.0/8", "::1/128")
    assert c.mqqb.routes == (Route("10.0.0.5", "10.0.0.1:1801"), Route("mq2", "[::1]:1802"))
    assert c.mqqb.next_hop("10.0.0.5") == "10.0.0.1:1801"
    assert c.mqqb.next_hop("MQ2") == "[::1]:1802"
    assert c.mqqb.next_hop("10.0.0.6") is None
    assert c.store.default_queue_quota is None and c.store.qm_quota == 2 << 30
    assert c.remote.tokens_file == Path("/etc/openmsmq/tokens")


def test_a_route_may_name_a_qm_guid_for_private_format_names() -> None:
    guid = "5B1F7A52-1111-4C1E-9A6B-3D2F00000001"
    env = {"OPENMSMQ_MQQB_ROUTES": f"{{{guid}}}=10.0.0.1:1801"}
    c = load_config(None, env, {}).config
    assert c.mqqb.routes == (Route(f"{{{guid}}}", "10.0.0.1:1801"),)
    transfer = TransferConfig(routes=routes_from((r.destination, r.next_hop) for r in c.mqqb.routes))
    assert transfer.next_hop_for_qm(uuid.UUID(guid)) == "10.0.0.1:1801"
    assert transfer.next_hop_for_qm(uuid.UUID(int=1)) is None


def test_file_tables_and_types(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """
[qm]
name = "mq01"
data_dir = "/var/lib/openmsmq"
[mqqb]
listen_address = "0.0.0.0"
advertised_address = "192.0.2.10"
allowed_peers = ["192.0.2.0/24"]
[mqqb.routes]
"198.51.100.7" = "192.0.2.1"
[protocol]
ack_wait_timeout = 30
send_insecure_nacks = true
""",
    )
    c = load_config(path, {}, {}).config
    assert c.qm.name == "mq01" and c.qm.data_dir == Path("/var/lib/openmsmq")
    assert c.mqqb.listen_address == "0.0.0.0" and c.mqqb.advertised_address == "192.0.2.10"
    assert c.mqqb.routes == (Route("198.51.100.7", "192.0.2.1"),)
    assert c.protocol.ack_wait_timeout == 30.0 and c.protocol.send_insecure_nacks is True


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        (0, 0.0),
        (5, 5.0),
        (0.25, 0.25),
        ("500ms", 0.5),
        ("5s", 5.0),
        ("2m", 120.0),
        ("1h", 3600.0),
        (" 1.5 ", 1.5),
        ("1.5s", 1.5),
        (".5", 0.5),
    ],
)
def test_durations(text: object, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize(
    "bad", ["", "5 parsecs", "-1", -1, True, "1e3", float("nan"), float("inf"), None, [1]]
)
def test_bad_durations(bad: object) -> None:
    with pytest.raises(ConfigError) as info:
        parse_duration(bad, "protocol.order_ack_timeout")
    assert info.value.key == "protocol.order_ack_timeout"


def test_sizes() -> None:
    assert parse_size(100) == 100
    assert (
        parse_size("4MiB") == 4 << 20 and parse_size("512KiB") == 512 << 10 and parse_size("1GiB") == 1 << 30
    )
    assert parse_size("7B") == 7
    for bad in ("4MB", "x", -1, 1.5, True):
        with pytest.raises(ConfigError):
            parse_size(bad, "store.max_message_size")


# Each bad input must raise ConfigError naming this key, with this text in the message.
BAD_VALUES: list[tuple[str, object, str, str]] = [
    ("mqqb.port", 70000, "mqqb.port", "<= 65535"),
    ("mqqb.port", -1, "mqqb.port", ">= 0"),
    ("mqqb.port", "http", "mqqb.port", "expected an integer"),
    ("mqqb.port", True, "mqqb.port", "expected an integer"),
    ("mqqb.listen_address", "localhost", "mqqb.listen_address", "expected an IP address"),
    ("mqqb.allowed_peers", "10.0.0.1/8", "mqqb.allowed_peers", "bad network"),
    ("mqqb.allowed_peers", "nonsense", "mqqb.allowed_peers", "bad network"),
    ("mqqb.routes", "10.0.0.5", "mqqb.routes", "destination=next_hop"),
    ("mqqb.routes", "10.0.0.5=a:99999", "mqqb.routes", "port must be 1..65535"),
    ("mqqb.routes", "a=b,A=c", "mqqb.routes", "duplicate route"),
    ("mqqb.routes", "{5b1f7a52}=10.0.0.1", "mqqb.routes", "expected a QM GUID"),
    ("mqqb.connect_backoff_min", "0s", "mqqb.connect_backoff_min", ">= 0.001"),
    ("protocol.ack_wait_timeout", "5s", "protocol.ack_wait_timeout", ">= 20"),
    ("protocol.ack_wait_timeout", "3m", "protocol.ack_wait_timeout", "<= 120"),
    ("protocol.window_size", 0, "protocol.window_size", ">= 1"),
    ("protocol.send_insecure_nacks", "maybe", "protocol.send_insecure_nacks", "expected a boolean"),
    ("protocol.order_ack_timeout", "soon", "protocol.order_ack_timeout", "expected a duration"),
    ("store.synchronous", "fast", "store.synchronous", "expected one of FULL, EXTRA, NORMAL, OFF"),
    ("store.max_message_size", "1000B", "store.max_message_size", ">= 1024"),
    ("store.max_message_size", "2GiB", "store.max_message_size", "<= 4194304"),
    ("store.default_queue_quota", 0, "store.default_queue_quota", ">= 1"),
    ("log.format", "xml", "log.format", "expected one of kv, json"),
    ("qm.name", "bad name", "qm.name", "not an IP address or host name"),
    ("qm.data_dir", "", "qm.data_dir", "expected a path"),
    ("qm.nmae", "x", "qm.nmae", "unknown key"),
    ("nosuch.key", 1, "nosuch.key", "unknown key"),
    ("port", 1, "port", "unknown key"),
]


@pytest.mark.parametrize(
    ("key", "value", "named", "fragment"), BAD_VALUES, ids=[f"{b[0]}={b[1]!r}" for b in BAD_VALUES]
)
def test_bad_flag_values_name_the_key(key: str, value: object, named: str, fragment: str) -> None:
    with pytest.raises(ConfigError) as info:
        load_config(None, {}, {key: value})
    assert info.value.key == named
    assert fragment in str(info.value)


def test_bad_env_value_names_the_key_and_variable() -> None:
    with pytest.raises(ConfigError) as info:
        load_config(None, {"OPENMSMQ_MQQB_PORT": "18o1"}, {})
    assert info.value.key == "mqqb.port"
    with pytest.raises(ConfigError) as info:
        load_config(None, {"OPENMSMQ_MQQB_PROT": "1801"}, {})
    assert info.value.key == "mqqb.prot" and "env:OPENMSMQ_MQQB_PROT" in str(info.value)


@pytest.mark.parametrize(
    ("text", "key", "fragment"),
    [
        ("[mqqb]\nport = '1801'\n", "mqqb.port", "expected an integer"),  # TOML strings are not ints
        ("[mqqb]\nport = 1801.0\n", "mqqb.port", "expected an integer"),
        ("[mqqb]\nallowed_peers = '127.0.0.0/8'\n", "mqqb.allowed_peers", "expected a list"),
        ("[mqqb]\nroutes = 5\n", "mqqb.routes", "expected a table"),
        ("[mqqb.routes]\n'a' = 5\n", "mqqb.routes", "both must be strings"),
        ("[log]\nlevel = 3\n", "log.level", "expected a string"),
        ("[remote]\nenabled = 'yes'\n", "remote.enabled", "expected a boolean"),
        ("[queues]\nx = 1\n", "queues", "unknown section"),
        ("port = 1801\n", "port", "unknown section"),
        ("[mqqb]\nlisten = '1.2.3.4'\n", "mqqb.listen", "unknown key"),
        ("[mqqb\nport = 1\n", "file", "not valid TOML"),
    ],
)
def test_bad_file_values_name_the_key(tmp_path: Path, text: str, key: str, fragment: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as info:
        load_config(path, {}, {})
    assert info.value.key == key
    assert fragment in str(info.value)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        load_config(tmp_path / "absent.toml", {}, {})
    assert info.value.key == "file" and "absent.toml" in str(info.value)


@pytest.mark.parametrize(
    ("flags", "key"),
    [
        ({"mqqb.connect_backoff_min": "2m", "mqqb.connect_backoff_max": "1m"}, "mqqb.connect_backoff_min"),
        ({"protocol.order_ack_timeout": "20s"}, "protocol.order_ack_timeout"),
        (
            {"protocol.recoverable_ack_timeout_min": 100, "protocol.recoverable_ack_timeout_max": 50},
            "protocol.recoverable_ack_timeout_min",
        ),
        ({"remote.tls_cert": "/c.pem"}, "remote.tls_key"),
        ({"remote.tls_key": "/k.pem"}, "remote.tls_cert"),
        ({"remote.listen_address": "0.0.0.0"}, "remote.tokens_file"),
        ({"mqqb.listen_address": "::"}, "mqqb.advertised_address"),
        ({"remote.port": 1801}, "remote.port"),
        ({"metrics.port": 2105}, "metrics.port"),
    ],
)
def test_cross_key_rules(flags: dict[str, object], key: str) -> None:
    with pytest.raises(ConfigError) as info:
        load_config(None, {}, flags)
    assert info.value.key == key


def test_cross_key_rules_allow_the_good_cases() -> None:
    ok = load_config(
        None,
        {},
        {
            "remote.listen_address": "0.0.0.0",
            "remote.tokens_file": "/t",
            "remote.tls_cert": "/c",
            "remote.tls_key": "/k",
            "metrics.port": 1801,
            "metrics.listen_address": "127.0.0.2",  # same port, other address
            "mqqb.port": 0,
            "remote.port": 0,  # 0 = any free port, never a clash
        },
    )
    assert ok.config.remote.tls_cert == Path("/c")
    assert load_config(None, {}, {"remote.enabled": False, "remote.listen_address": "0.0.0.0"}).config


def test_render_shows_sources_and_loads_back(tmp_path: Path) -> None:
    path = write(tmp_path, '[qm]\nname = "mq01"\n[mqqb.routes]\n"10.0.0.5" = "10.0.0.1"\n')
    loaded = load_config(
        path,
        {"OPENMSMQ_PROTOCOL_ORDER_ACK_TIMEOUT": "250ms", "OPENMSMQ_STORE_QM_QUOTA": "1GiB"},
        {"log.format": "json", "remote.tokens_file": "/etc/tokens"},
    )
    text = render_config(loaded)
    assert f'name = "mq01"  # file:{path}' in text
    assert "order_ack_timeout = 0.25  # env:OPENMSMQ_PROTOCOL_ORDER_ACK_TIMEOUT" in text
    assert 'format = "json"  # flag:--log-format' in text
    assert "port = 1801  # default" in text
    assert 'routes = { "10.0.0.5" = "10.0.0.1" }' in text
    assert 'default_queue_quota = "unlimited"  # default' in text
    data = tomllib.loads(text)
    assert set(data) == {"qm", "mqqb", "protocol", "store", "remote", "metrics", "console", "log", "ha"}
    again = load_config(write(tmp_path, text), {}, {})
    assert again.config == loaded.config


def test_with_overrides() -> None:
    c = with_overrides(Config(), mqqb={"port": "0"}, protocol={"order_ack_timeout": "100ms"})
    assert c.mqqb.port == 0 and c.protocol.order_ack_timeout == 0.1
    with pytest.raises(ConfigError) as info:
        with_overrides(Config(), mqqb={"port": 99999})
    assert info.value.key == "mqqb.port"
    with pytest.raises(ConfigError):
        with_overrides(Config(), nosuch={"x": 1})


def test_with_overrides_unknown_key_names_the_section_keys() -> None:
    # One conversion owns the unknown-key message for files, environment, flags and overrides.
    with pytest.raises(ConfigError) as info:
        with_overrides(Config(), qm={"nmae": "x"})
    assert info.value.key == "qm.nmae"
    assert "from with_overrides" in str(info.value) and "[qm] has: name, data_dir" in str(info.value)
    with pytest.raises(ConfigError) as info:
        with_overrides(Config(), nosuch={"x": 1})
    assert info.value.key == "nosuch" and "unknown section (from with_overrides)" in str(info.value)


def test_frozen() -> None:
    c = Config()
    with pytest.raises(AttributeError):
        c.mqqb.port = 1  # type: ignore[misc]


def test_docs_cover_every_key() -> None:
    doc = (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")
    for key in config_keys():
        assert f"`{key.dotted}`" in doc, key.dotted
        assert f"`{key.env_var}`" in doc, key.env_var


def test_docs_example_loads(tmp_path: Path) -> None:
    doc = (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")
    example = doc.split("```toml\n", 1)[1].split("```", 1)[0]
    c = load_config(write(tmp_path, example), {}, {}).config
    assert c.qm.name == "mq01" and c.mqqb.next_hop("198.51.100.7") == "192.0.2.1"
    assert c.remote.tls_key == Path("/etc/openmsmq/key.pem")


def test_protocol_keys_reach_the_transfer() -> None:
    from openmsmq.server.options import transfer_config

    default = transfer_config(load_config(None, {}, {}).config)
    assert default.send_insecure_nacks is False
    env = {"OPENMSMQ_PROTOCOL_SEND_INSECURE_NACKS": "true", "OPENMSMQ_PROTOCOL_WINDOW_SIZE": "512"}
    tc = transfer_config(load_config(None, env, {}).config)
    assert tc.send_insecure_nacks is True and tc.session.window_size == 512


def test_openmsmq_qm_is_the_command_lines_variable_not_a_key() -> None:
    # OPENMSMQ_QM is --qm of the command line; "qm" is also a section name.
    loaded = load_config(None, {"OPENMSMQ_QM": "/srv/qm"}, {})
    assert loaded.sources["qm.data_dir"] == "default"


def test_buffer_keys_reach_the_transfer() -> None:
    from openmsmq.server.options import transfer_config

    default = transfer_config(load_config(None, {}, {}).config)
    assert (default.queued_bytes, default.unstored_bytes) == (32 << 20, 64 << 20)
    env = {"OPENMSMQ_MQQB_SEND_BUFFER": "4MiB", "OPENMSMQ_MQQB_RECEIVE_BUFFER": "512KiB"}
    tc = transfer_config(load_config(None, env, {}).config)
    assert (tc.queued_bytes, tc.unstored_bytes) == (4 << 20, 512 << 10)
    assert default.max_in_flight == 200_000
    tc = transfer_config(load_config(None, {"OPENMSMQ_MQQB_MAX_IN_FLIGHT": "800000"}, {}).config)
    assert tc.max_in_flight == 800_000


def test_store_keys_reach_the_queue_manager(tmp_path: Path) -> None:
    # Before, serve opened its QM without the [store] keys: every one of them was ignored.
    from openmsmq.errors import MQError
    from openmsmq.qm import MessageRecord, QueueManager
    from openmsmq.server.options import store_options

    env = {
        "OPENMSMQ_STORE_SYNCHRONOUS": "EXTRA",
        "OPENMSMQ_STORE_GROUP_COMMIT_MAX_WAIT": "0",
        "OPENMSMQ_STORE_MAX_MESSAGE_SIZE": "64KiB",
        "OPENMSMQ_STORE_DEFAULT_QUEUE_QUOTA": "1MiB",
        "OPENMSMQ_STORE_QM_QUOTA": "1GiB",
        "OPENMSMQ_STORE_GROUP_COMMIT_MAX_BATCH": "7",
    }
    opts = store_options(load_config(None, env, {}).config)
    with QueueManager(tmp_path / "qm", store_options=opts) as qm:
        assert qm.store.write(lambda ctx: ctx.conn.execute("PRAGMA synchronous").fetchone()[0]) == 3  # EXTRA
        assert qm.store.max_commit_wait == 0
        assert qm.store.max_batch_ops == 7
        assert qm.store.qm_quota == 1 << 30
        rec = qm.create_queue("private$\\q")
        assert rec.quota_kb == 1024  # the default quota
        assert qm.create_queue("private$\\big", quota_kb=5000).quota_kb == 5000
        qm.send("private$\\q", MessageRecord(body=bytes(64 * 1024)))
        with pytest.raises(MQError) as err:
            qm.send("private$\\q", MessageRecord(body=bytes(64 * 1024 + 1)))
        assert "store.max_message_size" in str(err.value)
    default = store_options(load_config(None, {}, {}).config)
    assert (default.synchronous, default.max_commit_wait) == ("FULL", 0.002)
    assert default.max_message_bytes == 4 << 20
    with pytest.raises(ConfigError):
        load_config(None, {"OPENMSMQ_STORE_MAX_MESSAGE_SIZE": "5MiB"}, {})  # MSMQ's limit is 4 MiB


def test_the_queue_manager_quota_counts_every_queue(tmp_path: Path) -> None:
    from openmsmq.errors import HResult, MQError
    from openmsmq.qm import MessageRecord, QueueManager, StoreOptions

    with QueueManager(tmp_path / "qm", store_options=StoreOptions(qm_quota_bytes=10_000)) as qm:
        qm.create_queue("private$\\a")
        qm.create_queue("private$\\b", transactional=True)
        qm.send("private$\\a", MessageRecord(body=bytes(6_000)))
        with pytest.raises(MQError) as err, qm.begin() as tx:  # 6,000 + 5,000 > 10,000
            qm.send("private$\\b", MessageRecord(body=bytes(5_000)), tx)
        assert err.value.hresult == HResult.MQ_ERROR_INSUFFICIENT_RESOURCES
        assert "queue manager quota" in str(err.value)
        assert qm.get_queue("private$\\b").msg_count == 0  # nothing of it stored
        qm.receive("private$\\a")  # frees 6,000
        with qm.begin() as tx:
            qm.send("private$\\b", MessageRecord(body=bytes(5_000)), tx)
        assert qm.get_queue("private$\\b").msg_count == 1


def test_trust_keys_pins_and_tls_reach_the_transfer_and_the_node(tmp_path: Path) -> None:
    from openmsmq.server.options import transfer_config

    guid = "5b1f7a52-0000-4000-8000-000000000001"
    env = {
        "OPENMSMQ_MQQB_ALLOWED_PEERS": f"10.0.0.0/8,{{{guid.upper()}}}=192.0.2.7/32",
        "OPENMSMQ_MQQB_INTERMEDIATE_HOPS": "10.1.0.0/16,hop.example,{" + guid + "}",
        "OPENMSMQ_MQQB_ALLOW_RELAY": "yes",
        "OPENMSMQ_MQQB_INCOMING_SEQUENCE_MAX_IDLE": "30d",
        "OPENMSMQ_MQQB_MAX_INCOMING_SEQUENCES": "500",
        "OPENMSMQ_MQQB_SEQUENCE_CLOCK_SKEW": "2h",
    }
    c = load_config(None, env, {}).config
    assert c.mqqb.allowed_peers == ("10.0.0.0/8", f"{{{guid}}}=192.0.2.7/32")
    assert c.mqqb.peer_allowed("192.0.2.7") and c.mqqb.peer_allowed("10.2.3.4")
    assert not c.mqqb.peer_allowed("192.0.2.8")
    trust = transfer_config(c).trust
    assert trust.pinned == ((uuid.UUID(guid), ("192.0.2.7/32",)),)
    assert trust.intermediate_hops == ("10.1.0.0/16", "hop.example", f"{{{guid}}}")
    assert trust.allow_relay and trust.max_incoming_sequences == 500
    assert trust.incoming_sequence_max_idle == 30 * 86400 and trust.sequence_clock_skew == 7200
    assert transfer_config(load_config(None, {}, {}).config).trust.allow_relay is False
    for bad in ("{not-a-guid}=10.0.0.0/8", "{" + guid + "}=10.0.0.1/33", "10.0.0.1/8"):
        with pytest.raises(ConfigError) as info:
            load_config(None, {"OPENMSMQ_MQQB_ALLOWED_PEERS": bad}, {})
        assert info.value.key == "mqqb.allowed_peers"
    with pytest.raises(ConfigError) as info:
        load_config(None, {"OPENMSMQ_MQQB_TLS_CERT": str(tmp_path / "c.pem")}, {})
    assert info.value.key == "mqqb.tls_key"
    with pytest.raises(ConfigError) as info:
        load_config(None, {"OPENMSMQ_MQQB_TLS_PEERS": "10.0.0.0/8"}, {})
    assert info.value.key == "mqqb.tls_peers"
