"""The kubectl verbs an operator runs around a rollout, against the emulator, with each kubectl.

Covers, with the machine's kubectl and PyPI's 1.37 (conftest's `kubectl`): `kubectl create` of
every built-in kind it has a generator for (bodies sent as protobuf), read back through the
client as created; `create token --audience coxswain-discovery`, whose token TokenReview then
accepts for that audience only; `patch` of each type (json, merge, strategic); `edit` through a
`KUBE_EDITOR` script; `wait --for=condition=Programmed` met by another client's status write
and `wait --for=delete`; `explain` from the OpenAPI v3 documents. Server-side apply: create,
re-apply after an edit (a dropped field goes, a changed one changes), a conflict with another
manager's field refused with kubectl's message, `--force-conflicts` taking it, and moving from
client-side to server-side apply. Leaves out `rollout status` (rollout_kubectl_test, with the
node agent) and the demo's manifests (demo_kubectl_test).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from coxswain_devkit.apiserver import ThreadedApiServer
from coxswain_devkit.apiserver.conftest import Kubectl
from coxswain_devkit.crds import STANDARD

CRDS = Path(__file__).parent.parent / "crds" / STANDARD
Obj = dict[str, Any]


def _get(kubectl: Kubectl, *what: str) -> Obj:
    return dict(json.loads(kubectl("get", *what, "-o", "json")))


@pytest.mark.parametrize(
    ("argv", "read", "check"),
    [
        pytest.param(
            ["create", "namespace", "team"],
            ["namespace", "team"],
            lambda o: o["status"]["phase"] == "Active",
            id="namespace",
        ),
        pytest.param(
            ["create", "configmap", "settings", "--from-literal=mode=a", "--from-literal=b=2"],
            ["configmap", "settings"],
            lambda o: o["data"] == {"mode": "a", "b": "2"},
            id="configmap",
        ),
        pytest.param(
            ["create", "secret", "generic", "creds", "--from-literal=password=s3cr3t"],
            ["secret", "creds"],
            lambda o: o["type"] == "Opaque" and o["data"] == {"password": "czNjcjN0"},
            id="secret-generic",
        ),
        pytest.param(
            ["create", "secret", "docker-registry", "pull", "--docker-server=r.example",
             "--docker-username=u", "--docker-password=p"],
            ["secret", "pull"],
            lambda o: o["type"] == "kubernetes.io/dockerconfigjson",
            id="secret-docker-registry",
        ),
        pytest.param(
            ["create", "serviceaccount", "proxy"],
            ["serviceaccount", "proxy"],
            lambda o: o["metadata"]["name"] == "proxy",
            id="serviceaccount",
        ),
        pytest.param(
            ["create", "deployment", "web", "--image=web:1", "--port=8080", "--replicas=3"],
            ["deployment", "web"],
            lambda o: o["spec"]["replicas"] == 3
            and o["spec"]["selector"] == {"matchLabels": {"app": "web"}}
            and o["spec"]["template"]["spec"]["containers"][0]["ports"]
            == [{"containerPort": 8080}],
            id="deployment",
        ),
        pytest.param(
            ["create", "deployment", "idle", "--image=web:1", "--replicas=0"],
            ["deployment", "idle"],
            lambda o: o["spec"]["replicas"] == 0,
            id="deployment-zero-replicas-kept",
        ),
        pytest.param(
            ["create", "service", "clusterip", "api", "--tcp=80:8080"],
            ["service", "api"],
            lambda o: o["spec"]["ports"][0]["targetPort"] == 8080 and o["spec"]["clusterIP"],
            id="service-clusterip",
        ),
        pytest.param(
            ["create", "service", "nodeport", "np", "--tcp=80", "--node-port=30080"],
            ["service", "np"],
            lambda o: o["spec"]["type"] == "NodePort"
            and o["spec"]["ports"][0]["nodePort"] == 30080,
            id="service-nodeport",
        ),
        pytest.param(
            ["create", "service", "loadbalancer", "lb", "--tcp=443:8443"],
            ["service", "lb"],
            lambda o: o["spec"]["type"] == "LoadBalancer",
            id="service-loadbalancer",
        ),
        pytest.param(
            ["create", "service", "externalname", "ext", "--external-name=db.example"],
            ["service", "ext"],
            lambda o: o["spec"]["externalName"] == "db.example",
            id="service-externalname",
        ),
        pytest.param(
            ["create", "ingress", "legacy", "--class=coxswain",
             "--rule=legacy.example/v1*=api:80", "--rule=tls.example/=api:80,tls=cert"],
            ["ingress", "legacy"],
            lambda o: o["spec"]["ingressClassName"] == "coxswain"
            and o["spec"]["rules"][0]["http"]["paths"][0]["pathType"] == "Prefix"
            and o["spec"]["tls"] == [{"hosts": ["tls.example"], "secretName": "cert"}],
            id="ingress",
        ),
        pytest.param(
            ["run", "one", "--image=web:1", "--port=80", "--labels=app=one"],
            ["pod", "one"],
            lambda o: o["spec"]["containers"][0]["image"] == "web:1",
            id="pod-by-run",
        ),
    ],
)  # fmt: skip
def test_create_generators(kubectl: Kubectl, argv: list[str], read: list[str], check: Any) -> None:
    out = kubectl(*argv)
    assert "created" in out
    obj = _get(kubectl, *read)
    assert check(obj), obj


def test_create_from_a_protobuf_body_that_does_not_decode_names_the_field(
    kubectl: Kubectl,
) -> None:
    # A label key that is not a valid label: the body decodes (protobuf is fine) and the
    # emulator's validation answers 422 naming the field, as kube-apiserver does.
    out = kubectl("create", "configmap", "bad", "--from-literal=a=b", "--dry-run=client",
                  "-o", "yaml")  # fmt: skip
    doc = yaml.safe_load(out)
    doc["metadata"]["labels"] = {"not a key": "x"}
    result = kubectl.run("create", "-f", "-", stdin=yaml.safe_dump(doc))
    assert result.returncode != 0
    assert "metadata.labels" in result.stderr


def test_create_token_for_the_discovery_audience(kubectl: Kubectl, client: Any) -> None:
    import kubernetes

    kubectl("create", "serviceaccount", "proxy")
    token = kubectl("create", "token", "proxy", "--audience", "coxswain-discovery",
                    "--duration", "1h").strip()  # fmt: skip
    reviews = kubernetes.client.AuthenticationV1Api(client)

    def review(audience: str) -> Any:
        body: Any = {"spec": {"token": token, "audiences": [audience]}}
        return reviews.create_token_review(body).status

    accepted = review("coxswain-discovery")
    assert accepted.authenticated
    assert accepted.user.username == "system:serviceaccount:default:proxy"
    assert not review("https://kubernetes.default.svc.cluster.local").authenticated


@pytest.fixture
def deployment(kubectl: Kubectl) -> None:
    kubectl("create", "deployment", "web", "--image=web:1", "--port=8080")


def test_patch_of_each_type(kubectl: Kubectl, deployment: None) -> None:
    env = '{"name":"web","env":[{"name":"A","value":"1"}]}'
    env = f'{{"spec":{{"template":{{"spec":{{"containers":[{env}]}}}}}}}}'
    kubectl("patch", "deployment", "web", "-p", env)  # strategic: merges the container by name
    kubectl("patch", "deployment", "web", "--type", "merge", "-p", '{"spec":{"replicas":4}}')
    kubectl(
        "patch",
        "deployment",
        "web",
        "--type",
        "json",
        "-p",
        '[{"op":"replace","path":"/spec/template/spec/containers/0/image","value":"web:2"}]',
    )
    obj = _get(kubectl, "deployment", "web")
    (container,) = obj["spec"]["template"]["spec"]["containers"]
    assert (container["image"], container["env"], container["ports"]) == (
        "web:2",
        [{"name": "A", "value": "1"}],
        [{"containerPort": 8080}],
    )
    assert obj["spec"]["replicas"] == 4
    assert obj["metadata"]["generation"] == 4
    managers = {e["manager"] for e in _get(kubectl, "deployment", "web", "--show-managed-fields")
                ["metadata"]["managedFields"]}  # fmt: skip
    assert {"kubectl-create", "kubectl-patch"} <= managers


EDITOR = """
import pathlib, sys
path = pathlib.Path(sys.argv[-1])
path.write_text(path.read_text().replace("image: web:1", "image: web:3"))
"""


def test_edit_through_kube_editor(kubectl: Kubectl, deployment: None, tmp_path: Path) -> None:
    editor = tmp_path / "editor.py"
    editor.write_text(EDITOR)
    done = kubectl.run(
        "edit", "deployment", "web", env={"KUBE_EDITOR": f"{sys.executable} {editor}"}
    )
    assert done.returncode == 0, done.stderr
    assert "deployment.apps/web edited" in done.stdout
    obj = _get(kubectl, "deployment", "web")
    assert obj["spec"]["template"]["spec"]["containers"][0]["image"] == "web:3"


@pytest.fixture
def gateway(kubectl: Kubectl, tmp_path: Path) -> None:
    kubectl("apply", "-f", str(CRDS))
    kubectl("wait", "--for=condition=Established", "crd", "--all", "--timeout=30s")
    path = tmp_path / "gw.yaml"
    path.write_text(
        "apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {name: gw}\n"
        "spec: {gatewayClassName: coxswain, listeners: [{name: http, port: 80, protocol: HTTP}]}\n"
    )
    kubectl("apply", "-f", str(path))


def test_wait_for_programmed_then_for_delete(
    kubectl: Kubectl, gateway: None, custom: Any, api: ThreadedApiServer
) -> None:
    group = ("gateway.networking.k8s.io", "v1", "default", "gateways", "gw")
    argv = kubectl.argv("wait", "--for=condition=Programmed", "gateway/gw", "--timeout=60s")
    with subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) as w:
        condition = {"type": "Programmed", "status": "True", "reason": "Programmed",
                     "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"}  # fmt: skip
        custom.patch_namespaced_custom_object_status(
            *group, {"status": {"conditions": [condition]}}
        )
        out, _ = w.communicate(timeout=60)
    assert w.returncode == 0, out
    assert "gateway.gateway.networking.k8s.io/gw condition met" in out
    opened = api.call(lambda s: s.faults.watches_opened)
    argv = kubectl.argv("wait", "--for=delete", "gateway/gw", "--timeout=60s")
    with subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) as w:
        # Deleted once kubectl watches: before it has read the Gateway, there is nothing to wait.
        api.call(lambda s: s.faults.wait_watches_opened(opened + 1))
        custom.delete_namespaced_custom_object(*group)
        out, _ = w.communicate(timeout=60)
    assert w.returncode == 0, out
    assert "condition met" in out


def test_explain_reads_the_openapi_documents(kubectl: Kubectl, gateway: None) -> None:
    out = kubectl("explain", "deployment.spec.replicas")
    assert "FIELD: replicas <integer>" in out or "replicas\t<integer>" in out
    assert "KIND:" in kubectl("explain", "gateways")


# --- server-side apply ---------------------------------------------------------------------

APP = """\
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, labels: {app: web, tier: front}}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - name: app
        image: web:1
        ports: [{containerPort: 8080}]
        env: [{name: MODE, value: a}, {name: EXTRA, value: "1"}]
