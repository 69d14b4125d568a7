"""The deployment examples of a highly available queue manager (docs/ha.md): the Kubernetes
manifest (a StatefulSet of two serve pods, a Service that selects the ready pod, the DSN
from a Secret) and the systemd environment file. Every setting they give is a real
configuration key with a valid value, and the two nodes share what they must."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from openmsmq.config import load_config
from openmsmq.errors import ConfigError
from openmsmq.server.ha import SHARED_SETTINGS

ROOT = Path(__file__).resolve().parents[2]
MANIFEST = ROOT / "deploy" / "kubernetes" / "openmsmq-ha.yaml"
ENV_FILE = ROOT / "deploy" / "openmsmq-ha.env"


def _docs() -> dict[str, dict[str, Any]]:
    return {d["kind"] + "/" + d["metadata"]["name"]: d for d in yaml.safe_load_all(MANIFEST.read_text())}


def _check_env(env: dict[str, str], tmp_path: Path) -> None:
    """The environment loads as a configuration of a node of an HA queue manager."""
    loaded = load_config(None, {**env, "OPENMSMQ_QM_DATA_DIR": str(tmp_path)}, {})
    c = loaded.config
    assert c.store.backend == "postgresql" and c.store.dsn
    assert c.qm.name, "qm.name must be set: the default (the host name) differs per node"
    assert c.mqqb.listen_address == "0.0.0.0" and c.mqqb.advertised_address


def test_the_statefulset_runs_two_nodes_behind_a_service_of_the_ready_one(tmp_path: Path) -> None:
    docs = _docs()
    sts, svc = docs["StatefulSet/qm1"], docs["Service/qm1"]
    assert sts["spec"]["replicas"] == 2
    pod = sts["spec"]["template"]
    labels = pod["metadata"]["labels"]
    assert svc["spec"]["selector"].items() <= labels.items()
    assert svc["spec"].get("publishNotReadyAddresses") is False
    (container,) = pod["spec"]["containers"]
    assert container["readinessProbe"]["httpGet"]["path"] == "/ready"
    assert container["livenessProbe"]["httpGet"]["path"] == "/live"
    env = {e["name"]: e for e in container["env"]}
    secret = env["OPENMSMQ_STORE_DSN"]["valueFrom"]["secretKeyRef"]
    assert secret["name"] and secret["key"]
    plain = {k: str(e["value"]) for k, e in env.items() if "value" in e}
    _check_env({**plain, "OPENMSMQ_STORE_DSN": "postgresql://openmsmq@db/qm1"}, tmp_path)
    assert plain["OPENMSMQ_MQQB_ADVERTISED_ADDRESS"] == svc["spec"]["clusterIP"]
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports["mqqb"] == 1801 and svc["spec"]["ports"][0]["targetPort"] == "mqqb"


def test_the_systemd_environment_configures_a_node(tmp_path: Path) -> None:
    env = {}
    for line in ENV_FILE.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            key, _, value = line.partition("=")
            env[key] = value
    _check_env(env, tmp_path)


def test_the_check_fails_on_a_node_without_a_shared_name(tmp_path: Path) -> None:
    assert "qm.name" in SHARED_SETTINGS
    with pytest.raises(AssertionError, match=r"qm\.name"):
        _check_env(
            {"OPENMSMQ_STORE_BACKEND": "postgresql", "OPENMSMQ_STORE_DSN": "postgresql://db/x"}, tmp_path
        )
    with pytest.raises(ConfigError, match=r"store\.dsn"):
        _check_env({"OPENMSMQ_STORE_BACKEND": "postgresql"}, tmp_path)
