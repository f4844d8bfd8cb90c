"""End to end: a realistic ingress-nginx Ingress set moved to Coxswain as it is, with kubectl.

The set (tests/e2e/ingress_nginx/, fifteen Ingresses shaped like ingress-nginx's own examples) is
applied unedited with kubectl (`coxswain_devkit.layer_tools`' pinned kubectl) into the API
emulator of a whole stack run from the shipped PEX files: only its IngressClass "nginx" now
names Coxswain's controller. The echo backs each Service of namespace web (fortune-teller on its
gRPC port), and a real auth server in this process, standing in for oauth2-proxy, backs
auth/oauth2-proxy. Real requests then check what each annotation promises: rewrite-target with
captures, x-forwarded-prefix and upstream-vhost as the backend sees them; the 308 of
ssl-redirect and force-ssl-redirect with their Locations, and app-root's 302 over HTTPS; a CORS
preflight for the allowed origin and none for another; proxy-body-size's 413; the canary by
header, by cookie and by weight (an exact 20 of 100), and the main Ingress's affinity cookie
keeping a client on the canary that took it; allow and deny source ranges told apart by the
client's own loopback address; limit-rps's 429 with Retry-After; basic auth from an Opaque
htpasswd Secret (401, then 200); external auth (the sign-in redirect, then the auth server's
headers on the request sent on), by the Service's name and as ingress-nginx's oauth2-proxy
example writes it, `https://$host/oauth2/auth` beside an Ingress serving /oauth2 (the auth
request reaching that Ingress's Service with the request's host, its sign-in served without
auth); client certificates (auth-tls-*: none sent to the error page,
another CA's refused in the handshake, a partner's admitted with its subject and PEM sent on);
gRPC through backend-protocol GRPC; a permanent redirect; a refused configuration-snippet (404,
and an InvalidAnnotation Warning Event); exactly the Events the set's refused and ignored keys
call for; and the migration report (`coxswain-controller translate --migration-report`) saying
the same of every Ingress as the stack did. Every annotation's every case is in the translation
and policy tests; this checks the set as a whole.
"""

from __future__ import annotations

import base64
import http.client
import http.server
import json
import socket
import ssl
import subprocess
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
import kubernetes
import pytest
import yaml

from coxswain_devkit import pki
from coxswain_devkit.apiserver import kubectl_tool
from coxswain_devkit.echo import grpc_call
from coxswain_devkit.echo import grpc_messages as pb
from coxswain_devkit.pki import CertificateAuthority
from coxswain_devkit.stack import Launcher, Stack, StackPorts, tls_secret
from coxswain_devkit.waiting import until

DATA = Path(__file__).parent / "ingress_nginx"
WAIT = 60.0
WEB, AUTH = "web", "auth"
P = "nginx.ingress.kubernetes.io/"
ECHOES = [(WEB, name) for name in ("frontend", "api", "stable", "canary", "fortune-teller")]
SESSION = "_oauth2_proxy"  # oauth2-proxy's cookie
PROVIDER = "https://provider.example/authorize"  # where oauth2-proxy's /oauth2/start sends


def eventually(predicate: Callable[[], Any], what: str, timeout: float = WAIT) -> Any:
    return until(
        predicate,
        what,
        within=timeout,
        tolerate=(OSError, http.client.HTTPException, grpc.RpcError),
    )


@dataclass
class Answer:
    status: int
    headers: http.client.HTTPMessage
    body: dict[str, Any]

    def header(self, name: str) -> str:
        return str(self.headers.get(name, ""))

    @property
    def pod(self) -> str:
        return str(self.body.get("pod", "")) if self.status == 200 else ""


def _exchange(conn: http.client.HTTPConnection, method: str, path: str,
              headers: dict[str, str], body: bytes | None) -> Answer:  # fmt: skip
    try:
        conn.request(method, path, body=body, headers=headers)
        response = conn.getresponse()
        raw = response.read()
        try:
            data = json.loads(raw) if raw else {}
        except ValueError:
            data = {}
        return Answer(response.status, response.headers, data if isinstance(data, dict) else {})
    finally:
        conn.close()


