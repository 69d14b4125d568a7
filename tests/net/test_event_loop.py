"""``qm.event_loop``: ``serve`` runs on uvloop by default, on asyncio when asked, and on
asyncio with a warning where uvloop cannot be imported."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys
from pathlib import Path

import pytest
import uvloop

from openmsmq.config import load_config
from openmsmq.errors import ConfigError
from openmsmq.net.mqqb import MQQBNode
from openmsmq.qm import MessageRecord, QueueManager
from openmsmq.server.serve import loop_factory, run


def test_the_default_loop_is_uvloop() -> None:
    config = load_config(None, {}, {}).config
    assert config.qm.event_loop == "uvloop"
    assert loop_factory(config.qm.event_loop) is uvloop.new_event_loop


def test_asyncio_is_chosen_by_the_environment() -> None:
    config = load_config(None, {"OPENMSMQ_QM_EVENT_LOOP": "asyncio"}, {}).config
    assert loop_factory(config.qm.event_loop) is asyncio.new_event_loop


def test_an_unknown_loop_is_a_configuration_error_naming_the_key() -> None:
    with pytest.raises(ConfigError) as err:
        load_config(None, {"OPENMSMQ_QM_EVENT_LOOP": "trio"}, {})
    assert "qm.event_loop" in str(err.value)
    with pytest.raises(ConfigError, match=r"qm\.event_loop"):
        loop_factory("trio")


def test_without_uvloop_serve_falls_back_to_asyncio_with_a_warning(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setitem(sys.modules, "uvloop", None)  # import uvloop raises ImportError
    with caplog.at_level(logging.WARNING, logger="openmsmq.serve"):
        assert loop_factory("uvloop") is asyncio.new_event_loop
    assert "uvloop cannot be imported" in caplog.text


@pytest.mark.parametrize(("name", "loop_type"), [("uvloop", uvloop.Loop), ("asyncio", asyncio.BaseEventLoop)])
def test_serve_runs_and_stops_on_the_configured_loop(tmp_path: Path, name: str, loop_type: type) -> None:
    """A whole serve in this process: it starts on the named loop, takes a message to a
    local queue from its own QM while running, and stops on SIGTERM with the message stored."""
    data = tmp_path / "qm"
    config = load_config(
        None,
        {},
        {
            "qm.data_dir": str(data),
            "qm.event_loop": name,
            "mqqb.listen_address": "127.0.0.1",
            "mqqb.port": 0,
            "remote.enabled": False,
            "metrics.enabled": False,
        },
    ).config
    seen: list[type] = []

    def ready(node: MQQBNode, qm: QueueManager) -> None:
        seen.append(type(asyncio.get_running_loop()))
        qm.create_queue("private$\\loop", transactional=True)
        with qm.begin() as tx:
            qm.send("private$\\loop", MessageRecord(body=name.encode()), tx)
        os.kill(os.getpid(), signal.SIGTERM)  # serve's handler: a graceful stop

    run(config, ready=ready)
    assert len(seen) == 1 and issubclass(seen[0], loop_type)
    if name == "asyncio":
        assert not issubclass(seen[0], uvloop.Loop)
    with QueueManager(data) as qm:
        assert qm.receive("private$\\loop", timeout=0).body == name.encode()
