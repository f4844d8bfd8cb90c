"""Reading ingress-nginx annotations: every catalog key judged once, values parsed as
ingress-nginx parses them, defaults and precedence as it has them.

Covers `policy.read` (layering over class defaults, the fates, the canary's inherited
behaviour), `groups` (each honoured group's values and ingress-nginx's defaults) and `values`
(booleans, numbers, redirect URLs). What the values become as routing is covered in
ingress_nginx_test.py and the golden cases.
"""

from __future__ import annotations

import pytest

from coxswain_controller.translate.ingress.annotations import catalog, values
from coxswain_controller.translate.ingress.annotations.catalog import CATALOG, PREFIX, Fate
from coxswain_controller.translate.ingress.annotations.policy import Canary, Policy, read

# A value each honoured key takes (most keys need a companion to mean anything).
SAMPLES = {
    "rewrite-target": "/",
    "use-regex": "true",
    "app-root": "/app",
    "ssl-redirect": "false",
    "force-ssl-redirect": "true",
    "permanent-redirect": "https://x.example/",
    "permanent-redirect-code": "308",
    "temporal-redirect": "https://x.example/",
    "temporal-redirect-code": "307",
    "proxy-read-timeout": "5",
    "proxy-send-timeout": "5",
    "upstream-vhost": "a.example",
    "x-forwarded-prefix": "/p",
    "backend-protocol": "GRPC",
    "canary": "true",
    "canary-weight": "5",
    "canary-weight-total": "10",
    "canary-by-header": "X-C",
    "canary-by-header-value": "yes",
    "canary-by-header-pattern": "y.*",
    "enable-cors": "true",
}


def keys(**kv: str) -> dict[str, str]:
    return {PREFIX + k.replace("_", "-"): v for k, v in kv.items()}


def fates(policy: Policy) -> dict[str, Fate]:
    return {v.key.removeprefix(PREFIX): v.fate for v in policy.verdicts}


@pytest.mark.parametrize("name", sorted(CATALOG))
def test_every_catalog_key_gets_exactly_one_verdict(name: str) -> None:
    value = SAMPLES.get(name, "x")
    policy = read({PREFIX + name: value})
    mine = [v for v in policy.verdicts if v.key == PREFIX + name]
    assert len(mine) == 1, policy.verdicts
    entry = CATALOG[name]
    if entry.fate is not Fate.HONOURED:
        assert mine[0].fate is entry.fate
    if entry.never:
        assert "never run" in mine[0].note


def test_an_ingress_with_no_annotations_asks_for_nothing() -> None:
    assert read({}) == Policy()


def test_defaults_lie_under_the_ingress_own_and_say_whose_they_are() -> None:
    policy = read(
        keys(ssl_redirect="true"),
        keys(ssl_redirect="false", proxy_buffering="on"),
        "compat",
    )
    assert policy.ssl_redirect is True
    [buffering] = policy.events()
    assert buffering.origin == "compat" and "default of IngressClass compat" in buffering.message


def test_other_prefixes_are_left_alone() -> None:
    assert read({"example.com/x": "1", "nginx.org/rewrites": "x"}).verdicts == []


@pytest.mark.parametrize(
    ("values_", "field", "expected"),
    [
        pytest.param({"use_regex": "True"}, "use_regex", True, id="go-bool-True"),
        pytest.param({"use_regex": "0"}, "use_regex", False, id="go-bool-0"),
        pytest.param({"rewrite_target": "/$2"}, "rewrite_target", "/$2", id="captures"),
        pytest.param(
            {"proxy_read_timeout": "30", "proxy_send_timeout": "90"},
            "backend_request_ms",
            90_000,
            id="larger-timeout",
        ),
        pytest.param({"backend_protocol": "grpcs"}, "protocol", "GRPCS", id="protocol-any-case"),
        pytest.param(
            {"upstream_vhost": "API.Example"}, "upstream_vhost", "api.example", id="vhost"
        ),
    ],
)
def test_values_are_read_as_ingress_nginx_reads_them(
    values_: dict[str, str], field: str, expected: object
) -> None:
    policy = read(keys(**values_))
    assert policy.served
    assert getattr(policy, field) == expected