def send(
    port: int,
    host: str,
    path: str = "/",
    *,
    method: str = "GET",
    headers: dict[str, str] | None = None,
    body: bytes | None = None,
    source: str = "127.0.0.1",
) -> Answer:
    """One request from `source` (a loopback address of its own) to the proxy's `port`."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10, source_address=(source, 0))
    return _exchange(conn, method, path, {"Host": host, **(headers or {})}, body)


def presenting(trust: CertificateAuthority, client: CertificateAuthority) -> ssl.SSLContext:
    """A client context verifying the proxy under `trust`, presenting a certificate `client`
    issued to CN=partner-1."""
    return pki.client_context(trust.certificate_pem, client.issue(common_name="partner-1"))


def send_tls(port: int, host: str, path: str, context: ssl.SSLContext) -> Answer:
    """One request over TLS, naming `host` by SNI."""
    raw = socket.create_connection(("127.0.0.1", port), timeout=10)
    conn = http.client.HTTPConnection(host, port, timeout=10)
    conn.sock = context.wrap_socket(raw, server_hostname=host)
    return _exchange(conn, "GET", path, {"Host": host}, None)


# ------------------------------------------------------------------ the auth server


@dataclass
class AuthServer:
    """oauth2-proxy's /oauth2/auth as ingress-nginx calls it: 202 with the user's headers for a
    request whose session cookie it knows, 401 otherwise; /oauth2/start sends the browser to
    the provider; it keeps the heads it was asked."""

    sessions: dict[str, tuple[str, str]] = field(default_factory=dict)  # cookie -> user, email
    asked: list[tuple[str, dict[str, str]]] = field(default_factory=list)  # (path, headers)
    server: http.server.ThreadingHTTPServer | None = None

    def start(self) -> int:
        owner = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                owner.asked.append((self.path, {k.lower(): v for k, v in self.headers.items()}))
                cookies = dict(
                    part.strip().partition("=")[::2]
                    for part in self.headers.get("Cookie", "").split(";")
                    if "=" in part
                )
                found = owner.sessions.get(cookies.get(SESSION, ""))
                if self.path.startswith("/oauth2/start"):
                    self.send_response(302)
                    self.send_header("Location", PROVIDER)
                else:
                    self.send_response(202 if found and self.path == "/oauth2/auth" else 401)
                if found:
                    self.send_header("X-Auth-Request-User", found[0])
                    self.send_header("X-Auth-Request-Email", found[1])
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                pass  # quiet: the test asserts on `asked`

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return int(self.server.server_address[1])

    def stop(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()


def auth_slice(port: int) -> dict[str, Any]:
    return {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {
            "name": "oauth2-proxy-local",
            "namespace": AUTH,
            "labels": {"kubernetes.io/service-name": "oauth2-proxy"},
        },
        "addressType": "IPv4",
        "ports": [{"name": "http", "port": port, "protocol": "TCP"}],
        "endpoints": [{"addresses": ["127.0.0.1"], "conditions": {"ready": True}}],
    }


# ------------------------------------------------------------------ the stack


@dataclass
class Cluster:
    stack: Stack
    ca: CertificateAuthority
    partners: CertificateAuthority  # the client CA of auth-tls-secret
    auth: AuthServer
    applied: str  # what kubectl apply said
    core: Any = None

    @property
    def http(self) -> int:
        return self.stack.ports.ingress_http

    @property
    def https(self) -> int:
        return self.stack.ports.ingress_https

    def tls(self) -> ssl.SSLContext:
        return ssl.create_default_context(cadata=self.ca.certificate_pem.decode())

    def warnings(self) -> list[tuple[str, str, str]]:
        """(Ingress, type, message) of every InvalidAnnotation Event in namespace web."""
        found = self.core.list_namespaced_event(WEB).items
        return [
            (str(e.involved_object.name), str(e.type), str(e.message))
            for e in found
            if e.reason == "InvalidAnnotation"
        ]

    def served(self, host: str, path: str = "/", **kwargs: Any) -> Answer:
        """The first answer that is not the proxy's 404 (the Ingress is on its way)."""
        return eventually(
            lambda: (a := send(self.http, host, path, **kwargs)).status != 404 and a, host
        )


