"""The web console in a real browser (Debian's headless Chromium through Selenium) against
a real ``openmsmq serve`` with a tokens file: an admin token (``*=all``) and a read-only
one (``*=peek``). One browser and one QM serve the whole module; the tests run in file
order and each leaves the QM as the next one expects.

Screenshots of every page go to build/console-screenshots/ (build output)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from openmsmq.client import Access, OutgoingMessage, connect
from openmsmq.runtime import live_runtime
from tests.serve_proc import A, ServeProcess, free_port

from .browser import shot, wait_for

ADMIN = "admin-token-0001"
READER = "reader-token-0001"
ORDERS = "private$\\orders"
#: An outgoing queue: a QM that is not there (nothing listens on 127.0.0.2 at this port).
REMOTE = "DIRECT=TCP:127.0.0.2\\private$\\far"
#: The same in a CSS attribute selector (a backslash escapes there).
REMOTE_CSS = REMOTE.replace("\\", "\\\\")

pytestmark = pytest.mark.timeout(300)


class QM:
    """The served queue manager: its console URL and a CLI bound to the admin token."""

    def __init__(self, proc: ServeProcess) -> None:
        info = live_runtime(proc.data_dir)
        assert info is not None
        self.proc = proc
        self.url = str(info["console"])
        self.remote = f"{info['remote']}?token={ADMIN}"

    def cli(self, *args: str) -> str:
        done = subprocess.run([sys.executable, "-m", "openmsmq", "--qm", self.remote, *args],
                              capture_output=True, text=True, timeout=60)  # fmt: skip
        assert done.returncode == 0, done.stderr
        return done.stdout

    def count(self, queue: str) -> int:
        with connect(self.remote) as conn:
            return conn.queue_info(queue).message_count


@pytest.fixture(scope="module")
def qm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[QM]:
    root = tmp_path_factory.mktemp("console")
    tokens = root / "tokens"
    tokens.write_text(f"{ADMIN} *=all\n{READER} *=peek\n", encoding="utf-8")
    proc = ServeProcess(
        root / "qm", A, free_port(A), root / "serve.log", "--console-port", "0",
        env={"OPENMSMQ_REMOTE_TOKENS_FILE": str(tokens), "OPENMSMQ_MQQB_CONNECT_BACKOFF_MIN": "5",
             "OPENMSMQ_MQQB_CONNECT_BACKOFF_MAX": "10"},
    )  # fmt: skip
    proc.start("runtime")
    try:
        q = QM(proc)
        q.cli("queue", "create", ORDERS, "--transactional")
        yield q
    finally:
        proc.close()


def by_id(driver: Any, ident: str) -> Any:
    from selenium.webdriver.common.by import By

    return driver.find_element(By.ID, ident)


def css(driver: Any, selector: str) -> list[Any]:
    from selenium.webdriver.common.by import By

    return driver.find_elements(By.CSS_SELECTOR, selector)


def sign_in(driver: Any, qm: QM, token: str) -> None:
    driver.delete_all_cookies()
    driver.get(qm.url + "/login")
    by_id(driver, "token").send_keys(token)
    submit(driver, by_id(driver, "sign-in"))


def submit(driver: Any, element: Any) -> None:
    """Click a button or link that loads a new page, and wait for that page. ``element``
    may be a function finding it: found again when a live update replaced it meanwhile."""
    from selenium.common.exceptions import StaleElementReferenceException

    driver.execute_script("window.__before_click = true")
    for attempt in range(3):
        try:
            (element() if callable(element) else element).click()
            break
        except StaleElementReferenceException:
            if attempt == 2 or not callable(element):
                raise
    wait_for(lambda: driver.execute_script(
        "return window.__before_click === undefined && document.readyState === 'complete'"),
        what="the next page")  # fmt: skip


def queue_url(qm: QM, name: str) -> str:
    return qm.url + "/queue?name=" + urllib.request.quote(name, safe="")


def post(driver: Any, path: str, fields: dict[str, str]) -> int:
    """POST a form from the page's own origin (with its session cookie); the HTTP status
    (303 for a redirect, which fetch does not follow here)."""
    return int(driver.execute_async_script(
        "const done = arguments[arguments.length - 1];"
        "fetch(arguments[0], {method: 'POST', body: new URLSearchParams(arguments[1]), redirect: 'manual'})"
        ".then(r => done(r.type === 'opaqueredirect' ? 303 : r.status)).catch(e => done(-1));", path, fields,
    ))  # fmt: skip


def csrf_of(driver: Any) -> str:
    return str(css(driver, "input[name=csrf]")[0].get_attribute("value"))


# ---- sign-in and the overview ------------------------------------------------------------


def test_a_wrong_token_stays_on_the_login_page(qm: QM, browser: Any) -> None:
    browser.get(qm.url + "/")
    assert "/login" in browser.current_url  # no session: to the login page
    shot(browser, "login")
    sign_in(browser, qm, "not-a-token-at-all")
    assert "/login" in browser.current_url
    assert "Unknown token" in browser.page_source
    shot(browser, "login-wrong-token")


def test_sign_in_shows_the_overview_of_the_qm(qm: QM, browser: Any) -> None:
    sign_in(browser, qm, ADMIN)
    wait_for(lambda: browser.current_url.rstrip("/") == qm.url, what="the overview")
    guid = json.loads((qm.proc.data_dir / "runtime.json").read_text())["qm_guid"]
    assert guid in browser.page_source
    assert "standalone" in browser.page_source
    cookie = browser.get_cookie("openmsmq_console")
    assert cookie["httpOnly"] and cookie["sameSite"] == "Strict"
    wait_for(lambda: by_id(browser, "rate-in").text.endswith("/s"), what="a live rate")
    shot(browser, "overview")


def test_a_session_the_console_does_not_know_goes_back_to_the_login_page(qm: QM, browser: Any) -> None:
    # As after session_timeout or a restart of serve: the cookie names no session.
    browser.delete_all_cookies()
    browser.get(qm.url + "/login")
    browser.add_cookie({"name": "openmsmq_console", "value": "expired-or-forged", "path": "/"})
    browser.get(qm.url + "/queues")
    assert "/login" in browser.current_url
    sign_in(browser, qm, ADMIN)


# ---- queues and messages -----------------------------------------------------------------


def test_a_message_sent_with_the_cli_appears_without_a_reload(qm: QM, browser: Any) -> None:
    browser.get(queue_url(qm, ORDERS))
    assert by_id(browser, "queue-count").text == "0"
    marker = browser.execute_script("window.__marker = 1; return window.__marker")  # gone on a reload
    qm.cli("send", ORDERS, '{"order": 17, "item": "widget"}', "--label", "order-17", "--transactional")
    wait_for(lambda: by_id(browser, "queue-count").text == "1", what="the count to become 1")
    wait_for(lambda: "order-17" in by_id(browser, "messages").text, what="the message in the browse list")
    assert browser.execute_script("return window.__marker") == marker  # the page was not reloaded
    browser.get(qm.url + "/queues")
    row = next(r for r in css(browser, "#queues tbody tr") if ORDERS in r.text)
    assert row.find_elements("css selector", "[data-count]")[0].text == "1"
    shot(browser, "queues")
    browser.get(queue_url(qm, ORDERS))
    shot(browser, "queue")


def test_browse_and_preview_a_message(qm: QM, browser: Any) -> None:
    browser.get(queue_url(qm, ORDERS))
    submit(browser, lambda: css(browser, "#messages tbody a")[0])
    assert by_id(browser, "m-label").text == "order-17"
    assert '"order": 17' in by_id(browser, "preview").text  # pretty JSON
    shot(browser, "message-json")
    submit(browser, next(link for link in css(browser, "nav.filters a") if link.text == "hex"))
    assert "7b 22 6f 72" in by_id(browser, "preview").text  # {"or
    shot(browser, "message-hex")
    # The download: the whole body, as an attachment.
    got = browser.execute_async_script(
        "const done = arguments[arguments.length - 1];"
        "fetch(document.getElementById('download').href).then(r => r.text().then("
        "t => done([r.status, r.headers.get('content-disposition'), t])));"
    )
    assert got[0] == 200 and got[1].startswith("attachment") and got[2] == '{"order": 17, "item": "widget"}'


def test_receive_one_and_delete_one(qm: QM, browser: Any) -> None:
    qm.cli("send", ORDERS, "second", "--label", "order-18", "--transactional")
    browser.get(queue_url(qm, ORDERS))
    wait_for(lambda: by_id(browser, "queue-count").text == "2", what="two messages")
    submit(browser, by_id(browser, "receive-first"))
    assert "order-17" in by_id(browser, "m-label").text and by_id(browser, "received")
    shot(browser, "received")
    assert qm.count(ORDERS) == 1
    browser.get(queue_url(qm, ORDERS))
    submit(browser, lambda: css(browser, "#messages tbody a")[0])
    submit(browser, by_id(browser, "delete"))
    assert "Deleted message" in browser.page_source
    assert qm.count(ORDERS) == 0


def test_an_unknown_queue_or_message_is_a_404_page_that_says_what(qm: QM, browser: Any) -> None:
    browser.get(queue_url(qm, "private$\\no_such_queue"))
    assert "Queue not found" in browser.page_source and "no_such_queue" in browser.page_source
    shot(browser, "not-found-queue")
    browser.get(qm.url + "/message?queue=" + urllib.request.quote(ORDERS, safe="") + "&id=999999")
    assert "Message not found" in browser.page_source and "999999" in browser.page_source


def test_an_action_the_qm_refuses_shows_its_error_by_name(qm: QM, browser: Any) -> None:
    browser.get(qm.url + "/queues")
    css(browser, "input[name=path]")[0].send_keys(ORDERS)
    submit(browser, by_id(browser, "create-queue"))
    assert "MQ_ERROR_QUEUE_EXISTS" in browser.page_source
    shot(browser, "error-queue-exists")


def test_a_post_without_the_csrf_token_is_refused(qm: QM, browser: Any) -> None:
    qm.cli("send", ORDERS, "keep me", "--transactional")
    browser.get(queue_url(qm, ORDERS))
    assert post(browser, "/queue/purge", {"name": ORDERS}) == 403
    assert post(browser, "/queue/purge", {"name": ORDERS, "csrf": "guessed"}) == 403
    assert qm.count(ORDERS) == 1
    assert (
        post(browser, "/queue/purge", {"name": ORDERS, "csrf": csrf_of(browser)}) == 303
    )  # the same, with it
    assert qm.count(ORDERS) == 0


RATES = "private$\\rates"
QUIET = "private$\\quiet"

#: Records, in the page, the highest value every live update wrote into a rate cell of
#: the queues table (a rate stays up for one tick, about a second: too short to poll for).
WATCH_RATES = """
window.__rates = {};
new MutationObserver(function () {
  document.querySelectorAll("[data-in],[data-out]").forEach(function (el) {
    var way = el.hasAttribute("data-in") ? "in" : "out";
    var key = way + " " + el.getAttribute("data-" + way).toLowerCase();
    window.__rates[key] = Math.max(window.__rates[key] || 0, parseFloat(el.textContent));
  });
}).observe(document.getElementById("queues"), {subtree: true, childList: true, characterData: true});
"""


def test_the_queues_page_shows_each_queues_rates_live(qm: QM, browser: Any) -> None:
    qm.cli("queue", "create", RATES)
    qm.cli("queue", "create", QUIET)
    browser.get(qm.url + "/queues")
    row = next(
        r for r in css(browser, "#queues tbody tr") if r.find_element("css selector", "a").text == RATES
    )
    assert row.find_element("css selector", "[data-in]").text == "0.0"
    browser.execute_script(WATCH_RATES)

    def seen(way: str, queue: str) -> float:
        return float(browser.execute_script("return window.__rates[arguments[0]] || 0", f"{way} {queue}"))

    oldest = row.find_element("css selector", "[data-oldest]")
    assert oldest.text == "-"  # empty
    qm.cli("send", RATES, "counted", "--count", "20")
    wait_for(lambda: seen("in", RATES.lower()) > 0, what="a positive in-rate of the queue sent to")
    wait_for(lambda: oldest.text.endswith(" s"), what="the age of the oldest message, live")
    assert seen("out", RATES.lower()) == 0
    qm.cli("receive", RATES, "--count", "5")
    wait_for(lambda: seen("out", RATES.lower()) > 0, what="a positive out-rate of the queue received from")
    assert seen("in", QUIET.lower()) == 0 and seen("out", QUIET.lower()) == 0  # the other queue: none
    assert browser.execute_script("return typeof window.__rates") == "object"  # no reload meanwhile
    shot(browser, "queues-rates")
    # The overview's chart of messages in per second moves with the same traffic.
    browser.get(qm.url + "/")
    browser.execute_script(
        "window.__chart = 0; const now = document.getElementById('rate-in');"
        " new MutationObserver(function () {"
        " window.__chart = Math.max(window.__chart, parseFloat(now.textContent) || 0);"
        " }).observe(now, {subtree: true, childList: true, characterData: true});"
    )
    qm.cli("send", QUIET, "charted", "--count", "20")
    wait_for(lambda: browser.execute_script("return window.__chart") > 0, what="a positive rate on the chart")


LIFE = "private$\\lifecycle"


def test_create_change_page_purge_and_delete_a_queue(qm: QM, browser: Any) -> None:
    browser.get(qm.url + "/queues")
    css(browser, "input[name=path]")[0].send_keys(LIFE)
    css(browser, "input[name=label]")[0].send_keys("first label")
    css(browser, "input[name=transactional]")[0].click()  # a non-transactional one
    submit(browser, by_id(browser, "create-queue"))
    assert f"Created {LIFE}" in browser.page_source and "first label" in by_id(browser, "main").text
    label = css(browser, "section[aria-label=Properties] input[name=label]")[0]
    label.clear()
    label.send_keys("second label")
    css(browser, "section[aria-label=Properties] input[name=quota_kb]")[0].send_keys("2048")
    submit(browser, by_id(browser, "save-properties"))
    with connect(qm.remote) as conn:
        info = conn.queue_info(LIFE)
    assert (info.label, info.quota_kb, info.transactional) == ("second label", 2048, False)
    qm.cli("send", LIFE, "paged", "--count", "60")  # more than a page (50)
    browser.get(queue_url(qm, LIFE))
    assert len(css(browser, "#messages tbody tr")) == 50
    submit(browser, by_id(browser, "next-page"))
    assert len(css(browser, "#messages tbody tr")) == 10
    submit(browser, by_id(browser, "purge"))  # asks first; nothing gone yet
    assert "60 message(s) will be deleted" in browser.page_source and qm.count(LIFE) == 60
    shot(browser, "confirm-purge")
    submit(browser, by_id(browser, "confirm"))
    assert "Purged 60 message(s)" in browser.page_source and qm.count(LIFE) == 0
    submit(browser, by_id(browser, "delete-queue"))
    assert "will be deleted" in browser.page_source
    submit(browser, by_id(browser, "confirm"))
    assert f"Deleted {LIFE}" in browser.page_source and "/queues" in browser.current_url
    browser.get(queue_url(qm, LIFE))
    assert "Queue not found" in browser.page_source


# ---- dead letters and outgoing queues ---------------------------------------------------


def test_requeue_a_dead_letter(qm: QM, browser: Any) -> None:
    with connect(qm.remote) as conn, conn.open_queue(ORDERS) as q, conn.transaction() as tx:
        q.send(OutgoingMessage(body=b"late", label="expired", time_to_be_received=1, dead_letter=True), tx=tx)
    wait_for(lambda: qm.count("system$;deadxact") == 1, timeout=20, what="the message to expire")
    assert qm.count(ORDERS) == 0
    browser.get(qm.url + "/deadletters")
    row = css(browser, "#deadletters tbody tr")[0]
    assert "NACK_RECEIVE_TIMEOUT" in row.text and "orders" in row.text
    shot(browser, "deadletters")
    box = row.find_element("css selector", "input[type=checkbox]")
    letter = box.get_attribute("value")
    box.click()
    submit(browser, by_id(browser, "requeue"))
    assert "Requeued 1 dead letter" in browser.page_source
    # The copy keeps its TimeToBeReceived (as `openmsmq dlq requeue` without --no-expiry):
    # one second after the requeue it may expire again, into the dead-letter queue under
    # a new LookupIdentifier. So: the dead letter is gone, and the message is in exactly
    # one of the two queues (one snapshot of every count: `status`).
    counts = {q["name"].lower(): q["message_count"] for q in json.loads(qm.cli("status", "--json"))["queues"]}
    assert counts[ORDERS] + counts["system$;deadxact"] == 1, counts
    browser.get(qm.url + "/deadletters")
    assert not css(browser, f'#deadletters input[value="{letter}"]')


def test_suspend_and_resume_an_outgoing_queue(qm: QM, browser: Any) -> None:
    qm.cli("send", REMOTE, "to a far QM", "--transactional")
    browser.get(qm.url + "/outgoing")
    wait_for(
        lambda: css(browser, f'button[data-suspend="{REMOTE_CSS}" i]') or browser.refresh(), what="the queue"
    )
    state = css(browser, "td[data-state]")[0]
    assert state.text != "suspended"
    submit(browser, css(browser, f'button[data-suspend="{REMOTE_CSS}" i]')[0])
    assert css(browser, "td[data-state]")[0].text == "suspended", by_id(browser, "main").text
    shot(browser, "outgoing-suspended")
    submit(browser, css(browser, f'button[data-resume="{REMOTE_CSS}" i]')[0])
    assert css(browser, "td[data-state]")[0].text in ("waiting", "retrying", "connected", "idle")
    assert css(browser, f'button[data-suspend="{REMOTE_CSS}" i]')
    shot(browser, "outgoing")


def test_the_overview_warns_of_an_outgoing_queue_retrying(qm: QM, browser: Any) -> None:
    # Nothing listens at the far QM's address: its outgoing queue retries with back-off.
    wait_for(lambda: browser.get(qm.url + "/") or "retrying" in by_id(browser, "main").text, timeout=30,
             what="the retrying outgoing queue among the warnings")  # fmt: skip
    warnings = css(browser, "section[aria-label=Warnings]")[0].text
    assert "is retrying" in warnings and "127.0.0.2" in warnings
    shot(browser, "overview-warnings")


# ---- poison messages and subqueues ---------------------------------------------------------

POISON_Q = ORDERS + ";poison"


def test_poison_count_is_live_and_subqueues_are_listed_under_their_queue(qm: QM, browser: Any) -> None:
    with connect(qm.remote) as conn, conn.open_queue(ORDERS) as q:
        q.purge()
        with conn.transaction() as sending:
            q.send(OutgoingMessage(body=b"bad order", label="poisoned"), tx=sending)
        lookup_id = q.peek(timeout=5).lookup_id
    browser.get(qm.url + "/")
    assert by_id(browser, "poison-count").text == "0" and by_id(browser, "retry-count").text == "0"
    marker = browser.execute_script("window.__marker = 2; return window.__marker")
    qm.cli("move", ORDERS, str(lookup_id), "--to", "poison")
    wait_for(lambda: by_id(browser, "poison-count").text == "1", what="the poison count to become 1")
    assert browser.execute_script("return window.__marker") == marker  # no reload
    shot(browser, "overview-poison")
    browser.get(qm.url + "/queues")
    rows = css(browser, "#queues tbody tr")
    at = next(i for i, r in enumerate(rows) if r.find_element("css selector", "a").text == ORDERS)
    under = []  # the rows right under the queue: its journal and subqueues
    for r in rows[at + 1 :]:
        if not r.find_element("css selector", "a").text.startswith(ORDERS + ";"):
            break
        under.append(r)
    sub = next(r for r in under if r.find_element("css selector", "a").text == POISON_Q)
    assert "subqueue" in (sub.get_attribute("class") or "")
    assert sub.find_element("css selector", "[data-count]").text == "1"
    assert int(sub.find_element("css selector", "[data-bytes]").text) >= len(b"bad order")  # body and label
    assert sub.find_elements("css selector", "td")[-1].text != "-"  # the oldest message's age
    shot(browser, "queues-subqueues")


def test_browse_and_the_message_page_show_abort_and_move_counts(qm: QM, browser: Any) -> None:
    with connect(qm.remote) as conn, conn.open_queue(POISON_Q, Access.RECEIVE) as q:
        tx = conn.transaction()
        q.receive(tx=tx, timeout=5)
        tx.abort()  # an aborted receive: AbortCount 1 (the move set it to 0)
    browser.get(queue_url(qm, POISON_Q))
    row = css(browser, "#messages tbody tr")[0]
    assert row.find_element("css selector", "[data-abort-count]").text == "1"
    assert row.find_element("css selector", "[data-move-count]").text == "1"
    shot(browser, "queue-poison")
    submit(browser, lambda: css(browser, "#messages tbody a")[0])
    assert by_id(browser, "m-abort-count").text == "1" and by_id(browser, "m-move-count").text == "1"


def test_move_a_message_back_from_the_poison_subqueue(qm: QM, browser: Any) -> None:
    browser.get(queue_url(qm, POISON_Q))
    submit(browser, lambda: css(browser, "#messages tbody a")[0])
    lookup_id = browser.current_url.rsplit("id=", 1)[1]
    assert (
        post(browser, "/message/move", {"queue": POISON_Q, "id": lookup_id, "to": ORDERS}) == 403
    )  # no CSRF
    by_id(browser, "move-to").send_keys("private$\\elsewhere")  # not this queue's
    submit(browser, by_id(browser, "move"))
    assert "MQ_ERROR_ILLEGAL_OPERATION" in browser.page_source and "own subqueues" in browser.page_source
    shot(browser, "move-bad-target")
    assert qm.count(POISON_Q) == 1 and qm.count(ORDERS) == 0  # nothing changed
    browser.get(qm.url + "/message?queue=" + urllib.request.quote(POISON_Q, safe="") + "&id=" + lookup_id)
    by_id(browser, "move-to").send_keys(ORDERS)
    submit(browser, by_id(browser, "move"))
    assert "Moved message" in browser.page_source, by_id(browser, "main").text
    assert qm.count(POISON_Q) == 0 and qm.count(ORDERS) == 1
    browser.get(queue_url(qm, ORDERS))
    row = css(browser, "#messages tbody tr")[0]
    assert row.find_element("css selector", "[data-move-count]").text == "2"  # in and out again
    assert row.find_element("css selector", "[data-abort-count]").text == "0"  # a move resets it


def test_the_other_pages_render(qm: QM, browser: Any) -> None:
    for path, name, marker in (("/incoming", "incoming", "Incoming sequences"),
                               ("/sessions", "sessions", "MS-MQQB sessions"),
                               ("/config", "config", "console.enabled")):  # fmt: skip
        browser.get(qm.url + path)
        assert marker in browser.page_source
        shot(browser, name)
    assert "remote.tokens_file" in browser.page_source


def test_phone_width_and_dark_theme(qm: QM, browser: Any) -> None:
    pages = (("overview", qm.url + "/"), ("queues", qm.url + "/queues"), ("queue", queue_url(qm, ORDERS)))
    browser.get(qm.url + "/")
    by_id(browser, "theme").click()
    assert browser.execute_script("return document.documentElement.dataset.theme") in ("dark", "light")
    if browser.execute_script("return document.documentElement.dataset.theme") == "light":
        by_id(browser, "theme").click()
    for width, size in ((1280, "wide"), (390, "phone")):  # the choice is remembered across pages
        for name, url in pages:
            browser.set_window_size(width, 800)
            browser.get(url)
            assert browser.execute_script("return document.documentElement.dataset.theme") == "dark"
            shot(browser, f"{name}-{size}-dark")
    by_id(browser, "theme").click()  # back to light for the rest
    for name, url in pages:
        browser.set_window_size(390, 800)
        browser.get(url)
        shot(browser, f"{name}-phone-light")
        # Nothing wider than the phone's screen but the tables, which scroll in their box.
        wide = browser.execute_script(
            "return Array.from(document.querySelectorAll('main *')).filter(e => !e.closest('.scroll')"
            " && e.getBoundingClientRect().right > document.documentElement.clientWidth + 1)"
            ".map(e => e.tagName + '#' + e.id + '.' + e.className)"
        )
        assert not wide, (name, wide)
    browser.set_window_size(1280, 900)


# ---- a read-only token -------------------------------------------------------------------


def test_a_read_only_token_sees_no_action_and_its_posts_are_refused(qm: QM, browser: Any) -> None:
    with connect(qm.remote) as conn, conn.open_queue(ORDERS) as q:
        q.purge()  # what earlier tests left
    qm.cli("send", ORDERS, "for the reader", "--transactional")
    sign_in(browser, qm, READER)
    browser.get(queue_url(qm, ORDERS))
    assert by_id(browser, "queue-count").text == "1"
    assert (
        not css(browser, "#messages form")
        and not css(browser, "#receive-first")
        and not css(browser, "#purge")
    )
    shot(browser, "queue-read-only")
    for path in ("/outgoing", "/deadletters", "/queues"):
        browser.get(qm.url + path)
        assert not css(browser, "main form"), path
    assert "Configuration" not in by_id(browser, "main").text
    token = csrf_of(browser)  # the logout form's: a valid session and CSRF token
    assert post(browser, "/queue/purge", {"name": ORDERS, "csrf": token}) == 403
    assert post(browser, "/queue/delete", {"name": ORDERS, "csrf": token}) == 403
    assert post(browser, "/outgoing/suspend", {"name": REMOTE, "csrf": token}) == 403
    browser.get(queue_url(qm, ORDERS))
    lookup_id = css(browser, "#messages tbody a")[0].text
    submit(browser, lambda: css(browser, "#messages tbody a")[0])
    assert not css(browser, "#move")  # moving needs admin
    move = {"queue": ORDERS, "id": lookup_id, "to": "poison", "csrf": token}
    assert post(browser, "/message/move", move) == 403
    assert qm.count(ORDERS) == 1
    browser.get(qm.url + "/config")
    assert "MQ_ERROR_ACCESS_DENIED" in browser.page_source
    shot(browser, "read-only-denied")


def test_the_event_stream_needs_a_session(qm: QM) -> None:
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(qm.url + "/events", timeout=10)
    assert err.value.code == 401


def test_serve_stops_cleanly_with_the_console_open(qm: QM, browser: Any) -> None:
    browser.get(qm.url + "/")  # an event stream is open
    time.sleep(0.5)
    assert qm.proc.stop() == 0
    assert "Traceback" not in Path(qm.proc.log).read_text()
