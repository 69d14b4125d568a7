"""The console of a highly available queue manager on the tests' PostgreSQL: two
``openmsmq serve`` nodes of one QM, each with its console on; only the active serves one.
Its overview shows the role and the lease epoch; after the active is killed and the
standby takes over, the new active's console shows the higher epoch and warns of the
takeover, and the old page says its live updates stopped."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from openmsmq.runtime import live_runtime
from tests.ha_proc import create_pg_qm, dump, ha_node, runtime_json, wait_role
from tests.pgserver import PgServer
from tests.serve_proc import B, ServeProcess, free_port

from .browser import shot, wait_for

Q = "private$\\orders"
#: Console on a free port, no tokens file (loopback: every local user may use it).
CONSOLE = {"OPENMSMQ_CONSOLE_ENABLED": "true", "OPENMSMQ_CONSOLE_PORT": "0"}

pytestmark = pytest.mark.timeout(180)


def console_url(node: ServeProcess) -> str:
    return str(wait_for(lambda: (live_runtime(node.data_dir) or {}).get("console"), timeout=30,
                        what=f"{node.data_dir.name}'s console"))  # fmt: skip


def first_event(browser: Any) -> dict[str, Any]:
    """The first document of the page's live channel (``/events``), read in the page."""
    got = browser.execute_async_script(
        "const done = arguments[arguments.length - 1]; const s = new EventSource('/events');"
        "s.onmessage = e => { s.close(); done(e.data); }; setTimeout(() => done(null), 10000);"
    )
    assert got, "no event from /events"
    return dict(json.loads(got))


def text_of(browser: Any, ident: str) -> str:
    from selenium.webdriver.common.by import By

    return str(browser.find_element(By.ID, ident).text)


def test_the_active_console_shows_its_epoch_and_after_a_takeover_the_new_active_a_higher_one(
    tmp_path: Path, pg_server: PgServer, browser: Any
) -> None:
    dsn = pg_server.new_database()
    create_pg_qm(dsn, tmp_path / "init", Q)
    port = free_port(B)
    b1 = ha_node(tmp_path, "b1", B, port, dsn, **CONSOLE)
    b2 = ha_node(tmp_path, "b2", B, port, dsn, **CONSOLE)
    try:
        b1.start()
        first = wait_role(b1, "active")
        b2.start(ready="runtime")
        wait_role(b2, "standby", epoch=first["epoch"])
        assert runtime_json(b2).get("console") is None, dump(b2)  # a standby serves no console
        browser.delete_all_cookies()
        browser.get(console_url(b1) + "/")
        assert text_of(browser, "role") == "active", dump(b1)
        assert text_of(browser, "role-epoch") == str(first["epoch"])
        assert text_of(browser, "role-since") != "-"
        assert "took over" not in browser.page_source  # the first term: no takeover
        live = first_event(browser)["role"]  # the live channel carries the role too
        assert (live["role"], live["epoch"]) == ("active", first["epoch"])
        shot(browser, "overview-ha-active")

        b1.kill()
        second = wait_role(b2, "active", epoch=first["epoch"] + 1)
        # The old page: its live channel ended with the node (no reload).
        wait_for(lambda: "offline" in (browser.find_element("tag name", "body").get_attribute("class") or ""),
                 what="the old page to say its live updates stopped")  # fmt: skip
        shot(browser, "overview-ha-gone")
        browser.get(console_url(b2) + "/")
        assert text_of(browser, "role") == "active", dump(b2)
        assert text_of(browser, "role-epoch") == str(second["epoch"])
        assert "took over the queue manager" in text_of(browser, "main")
        live = first_event(browser)["role"]
        assert (live["role"], live["epoch"]) == ("active", second["epoch"])
        shot(browser, "overview-ha-takeover")
    finally:
        b1.close()
        b2.close()