def kubectl_apply(stack: Stack, workdir: Path) -> str:
    assert stack.kubeconfig is not None
    argv = [str(kubectl_tool.kubectl()), "--kubeconfig", str(stack.kubeconfig),
            "--cache-dir", str(workdir / "kubectl-cache"), "apply", "-f", str(DATA)]  # fmt: skip
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout


def ca_secret(ns: str, name: str, ca: CertificateAuthority) -> dict[str, Any]:
    """An Opaque Secret holding `ca`'s certificate as ca.crt, as auth-tls-secret reads it."""
    data = {"ca.crt": base64.b64encode(ca.certificate_pem).decode()}
    return {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
            "metadata": {"name": name, "namespace": ns}, "data": data}  # fmt: skip


def namespace(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    workdir = tmp_path_factory.mktemp("migration")
    ca = CertificateAuthority.create("e2e migration CA")
    partners = CertificateAuthority.create("e2e partner CA")
    auth = AuthServer(sessions={"alice-session": ("alice", "alice@example.com")})
    auth_port = auth.start()
    try:
        stack = Stack(
            Launcher.pex_files(Path(".")),
            workdir,
            echo_services=ECHOES,
            grpc_echoes=[(WEB, "fortune-teller")],
            ports=StackPorts.free(),
            gateway_api="none",
            extra_objects=[
                namespace(WEB),
                namespace(AUTH),
                tls_secret(WEB, "shop-tls", ca, ["shop.example.com"]),
                tls_secret(WEB, "portal-tls", ca, ["portal.example.com"]),
                ca_secret(WEB, "partner-ca", partners),
                auth_slice(auth_port),
            ],
        )
        try:
            stack.start()
            with stack.client() as client:
                running = Cluster(stack, ca, partners, auth, kubectl_apply(stack, workdir))
                running.core = kubernetes.client.CoreV1Api(client)
                yield running
        finally:
            statuses = stack.stop()
    finally:
        auth.stop()
    assert all(code == 0 for code in statuses.values()), statuses


# ------------------------------------------------------------------ the tests


def test_kubectl_applies_the_set_unedited(cluster: Cluster) -> None:
    documents = [d for f in sorted(DATA.glob("*.yaml")) for d in yaml.safe_load_all(f.read_text())]
    ingresses = [d["metadata"]["name"] for d in documents if d["kind"] == "Ingress"]
    assert len(ingresses) == 15
    for name in ingresses:
        assert f"ingress.networking.k8s.io/{name} created" in cluster.applied
    assert "secret/basic-auth created" in cluster.applied


def test_rewrite_target_captures_prefix_and_upstream_vhost(cluster: Cluster) -> None:
    seen = cluster.served("api.example.com", "/api/orders/7?expand=1").body
    assert seen["pod"] == "api-0" and seen["path"] == "/orders/7?expand=1"
    assert seen["host"] == "api.internal"
    assert seen["headers"]["X-Forwarded-Prefix"] == ["/api"]
    # ingress-nginx's regex paths are case-insensitive; the empty capture leaves "/".
    assert send(cluster.http, "api.example.com", "/API").body["path"] == "/"
    assert send(cluster.http, "api.example.com", "/apiary").status == 404


def test_ssl_redirect_then_app_root_over_https(cluster: Cluster) -> None:
    redirect = eventually(
        lambda: (a := send(cluster.http, "shop.example.com", "/cart?id=3")).status == 308 and a,
        "the HTTPS redirect",
    )
    assert redirect.header("Location") == f"https://shop.example.com:{cluster.https}/cart?id=3"
    context = cluster.tls()
    root = eventually(lambda: send_tls(cluster.https, "shop.example.com", "/", context), "HTTPS")
    assert root.status == 302 and root.header("Location").endswith("/store")
    page = send_tls(cluster.https, "shop.example.com", "/store/shoes", context)
    assert (page.pod, page.body["path"]) == ("frontend-0", "/store/shoes")


def test_force_ssl_redirect_without_a_certificate(cluster: Cluster) -> None:
    answer = cluster.served("checkout.example.com", "/pay?order=9")
    assert answer.status == 308
    assert answer.header("Location") == f"https://checkout.example.com:{cluster.https}/pay?order=9"


def test_cors_preflight_and_the_body_size_limit(cluster: Cluster) -> None:
    preflight = {"Origin": "https://app.example.com", "Access-Control-Request-Method": "PUT",
                 "Access-Control-Request-Headers": "content-type"}  # fmt: skip
    allowed = cluster.served("uploads.example.com", "/upload", method="OPTIONS", headers=preflight)
    assert allowed.status in (200, 204)
    assert allowed.header("Access-Control-Allow-Origin") == "https://app.example.com"
    assert "PUT" in allowed.header("Access-Control-Allow-Methods")
    assert allowed.header("Access-Control-Max-Age") == "600"
    foreign = {**preflight, "Origin": "https://evil.example"}
    other = send(cluster.http, "uploads.example.com", "/upload", method="OPTIONS", headers=foreign)
    assert other.header("Access-Control-Allow-Origin") == ""

    origin = {"Origin": "https://app.example.com"}
    small = send(cluster.http, "uploads.example.com", "/upload", method="POST", headers=origin,
                 body=b"x" * (512 * 1024))  # fmt: skip
    assert (small.status, small.pod, small.body["method"]) == (200, "api-0", "POST")
    assert small.header("Access-Control-Allow-Origin") == "https://app.example.com"
    big = send(cluster.http, "uploads.example.com", "/upload", method="POST",
               body=b"x" * (2 * 1024 * 1024))  # fmt: skip
    assert big.status == 413


def test_canary_by_header_cookie_and_weight(cluster: Cluster) -> None:
    host = "www.example.com"
    eventually(lambda: send(cluster.http, host, headers={"X-Canary": "always"}).pod == "canary-0",
               "the canary")  # fmt: skip
    pods = {
        send(cluster.http, host, headers=h).pod: h
        for h in ({"X-Canary": "never"}, {"Cookie": "canary=never"})
    }
    assert set(pods) == {"stable-0"}
    assert send(cluster.http, host, headers={"Cookie": "canary=always"}).pod == "canary-0"
    picks = Counter(send(cluster.http, host).pod for _ in range(100))
    assert picks == {"stable-0": 80, "canary-0": 20}


def test_the_affinity_cookie_keeps_a_client_on_the_canary(cluster: Cluster) -> None:
    host = "www.example.com"
    taken = eventually(lambda: (a := send(cluster.http, host)).pod == "canary-0" and a,
                       "an answer from the canary by weight")  # fmt: skip
    cookie = taken.header("Set-Cookie")
    assert cookie.startswith("route=") and "Max-Age=172800" in cookie and "HttpOnly" in cookie
    pair = cookie.split(";", 1)[0]
    kept = {send(cluster.http, host, headers={"Cookie": pair}).pod for _ in range(10)}
    assert kept == {"canary-0"}


def test_source_ranges_by_the_clients_own_address(cluster: Cluster) -> None:
    host = "partners.example.com"
    assert cluster.served(host, source="127.0.0.7").pod == "api-0"
    assert send(cluster.http, host, source="127.0.1.1").status == 403  # not in the allow list
    assert send(cluster.http, host, source="127.0.0.66").status == 403  # denied


def test_limit_rps_answers_429_with_retry_after(cluster: Cluster) -> None:
    host = "partners.example.com"
    cluster.served(host, source="127.0.0.8")  # a bucket of its own, which this call starts
    answers = [send(cluster.http, host, source="127.0.0.9") for _ in range(8)]
    statuses = [a.status for a in answers]
    assert statuses[:5] == [200] * 5, statuses  # the burst: 1 rps times the multiplier 5
    limited = [a for a in answers if a.status == 429]
    assert limited, statuses
    assert int(limited[0].header("Retry-After")) >= 1
    assert send(cluster.http, host, source="127.0.0.10").status == 200  # another client's own


def test_basic_auth_from_an_opaque_htpasswd_secret(cluster: Cluster) -> None:
    host = "internal.example.com"
    denied = cluster.served(host)
    assert denied.status == 401
    assert denied.header("WWW-Authenticate") == 'Basic realm="Authentication Required - alice"'

    def basic(user: str, password: str) -> dict[str, str]:
        return {
            "Authorization": "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()
        }

    assert send(cluster.http, host, headers=basic("alice", "looking-glass")).status == 401
    assert send(cluster.http, host, headers=basic("alice", "wonderland")).pod == "frontend-0"


def test_external_auth_signs_in_then_passes_the_users_headers(cluster: Cluster) -> None:
    host = "dashboard.example.com"
    signin = cluster.served(host, "/reports?week=3")
    assert signin.status == 302
    location = signin.header("Location")
    assert location == "https://dashboard.example.com/oauth2/start?rd=%2Freports%3Fweek%3D3"
    path, asked = cluster.auth.asked[-1]
    assert path == "/oauth2/auth" and asked["x-original-method"] == "GET"
    assert asked["x-original-url"].endswith("dashboard.example.com/reports?week=3")

    cookie = {"Cookie": f"{SESSION}=alice-session"}
    seen = send(cluster.http, host, "/reports?week=3", headers=cookie)
    assert (seen.pod, seen.body["path"]) == ("frontend-0", "/reports?week=3")
    assert seen.body["headers"]["X-Auth-Request-User"] == ["alice"]
    assert seen.body["headers"]["X-Auth-Request-Email"] == ["alice@example.com"]


def test_external_auth_of_the_requests_own_host(cluster: Cluster) -> None:
    host = "reports.example.com"
    signin = cluster.served(host, "/weekly")
    assert signin.status == 302
    assert signin.header("Location") == f"https://{host}/oauth2/start?rd=%2Fweekly"
    # The auth request went straight to the Service the /oauth2 Ingress names, as nginx's
    # subrequest to https://$host/oauth2/auth would reach it, with the request's host.
    path, asked = cluster.auth.asked[-1]
    assert (path, asked["host"]) == ("/oauth2/auth", host)
    assert asked["x-original-url"].endswith(f"{host}/weekly")

    cookie = {"Cookie": f"{SESSION}=alice-session"}
    seen = send(cluster.http, host, "/weekly", headers=cookie)
    assert (seen.pod, seen.body["path"]) == ("frontend-0", "/weekly")
    assert seen.body["headers"]["X-Auth-Request-User"] == ["alice"]

    # The sign-in is the /oauth2 Ingress's own path: served from oauth2-proxy, asking no auth.
    before = len(cluster.auth.asked)
    start = send(cluster.http, host, "/oauth2/start?rd=%2Fweekly")
    assert (start.status, start.header("Location")) == (302, PROVIDER)
    assert [p for p, _ in cluster.auth.asked[before:]] == ["/oauth2/start?rd=%2Fweekly"]


def test_client_certificates_of_the_partner_ca_only(cluster: Cluster) -> None:
    host = "portal.example.com"
    bare = eventually(
        lambda: (a := send_tls(cluster.https, host, "/", cluster.tls())).status == 302 and a,
        "the portal's error page for a client without a certificate",
    )
    assert bare.header("Location") == "https://www.example.com/error-cert.html"
    partner = send_tls(cluster.https, host, "/", presenting(cluster.ca, cluster.partners))
    assert partner.pod == "frontend-0"
    assert partner.body["headers"]["ssl-client-verify"] == ["SUCCESS"]
    assert partner.body["headers"]["ssl-client-subject-dn"] == ["CN=partner-1"]
    assert partner.body["headers"]["ssl-client-cert"][0].startswith("-----BEGIN%20CERTIFICATE")
    stranger = CertificateAuthority.create("not a partner")
    with pytest.raises((ssl.SSLError, ConnectionError)):
        send_tls(cluster.https, host, "/", presenting(cluster.ca, stranger))


def test_grpc_through_backend_protocol_grpc(cluster: Cluster) -> None:
    target = f"127.0.0.1:{cluster.http}"
    seen = eventually(
        lambda: grpc_call.call(target, authority="grpc.example.com", metadata=[("x-fortune", "1")]),
        "the gRPC echo through the Ingress",
    )
    assert seen.fully_qualified_method == pb.ECHO
    assert seen.context is not None and seen.context.pod == "fortune-teller-0"
    assert seen.authority == "grpc.example.com" and seen.metadata("x-fortune") == ["1"]


def test_permanent_redirect(cluster: Cluster) -> None:
    moved = cluster.served("blog.example.com", "/2019/hello")
    assert moved.status == 301
    assert moved.header("Location") == "https://www.example.com/blog"


def test_a_snippet_is_refused_and_only_the_refused_and_ignored_keys_are_told(
    cluster: Cluster,
) -> None:
    expected = {
        ("legacy-headers", P + "configuration-snippet"),
        ("api", P + "proxy-connect-timeout"),
        ("uploads", P + "proxy-buffering"),
    }

    def told() -> set[tuple[str, str]]:
        return {(name, key) for name, _, message in cluster.warnings() for key in _keys(message)}

    eventually(lambda: told() >= expected, "the InvalidAnnotation Events")
    assert told() == expected
    [snippet] = [m for name, kind, m in cluster.warnings() if name == "legacy-headers"]
    assert "never run" in snippet and "not served" in snippet
    assert all(kind == "Warning" for _, kind, _ in cluster.warnings())
    assert send(cluster.http, "legacy.example.com").status == 404
    assert cluster.served("api.example.com", "/api/").pod == "api-0"  # ignored: still served


def _keys(message: str) -> list[str]:
    return [word.split("=", 1)[0] for word in message.split() if word.startswith(P)]


def test_the_migration_report_says_what_the_stack_did(cluster: Cluster, tmp_path: Path) -> None:
    # The partners' CA Secret is made by the test, not part of the set: given to the report too.
    made = tmp_path / "partner-ca.yaml"
    made.write_text(yaml.safe_dump(ca_secret(WEB, "partner-ca", cluster.partners)))
    files = [arg for f in [*sorted(DATA.glob("*.yaml")), made] for arg in ("-f", str(f))]
    argv = cluster.stack.launcher.argv("controller", "translate", *files, "--migration-report")
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=True)
    reports = {d["ingress"]: d for d in yaml.safe_load_all(done.stdout) if d}
    assert len(reports) == 15
    refused = {name for name, r in reports.items() if not r["served"]}
    assert refused == {"web/legacy-headers"}
    fates = {(name, a["key"]): a["fate"] for name, r in reports.items() for a in r["annotations"]}
    assert fates[("web/legacy-headers", P + "configuration-snippet")] == "refused"
    assert fates[("web/api", P + "proxy-connect-timeout")] == "ignored"
    assert fates[("web/internal", P + "auth-secret")] == "honoured"
    assert fates[("web/partner-portal", P + "auth-tls-secret")] == "honoured"
    # auth-url of $host: honoured, resolved to auth/oauth2-proxy (whose namespace no policy of
    # web reaches, so the report keeps the Ingress and says why).
    assert fates[("web/reports", P + "auth-url")] == "honoured"
    assert any("namespace auth" in n for n in reports["web/reports"]["notes"])
    assert "coxswainPolicies" not in reports["auth/oauth2-proxy"]