"""


def _managers(kubectl: Kubectl, *what: str) -> set[tuple[str, str]]:
    obj = _get(kubectl, *what, "--show-managed-fields")
    return {(e["manager"], e["operation"]) for e in obj["metadata"].get("managedFields", [])}


def test_server_side_apply_then_reapply_after_an_edit(kubectl: Kubectl, tmp_path: Path) -> None:
    path = tmp_path / "app.yaml"
    path.write_text(APP)
    assert "deployment.apps/web serverside-applied" in kubectl(
        "apply", "--server-side", "-f", str(path)
    )
    assert _managers(kubectl, "deployment", "web") == {("kubectl", "Apply")}
    path.write_text(APP.replace(", tier: front", "").replace("web:1", "web:2")
                    .replace(', {name: EXTRA, value: "1"}', ""))  # fmt: skip
    kubectl("apply", "--server-side", "-f", str(path))
    obj = _get(kubectl, "deployment", "web")
    container = obj["spec"]["template"]["spec"]["containers"][0]
    assert obj["metadata"]["labels"] == {"app": "web"}, "a label the manifest dropped is gone"
    assert (container["image"], container["env"]) == ("web:2", [{"name": "MODE", "value": "a"}])
    assert obj["metadata"]["generation"] == 2
    out = kubectl("apply", "--server-side", "-f", str(path))
    assert "serverside-applied" in out
    assert (
        _get(kubectl, "deployment", "web")["metadata"]["resourceVersion"]
        == obj["metadata"]["resourceVersion"]
    ), "an apply that changes nothing writes nothing"


def test_server_side_apply_conflict_and_force(kubectl: Kubectl, tmp_path: Path) -> None:
    path = tmp_path / "app.yaml"
    path.write_text(APP)
    kubectl("apply", "--server-side", "-f", str(path))
    kubectl("scale", "deployment", "web", "--replicas=5")
    path.write_text(APP.replace("replicas: 2", "replicas: 3"))
    refused = kubectl.run("apply", "--server-side", "-f", str(path))
    assert refused.returncode != 0
    assert "Apply failed with 1 conflict" in refused.stderr
    assert ".spec.replicas" in refused.stderr
    assert "--force-conflicts" in refused.stderr
    assert _get(kubectl, "deployment", "web")["spec"]["replicas"] == 5
    kubectl("apply", "--server-side", "--force-conflicts", "-f", str(path))
    assert _get(kubectl, "deployment", "web")["spec"]["replicas"] == 3
    # Applying the value the other manager set is no conflict: the field is shared.
    kubectl("scale", "deployment", "web", "--replicas=7")
    path.write_text(APP.replace("replicas: 2", "replicas: 7"))
    kubectl("apply", "--server-side", "-f", str(path))


def test_client_side_apply_then_server_side(kubectl: Kubectl, tmp_path: Path) -> None:
    path = tmp_path / "app.yaml"
    path.write_text(APP)
    kubectl("apply", "-f", str(path))
    assert ("kubectl-client-side-apply", "Update") in _managers(kubectl, "deployment", "web")
    path.write_text(APP.replace("replicas: 2", "replicas: 3"))
    kubectl("apply", "--server-side", "-f", str(path))
    assert _get(kubectl, "deployment", "web")["spec"]["replicas"] == 3
    assert ("kubectl", "Apply") in _managers(kubectl, "deployment", "web")
