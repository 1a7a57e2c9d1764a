"""deploy/kubernetes/: valid Kubernetes objects that fit together and fit ``thalweg cluster``.

The base (``base/``) and the shared-lake overlay (``overlays/shared-lake/``, rendered
here as Kustomize does: its resources, then its JSON patches) are validated alike.

Each manifest is validated, strictly (no unknown field), against the Kubernetes OpenAPI
schemas ``kubernetes-validate`` ships (offline). Then what ties them together: the
StatefulSet's cluster size, service, ports, probes, mounts and Prometheus annotations,
the addresses ``thalweg cluster`` derives inside its pods, and the ConfigMap's pipeline,
which must validate with ``thalweg config validate`` and whose every secret reference
must be a variable the pods get from a key the Secret has.
"""

from __future__ import annotations

import copy
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

from tests.helpers import pod_hosts
from thalweg_bytewax.cluster import topology_from_env
from thalweg_bytewax.cluster.recovery_init import partition_files
from thalweg_bytewax.lanes import read_lane

ROOT = Path(__file__).resolve().parents[2]
MANIFESTS = ROOT / "deploy" / "kubernetes" / "base"
SHARED_LAKE = ROOT / "deploy" / "kubernetes" / "overlays" / "shared-lake"
THALWEG = Path(sys.executable).with_name("thalweg")
OBJECTS = sorted(p for p in MANIFESTS.glob("*.yaml") if p.name != "kustomization.yaml")


def _pointer(path: str) -> list[str]:
    return [p.replace("~1", "/").replace("~0", "~") for p in path.split("/")[1:]]


def json_patch(doc: Any, operation: dict[str, Any]) -> None:
    """Apply one RFC 6902 operation (``test``, ``remove``, ``add``) to ``doc`` in place."""
    *parents, last = _pointer(operation["path"])
    for key in parents:
        doc = doc[int(key)] if isinstance(doc, list) else doc[key]
    op = operation["op"]
    if isinstance(doc, list):
        index = len(doc) if last == "-" else int(last)
        if op == "add":
            doc.insert(index, operation["value"])
        elif op == "remove":
            del doc[index]
        else:
            assert op == "test", op
            assert doc[index] == operation["value"], f"{operation} found {doc[index]!r}"
    elif op == "add":
        doc[last] = operation["value"]
    elif op == "remove":
        del doc[last]
    else:
        assert op == "test", op
        assert doc[last] == operation["value"], f"{operation} found {doc[last]!r}"


def render(kustomization: Path) -> list[dict[str, Any]]:
    """The objects a kustomization directory makes: its resources with its patches applied.

    Only what the overlays here use: resources (files, or directories of a kustomization)
    and JSON patches on one target; the base's labels and image tag change no field the
    schemas check differently, and are left out.
    """
    spec = yaml.safe_load((kustomization / "kustomization.yaml").read_text())
    assert set(spec) <= {"apiVersion", "kind", "labels", "resources", "images", "patches"}
    objects: list[dict[str, Any]] = []
    for resource in spec["resources"]:
        path = kustomization / resource
        if path.is_dir():
            objects += render(path)
        else:
            objects += [d for d in yaml.safe_load_all(path.read_text()) if d]
    for patch in spec.get("patches", []):
        target = patch["target"]
        (doc,) = [
            o
            for o in objects
            if o["kind"] == target["kind"] and o["metadata"]["name"] == target["name"]
        ]
        for operation in yaml.safe_load((kustomization / patch["path"]).read_text()):
            json_patch(doc, operation)
    return objects