@pytest.mark.parametrize(
    ("values_", "key", "why"),
    [
        pytest.param({"use_regex": "yes"}, "use-regex", "not true or false", id="bool"),
        pytest.param({"proxy_read_timeout": "0"}, "proxy-read-timeout", "between 1", id="zero"),
        pytest.param({"rewrite_target": "x"}, "rewrite-target", "start with '/'", id="relative"),
        pytest.param({"rewrite_target": "/a?b=1"}, "rewrite-target", "'?'", id="query"),
        pytest.param({"rewrite_target": "/$uri"}, "rewrite-target", "nginx variable", id="var"),
        pytest.param({"app_root": "/$x"}, "app-root", "nginx variable", id="app-root-var"),
        pytest.param(
            {"temporal_redirect": "https://u:p@x/"},
            "temporal-redirect",
            "credentials",
            id="userinfo",
        ),
        pytest.param(
            {"permanent_redirect": "https://x/a$request_uri"},
            "permanent-redirect",
            "prepend",
            id="path-before-request-uri",
        ),
        pytest.param(
            {"permanent_redirect": "https://x/", "permanent_redirect_code": "300"},
            "permanent-redirect-code",
            "301, 302",
            id="code",
        ),
        pytest.param(
            {"x_forwarded_prefix": "a\\r\\nInjected: 1"}, "x-forwarded-prefix", "CR, LF", id="crlf"
        ),
        pytest.param(
            {"canary": "true", "canary_weight": "101"},
            "canary-weight",
            "between 0 and 100",
            id="weight-over-total",
        ),
        pytest.param(
            {"canary": "true", "canary_by_header": "X C"},
            "canary-by-header",
            "header name",
            id="header-name",
        ),
        pytest.param(
            {"canary": "true", "canary_by_header": "X", "canary_by_header_pattern": "("},
            "canary-by-header-pattern",
            "regular expression",
            id="pattern",
        ),
        pytest.param(
            {"enable_cors": "true", "cors_allow_methods": "GET POST"},
            "cors-allow-methods",
            "token",
            id="cors-method",
        ),
        pytest.param(
            {"enable_cors": "true", "cors_max_age": "-1"},
            "cors-max-age",
            "between",
            id="cors-max-age",
        ),
    ],
)
def test_a_value_that_cannot_be_honoured_refuses_the_ingress(
    values_: dict[str, str], key: str, why: str
) -> None:
    real = {k: v.replace("\\r\\n", "\r\n") for k, v in values_.items()}
    policy = read(keys(**real))
    assert not policy.served
    refused = [v for v in policy.verdicts if v.fate is Fate.REFUSED]
    assert [v.key for v in refused] == [PREFIX + key]
    assert why in refused[0].note


def test_cors_takes_ingress_nginx_defaults_and_no_credentials_with_any_origin() -> None:
    policy = read(keys(enable_cors="true"))
    assert policy.cors == {
        "allowOrigins": ["*"],
        "allowCredentials": False,
        "allowMethods": ["GET", "PUT", "POST", "DELETE", "PATCH", "OPTIONS"],
        "allowHeaders": [
            "DNT",
            "Keep-Alive",
            "User-Agent",
            "X-Requested-With",
            "If-Modified-Since",
            "Cache-Control",
            "Content-Type",
            "Range",
            "Authorization",
        ],
        "exposeHeaders": [],
        "maxAge": 1728000,
    }
    named = read(keys(enable_cors="true", cors_allow_origin="https://a.example"))
    assert named.cors is not None and named.cors["allowCredentials"] is True


def test_cors_keys_without_enable_cors_are_ignored() -> None:
    policy = read(keys(cors_allow_origin="https://a", enable_cors="false"))
    assert policy.cors is None and fates(policy)["cors-allow-origin"] is Fate.IGNORED


@pytest.mark.parametrize(
    ("url", "body"),
    [
        pytest.param(
            "https://New.Example:8443/x",
            {
                "scheme": "https",
                "hostname": "new.example",
                "port": 8443,
                "path": {"type": "ReplaceFullPath", "replaceFullPath": "/x"},
            },
            id="absolute",
        ),
        pytest.param(
            "http://a.example",
            {
                "scheme": "http",
                "hostname": "a.example",
                "path": {"type": "ReplaceFullPath", "replaceFullPath": "/"},
            },
            id="no-path-is-root",
        ),
        pytest.param(
            "https://a.example$request_uri",
            {"scheme": "https", "hostname": "a.example"},
            id="request-uri-keeps-the-path",
        ),
        pytest.param(
            "/down",
            {"path": {"type": "ReplaceFullPath", "replaceFullPath": "/down"}},
            id="relative",
        ),
    ],
)
def test_redirect_urls(url: str, body: dict[str, object]) -> None:
    policy = read(keys(temporal_redirect=url))
    assert policy.redirect == {"statusCode": 302, **body}


def test_temporal_redirect_wins_over_permanent() -> None:
    policy = read(keys(temporal_redirect="/t", permanent_redirect="/p"))
    assert policy.redirect is not None and policy.redirect["statusCode"] == 302
    assert fates(policy)["permanent-redirect"] is Fate.IGNORED


