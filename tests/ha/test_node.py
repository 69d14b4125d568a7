"""What a node of a highly available QM derives from its configuration
(openmsmq.server.ha): the lease timing, the settings every node must share and their
check against the lease holder's, and the options of its fenced store sessions."""

from __future__ import annotations

import pytest
from psycopg import conninfo

from openmsmq.config import Config, HaConfig, MqqbConfig, QmConfig
from openmsmq.errors import ConfigError
from openmsmq.server.ha import check_settings, fenced_dsn, lease_config, shared_settings
from openmsmq.store.lease import describe_holder, holder_settings


def test_lease_timing_follows_the_ha_section() -> None:
    cfg = lease_config(HaConfig(lease_duration=3.0, renew_interval=0.5, poll_interval=0.25))
    assert (cfg.duration, cfg.renew_interval, cfg.poll_interval) == (3.0, 0.5, 0.25)
    assert cfg.margin == 0.75 and cfg.request_timeout == 1.0
    assert (
        lease_config(HaConfig(lease_duration=1.0, renew_interval=0.2, poll_interval=0.1)).request_timeout < 1
    )


def test_a_node_with_other_shared_settings_is_refused_naming_the_first() -> None:
    mine = shared_settings(
        Config(qm=QmConfig(name="QM1"), mqqb=MqqbConfig(listen_address="0.0.0.0", port=1801))
    )
    assert mine == {"qm.name": "qm1", "mqqb.listen_address": "0.0.0.0", "mqqb.port": "1801"}
    same = describe_holder("host-a", 7, mine)
    assert holder_settings(same) == mine
    check_settings(mine, same)
    check_settings(mine, None)  # nobody ever held it
    check_settings(mine, "old-version:1:abc")  # a holder that carries no settings
    with pytest.raises(ConfigError) as err:
        check_settings(mine, describe_holder("host-a", 7, {**mine, "mqqb.port": "1802"}))
    assert err.value.key == "mqqb.port" and "host-a:7:" in err.value.message
    assert "nothing was written" in err.value.message


def test_a_fenced_store_session_ends_a_transaction_left_idle_for_half_a_lease() -> None:
    got = conninfo.conninfo_to_dict(fenced_dsn("postgresql://u@db/qm1?options=-c%20work_mem%3D4MB", 3.0))
    assert got["options"] == "-c work_mem=4MB -c idle_in_transaction_session_timeout=1500"
    assert got["host"] == "db" and got["dbname"] == "qm1"
    short = conninfo.conninfo_to_dict(fenced_dsn("host=db dbname=qm1", 0.5))
    assert short["options"] == "-c idle_in_transaction_session_timeout=1000"