def by_kind(objects: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    found = {o["kind"]: o for o in objects}
    assert len(found) == len(objects), "one object of each kind"
    return found


SHARED_LAKE_OBJECTS = render(SHARED_LAKE)


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


@pytest.mark.parametrize(
    "docs",
    [
        *([d for d in yaml.safe_load_all(p.read_text()) if d] for p in OBJECTS),
        *([o] for o in SHARED_LAKE_OBJECTS),
    ],
    ids=[
        *(f"base/{p.name}" for p in OBJECTS),
        *(f"shared-lake/{o['kind']}" for o in SHARED_LAKE_OBJECTS),
    ],
)
def test_every_manifest_is_a_valid_kubernetes_object(docs: list[dict[str, Any]]) -> None:
    assert docs
    for doc in docs:
        kubernetes_validate.validate(doc, kubernetes_validate.latest_version(), strict=True)


def test_the_shared_lake_overlay_shares_the_lake_and_keeps_recovery_per_pod() -> None:
    base = by_kind(render(MANIFESTS))
    shared = by_kind(SHARED_LAKE_OBJECTS)
    assert set(shared) == {*base, "PersistentVolumeClaim"}
    for kind in ("ConfigMap", "Secret", "Service"):
        assert shared[kind] == base[kind]
    claim = shared["PersistentVolumeClaim"]
    assert claim["spec"]["accessModes"] == ["ReadWriteMany"]
    sts = shared["StatefulSet"]["spec"]
    # The recovery store stays on a volume per pod; the lake is the one shared claim.
    assert [t["metadata"]["name"] for t in sts["volumeClaimTemplates"]] == ["recovery"]
    volumes = {v["name"]: v for v in sts["template"]["spec"]["volumes"]}
    assert volumes["lake"] == {
        "name": "lake",
        "persistentVolumeClaim": {"claimName": claim["metadata"]["name"]},
    }
    (c,) = sts["template"]["spec"]["containers"]
    env = {e["name"]: e["value"] for e in c["env"] if "value" in e}
    mounts = {m["mountPath"]: m["name"] for m in c["volumeMounts"]}
    assert mounts[env["THALWEG_RECOVERY_DIR"]] == "recovery"
    data_dir = tomllib.loads(shared["ConfigMap"]["data"]["pipeline.toml"])["data_dir"]
    assert mounts[data_dir] == "lake"
    # Everything else is the base's StatefulSet.
    assert {k: v for k, v in sts.items() if k not in ("volumeClaimTemplates", "template")} == {
        k: v
        for k, v in base["StatefulSet"]["spec"].items()
        if k not in ("volumeClaimTemplates", "template")
    }
    assert c == base["StatefulSet"]["spec"]["template"]["spec"]["containers"][0]


def test_the_shared_lake_patch_refuses_a_base_whose_lake_claim_moved() -> None:
    # The patch removes the second claim template only after checking it is `lake`.
    sts = copy.deepcopy(load("StatefulSet"))
    sts["spec"]["volumeClaimTemplates"].reverse()
    operations = yaml.safe_load((SHARED_LAKE / "statefulset-shared-lake.yaml").read_text())
    with pytest.raises(AssertionError, match="found 'recovery'"):
        json_patch(sts, operations[0])


def test_the_kustomization_applies_every_manifest() -> None:
    kustomization = yaml.safe_load((MANIFESTS / "kustomization.yaml").read_text())
    assert sorted(kustomization["resources"]) == [p.name for p in OBJECTS]
    overlay = yaml.safe_load((SHARED_LAKE / "kustomization.yaml").read_text())
    assert (SHARED_LAKE / overlay["resources"][0]).resolve() == MANIFESTS


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
    # The server answers alive while the cluster forms: started means formed (ready).
    assert c["startupProbe"]["httpGet"] == {"path": "/ready", "port": "http"}
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
    # "pods", each on a loopback address of its own with the same peer and HTTP ports:
    # only the addresses, the ports and the paths are this machine's, and the pipeline is
    # the starter's embedded sample (no broker, no credentials).
    starter = tmp_path / "pipeline.toml"
    subprocess.run([str(THALWEG), "init", str(starter)], check=True, capture_output=True)
    hosts, (peer_port, http_port) = pod_hosts(2, ports=2)
    addresses = ";".join(f"{host}:{peer_port}" for host in hosts)
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
            "THALWEG_HTTP_PORT": str(http_port),
            "THALWEG_HTTP_HOST": hosts[i],
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
