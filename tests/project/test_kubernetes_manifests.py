"""deploy/kubernetes/: valid Kubernetes objects that fit together and fit ``thalweg cluster``.

Each manifest is validated, strictly (no unknown field), against the Kubernetes OpenAPI
schemas ``kubernetes-validate`` ships (offline). Then what ties them together: the
StatefulSet's cluster size, service, ports, probes, mounts and Prometheus annotations,
the addresses ``thalweg cluster`` derives inside its pods, and the ConfigMap's pipeline,
which must validate with ``thalweg config validate`` and whose every secret reference
must be a variable the pods get from a key the Secret has.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from tests.helpers import cluster_addresses
from thalweg_bytewax.cluster import topology_from_env
from thalweg_bytewax.cluster.recovery_init import partition_files
from thalweg_bytewax.lanes import read_lane

ROOT = Path(__file__).resolve().parents[2]
MANIFESTS = ROOT / "deploy" / "kubernetes"
THALWEG = Path(sys.executable).with_name("thalweg")
OBJECTS = sorted(p for p in MANIFESTS.glob("*.yaml") if p.name != "kustomization.yaml")


def load(kind: str) -> dict[str, Any]:
    found = [
        doc
        for path in OBJECTS
        for doc in yaml.safe_load_all(path.read_text())
        if doc and doc["kind"] == kind
    ]
    assert len(found) == 1, f"{len(found)} {kind} objects in deploy/kubernetes"
    return dict(found[0])


def container() -> dict[str, Any]:
    (only,) = load("StatefulSet")["spec"]["template"]["spec"]["containers"]
    return dict(only)


def plain_env() -> dict[str, str]:
    return {e["name"]: e["value"] for e in container()["env"] if "value" in e}


@pytest.mark.parametrize("path", OBJECTS, ids=[p.name for p in OBJECTS])
def test_every_manifest_is_a_valid_kubernetes_object(path: Path) -> None:
    docs = [d for d in yaml.safe_load_all(path.read_text()) if d]
    assert docs
    for doc in docs:
        kubernetes_validate.validate(doc, kubernetes_validate.latest_version(), strict=True)


def test_the_kustomization_applies_every_manifest() -> None:
    kustomization = yaml.safe_load((MANIFESTS / "kustomization.yaml").read_text())
    assert sorted(kustomization["resources"]) == [p.name for p in OBJECTS]


def test_the_statefulset_forms_the_cluster_the_entry_point_derives() -> None:
    sts, service = load("StatefulSet"), load("Service")
    env = plain_env()
    assert sts["spec"]["podManagementPolicy"] == "Parallel"
    # One pod at a time would join a cluster of the other version.
    assert sts["spec"]["updateStrategy"] == {"type": "OnDelete"}
    assert sts["spec"]["serviceName"] == service["metadata"]["name"]
    assert service["spec"]["clusterIP"] == "None"
    assert service["spec"]["publishNotReadyAddresses"] is True
    assert (
        service["spec"]["selector"].items() <= sts["spec"]["template"]["metadata"]["labels"].items()
    )
    assert int(env["THALWEG_CLUSTER_SIZE"]) == sts["spec"]["replicas"]
    assert container()["args"][0] == "cluster"
    ports = {p["name"]: p["containerPort"] for p in container()["ports"]}
    assert ports["peers"] == int(env["THALWEG_CLUSTER_PORT"])
    assert {p["name"]: p["port"] for p in service["spec"]["ports"]}["peers"] == ports["peers"]

    name = sts["metadata"]["name"]
    last = topology_from_env(env, f"{name}-{sts['spec']['replicas'] - 1}")
    assert last.process_id == sts["spec"]["replicas"] - 1
    assert last.addresses == tuple(
        f"{name}-{i}.{service['metadata']['name']}:{ports['peers']}"
        for i in range(sts["spec"]["replicas"])
    )


def test_probes_and_prometheus_scrape_the_flows_http_server() -> None:
    env = plain_env()
    c = container()
    http = {p["name"]: p["containerPort"] for p in c["ports"]}["http"]
    assert http == int(env["THALWEG_HTTP_PORT"])
    assert env["THALWEG_HTTP_HOST"] == "0.0.0.0"  # noqa: S104 - the kubelet and Prometheus
    assert c["livenessProbe"]["httpGet"] == {"path": "/live", "port": "http"}
    assert c["startupProbe"]["httpGet"] == {"path": "/live", "port": "http"}
    assert c["readinessProbe"]["httpGet"] == {"path": "/ready", "port": "http"}
    notes = load("StatefulSet")["spec"]["template"]["metadata"]["annotations"]
    assert notes["prometheus.io/scrape"] == "true"
    assert int(notes["prometheus.io/port"]) == http
    assert notes["prometheus.io/path"] == "/metrics"


def test_each_pod_mounts_its_recovery_and_lake_volumes_and_the_pipeline() -> None:
    sts = load("StatefulSet")
    env = plain_env()
    mounts = {m["mountPath"]: m["name"] for m in container()["volumeMounts"]}
    claims = {t["metadata"]["name"] for t in sts["spec"]["volumeClaimTemplates"]}
    assert mounts[env["THALWEG_RECOVERY_DIR"]] in claims
    config = Path(env["THALWEG_CONFIG"])
    volumes = {v["name"]: v for v in sts["spec"]["template"]["spec"]["volumes"]}
    configmap = load("ConfigMap")
    assert volumes[mounts[str(config.parent)]]["configMap"]["name"] == configmap["metadata"]["name"]
    assert config.name in configmap["data"]
    data_dir = tomllib.loads(configmap["data"][config.name])["data_dir"]
    assert mounts[data_dir] in claims, "the lanes must be on a volume that outlives the pod"


@pytest.mark.slow
def test_the_configmaps_pipeline_validates_and_its_secrets_come_from_the_secret(
    tmp_path: Path,
) -> None:
    configmap, secret = load("ConfigMap"), load("Secret")
    name = Path(plain_env()["THALWEG_CONFIG"]).name
    pipeline = tmp_path / name
    pipeline.write_text(configmap["data"][name])
    clean = {"PATH": "/usr/bin:/bin"}
    done = subprocess.run(
        [str(THALWEG), "config", "validate", str(pipeline)],
        capture_output=True, text=True, env=clean, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "valid `pipeline` settings" in done.stdout

    listed = subprocess.run(
        [str(THALWEG), "config", "secrets", str(pipeline), "--format", "json"],
        capture_output=True, text=True, env=clean, check=False,
    )  # fmt: skip
    uses = json.loads(listed.stdout)
    assert uses, "the example pipeline shows how credentials are passed"
    from_secret = {
        e["name"]: e["valueFrom"]["secretKeyRef"]
        for e in container()["env"]
        if "secretKeyRef" in e.get("valueFrom", {})
    }
    keys = set(secret["stringData"])
    for use in uses:
        assert use["kind"] == "env", use
        ref = from_secret.get(use["target"])
        assert ref is not None, f"{use['key']} needs {use['target']}, which no pod variable sets"
        assert ref["name"] == secret["metadata"]["name"] and ref["key"] in keys, ref


@pytest.mark.slow
def test_the_pods_command_and_environment_run_a_pipeline_as_a_cluster(tmp_path: Path) -> None:
    # The container's command and variables as the manifest gives them, on two local
    # "pods": only the addresses, the paths and the HTTP ports are this machine's, and the
    # pipeline is the starter's embedded sample (no broker, no credentials).
    starter = tmp_path / "pipeline.toml"
    subprocess.run([str(THALWEG), "init", str(starter)], check=True, capture_output=True)
    addresses = cluster_addresses(2).replace("127.0.0.1", "localhost")
    http_ports = [int(a.rsplit(":", 1)[1]) for a in cluster_addresses(2).split(";")]
    procs = []
    for i in range(2):
        pod = tmp_path / f"pod-{i}"
        pod.mkdir()
        env = {
            **{k: v for k, v in os.environ.items() if not k.startswith("THALWEG_")},
            **plain_env(),
            "THALWEG_CONFIG": str(starter),
            "THALWEG_SOURCE__COUNT": "400",
            "THALWEG_DATA_DIR": str(pod / "lake"),
            "THALWEG_RECOVERY_DIR": str(pod / "recovery"),
            "THALWEG_HTTP_PORT": str(http_ports[i]),
            "THALWEG_HTTP_HOST": "127.0.0.1",
            "THALWEG_CLUSTER_ADDRESSES": addresses,
            "THALWEG_PROCESS_ID": str(i),
        }
        procs.append(
            subprocess.Popen(
                [str(THALWEG), *container()["args"]],
                cwd=pod,
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )  # fmt: skip
        )
    outs = [p.communicate(timeout=300) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], [err[-3000:] for _, err in outs]
    lanes = [tmp_path / f"pod-{i}" / "lake" / "raw" for i in range(2)]
    assert all(lane.is_dir() for lane in lanes), "each process writes its own shards"
    rows = sum(read_lane(lane).num_rows for lane in lanes)
    assert rows == 400
    assert len(partition_files(tmp_path / "pod-0" / "recovery")) == 8
