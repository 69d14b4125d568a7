"""``store.backend`` / ``store.dsn``: checked at load, the DSN's password never shown."""

from __future__ import annotations

import json

import pytest

from openmsmq.config import config_document, load_config, render_config
from openmsmq.errors import ConfigError


@pytest.mark.parametrize(
    "dsn", ["postgresql://qm:s3cr3t-pw@db.example:5432/qm1", "host=db.example password=s3cr3t-pw dbname=qm1"]
)
def test_the_dsn_password_is_redacted_wherever_the_configuration_is_shown(dsn: str) -> None:
    loaded = load_config(None, {"OPENMSMQ_STORE_BACKEND": "postgresql", "OPENMSMQ_STORE_DSN": dsn})
    assert loaded.config.store.dsn == dsn  # the store gets it as it is
    shown = render_config(loaded) + json.dumps(config_document(loaded))
    assert "s3cr3t" not in shown
    assert "db.example" in shown


def test_postgresql_without_a_dsn_names_store_dsn() -> None:
    with pytest.raises(ConfigError) as info:
        load_config(None, {"OPENMSMQ_STORE_BACKEND": "postgresql"})
    assert info.value.key == "store.dsn"


def test_an_unknown_backend_names_store_backend() -> None:
    with pytest.raises(ConfigError) as info:
        load_config(None, {"OPENMSMQ_STORE_BACKEND": "mysql"})
    assert info.value.key == "store.backend"