def test_a_canary_honours_only_its_canary_keys() -> None:
    policy = read(keys(canary="true", canary_weight="10", rewrite_target="/x", auth_url="http://a"))
    assert policy.canary == Canary(weight=10)
    assert policy.served and policy.rewrite_target == ""
    assert fates(policy)["rewrite-target"] is Fate.IGNORED
    assert fates(policy)["auth-url"] is Fate.IGNORED  # the main's location serves the canary
    # nginx keeps a canary's own affinity; here the main's cookie pins either slot (sticky).
    sticky = read(keys(canary="true", affinity="cookie"))
    assert sticky.served and fates(sticky)["affinity"] is Fate.IGNORED
    assert not read(keys(canary="true", upstream_hash_by="$uri")).served  # not built yet


def test_canary_header_value_outranks_the_pattern() -> None:
    policy = read(
        keys(
            canary="true",
            canary_by_header="X-Env",
            canary_by_header_value="beta",
            canary_by_header_pattern="b.*",
        )
    )
    assert policy.canary == Canary(header="x-env", header_value="beta")
    assert fates(policy)["canary-by-header-pattern"] is Fate.IGNORED


def test_canary_keys_without_canary_true_are_ignored() -> None:
    policy = read(keys(canary_weight="50"))
    assert policy.canary is None and fates(policy)["canary-weight"] is Fate.IGNORED


def test_an_off_switch_of_a_feature_not_built_asks_for_nothing() -> None:
    policy = read(keys(ssl_passthrough="false", enable_modsecurity="false"))
    assert policy.served and set(fates(policy).values()) == {Fate.IGNORED}
    assert not read(keys(enable_modsecurity="true")).served
    assert "enable-modsecurity" in catalog.OFF_IS_HARMLESS


def test_a_refused_feature_written_at_its_nginx_default_asks_for_nothing() -> None:
    policy = read(keys(proxy_redirect_from="off", proxy_redirect_to="off", satisfy="all"))
    assert policy.served and set(fates(policy).values()) == {Fate.IGNORED}
    assert not read(keys(proxy_redirect_from="default")).served
    assert not read(keys(satisfy="any")).served


def test_ssl_passthrough_makes_every_other_key_moot() -> None:
    policy = read(keys(ssl_passthrough="true", rewrite_target="/", limit_rps="5"))
    assert policy.served and policy.passthrough
    assert fates(policy)["ssl-passthrough"] is Fate.HONOURED
    assert {fates(policy)[k] for k in ("rewrite-target", "limit-rps")} == {Fate.IGNORED}
    assert not policy.regex and policy.limits.rps == 0


def test_durations_stay_within_the_gateway_api_digits() -> None:
    assert values.duration(31_536_000) == "8760h"
    assert values.duration(3_725) == "1h2m5s"


@pytest.mark.parametrize(
    ("url", "scheme", "port", "host", "target"),
    [
        pytest.param("https://$host/oauth2/auth", "https", 443, "$host", "/oauth2/auth",
                     id="upstream-example"),
        pytest.param("http://$host/oauth2/auth", "http", 80, "$host", "/oauth2/auth", id="http"),
        pytest.param("https://$host:8443/check?a=1", "https", 8443, "$host:8443", "/check?a=1",
                     id="port-and-query"),
        pytest.param("http://$host", "http", 80, "$host", "/", id="no-path"),
    ],
)  # fmt: skip
def test_an_auth_url_of_host_is_read_for_the_hosts_own_path(
    url: str, scheme: str, port: int, host: str, target: str
) -> None:
    policy = read(keys(auth_url=url))
    spec = policy.external
    assert policy.served and spec is not None and fates(policy)["auth-url"] is Fate.HONOURED
    assert (spec.self_scheme, spec.port, spec.host, spec.target) == (scheme, port, host, target)
    assert spec.service == "" and "$host" in policy.verdicts[0].note


@pytest.mark.parametrize(
    ("url", "said"),
    [
        pytest.param("https://$host/auth?rd=$request_uri", "$request_uri besides", id="query-var"),
        pytest.param("https://$host/$1", "a $ besides", id="capture"),
        pytest.param("https://$http_host/auth", "names an nginx variable", id="http-host"),
        pytest.param("https://auth.$host/x", "names an nginx variable", id="host-part"),
        pytest.param("https://u@$host/x", "names an nginx variable", id="userinfo"),
        pytest.param("ftp://$host/x", "not an http or https URL", id="ftp"),
        pytest.param("https://$host:99999/x", "port that is not", id="bad-port"),
        pytest.param("https://$host/a b", "path a request may not carry", id="bad-path"),
    ],
)
def test_any_other_variable_in_an_auth_url_is_refused(url: str, said: str) -> None:
    policy = read(keys(auth_url=url))
    assert not policy.served and policy.external is None
    [verdict] = [v for v in policy.verdicts if v.key == PREFIX + "auth-url"]
    assert verdict.fate is Fate.REFUSED and said in verdict.note, verdict.note
