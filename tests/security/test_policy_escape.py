"""A client can make verification stricter, never escape the policy an operator bound it to.

Issue 10, item 1 and the metadata-depth part of item 8, against real gateways (uvicorn)
driven by the official ``openai`` SDK. The scenario is the docs' own worked example
(docs/policies.md, "Block secrets in every answer of one tenant"): ``no-secrets`` is
matched to tenant ``acme`` and blocks any answer naming a password. Before the fix,
each of these delivered the blocked answer to an ``acme`` key:

- ``x-verity-policy: grounding`` (header selection replaced the matched policy);
- ``metadata: {verity: grounding}`` (grounding's higher priority won the match);
- ``x-verity-profile: compliance`` (a header-matched policy, priority 20, won).

and a policy selected by header ignored its own ``match.tenants``. Metadata nested
1,020 levels deep was a 500 (RecursionError while matching).
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from serving import ServedGateway, ServedUpstream

SHIPPED = Path(__file__).resolve().parents[2] / "policies"
SECRET_ANSWER = "Sure: the admin password is hunter2."
USER = [{"role": "user", "content": "What is the admin password?"}]
REPLY = {"x-mock-reply": SECRET_ANSWER}
Client = Callable[..., openai.OpenAI]

# Verbatim from docs/policies.md, "Worked examples".
NO_SECRETS = """\
name: no-secrets
mode: inline
match:
  tenants: [acme]
layers:
  - name: keyword
    config:
      block: [password, "/\\\\bAKIA[0-9A-Z]{16}\\\\b/"]
actions:
  fail: {type: block, style: error, status: 422}
"""

# A selectable policy for one model only.
SMALL_ONLY = """\
name: small-only
mode: inline
allow_header_selection: true
match:
  models: [scripted-small]
  metadata: {verity: small}
layers: [{name: length, config: {max_chars: 100000}}]
"""

# A selectable policy meant for tenant beta only.
BETA_ONLY = """\
name: beta-only
mode: inline
allow_header_selection: true
match:
  tenants: [beta]
  metadata: {verity: beta}
layers: [{name: length, config: {max_chars: 100000}}]
"""

ACME_KEY = "gw-acme-app-0001"          # an ordinary acme key (no selection granted)
ACME_ADMIN_KEY = "gw-acme-admin-0002"  # acme, granted policy selection
GAMMA_KEY = "gw-gamma-app-0003"        # tenant without a binding, granted selection
PLAIN_KEY = "gw-gamma-plain-0004"      # tenant without a binding, not granted
BETA_KEY = "gw-beta-app-0005"          # the tenant beta-only is offered to


def _policies(directory: Path, *extra: tuple[str, str]) -> Path:
    for path in SHIPPED.glob("*.yaml"):
        shutil.copy(path, directory / path.name)
    for name, text in extra:
        (directory / name).write_text(text, encoding="utf-8")
    return directory


@pytest.fixture(scope="module")
def keyed(make_gateway: Callable[..., ServedGateway],
          tmp_path_factory: pytest.TempPathFactory) -> ServedGateway:
    """Gateway-keys mode, the shipped policies plus the docs' tenant binding."""
    policies = _policies(tmp_path_factory.mktemp("keyed-policies"),
                         ("no-secrets.yaml", NO_SECRETS), ("beta-only.yaml", BETA_ONLY))
    return make_gateway(policies_dir=str(policies), auth={"keys": [
        {"name": "acme-app", "tenant": "acme", "key": ACME_KEY},
        {"name": "acme-admin", "tenant": "acme", "key": ACME_ADMIN_KEY,
         "policy_selection": True},
        {"name": "gamma-app", "tenant": "gamma", "key": GAMMA_KEY, "policy_selection": True},
        {"name": "gamma-plain", "tenant": "gamma", "key": PLAIN_KEY},
        {"name": "beta-app", "tenant": "beta", "key": BETA_KEY, "policy_selection": True},
    ]})


@pytest.fixture(scope="module")
def forward(make_gateway: Callable[..., ServedGateway],
            tmp_path_factory: pytest.TempPathFactory) -> ServedGateway:
    """Forward mode (no gateway keys): shipped policies plus a model binding."""
    bound = NO_SECRETS.replace("name: no-secrets", "name: no-secrets-large").replace(
        "tenants: [acme]", "models: [scripted-large]") + "allow_upgrade_to: [large-strict]\n"
    stricter = bound.replace("name: no-secrets-large", "name: large-strict").replace(
        "allow_upgrade_to: [large-strict]", "allow_header_selection: true").replace(
        "models: [scripted-large]", "metadata: {verity: large-strict}").replace(
        "layers:\n", "layers:\n  - {name: length, config: {max_chars: 2000}}\n"
    ) + "decision: {marginal_at: 0.95}\n"  # any failing layer fails (not 'marginal')
    policies = _policies(tmp_path_factory.mktemp("forward-policies"),
                         ("no-secrets-large.yaml", bound), ("large-strict.yaml", stricter),
                         ("small-only.yaml", SMALL_ONLY))
    return make_gateway(policies_dir=str(policies))


def _create(client: openai.OpenAI, *, model: str = "scripted-small",
            headers: dict[str, str] | None = None, metadata: dict[str, Any] | None = None,
            stream: bool = False) -> Any:
    kwargs: dict[str, Any] = {"model": model, "messages": USER,
                              "extra_headers": {**REPLY, **(headers or {})}}
    if metadata is not None:
        kwargs["extra_body"] = {"metadata": metadata}
    if stream:
        return "".join(c.choices[0].delta.content or "" for c in
                       client.chat.completions.create(stream=True, **kwargs) if c.choices)
    return client.chat.completions.with_raw_response.create(**kwargs)


ESCAPES = {
    "x-verity-policy": {"headers": {"x-verity-policy": "grounding"}},
    "metadata": {"metadata": {"verity": "grounding"}},
    "x-verity-profile": {"headers": {"x-verity-profile": "compliance"}},
}


def _refused(call: Callable[[], Any], code: str) -> openai.APIStatusError:
    with pytest.raises(openai.APIStatusError) as info:
        call()
    err = info.value
    assert err.status_code == 403, err
    assert isinstance(err.body, dict) and set(err.body) == {"message", "type", "param", "code"}
    assert (err.body["type"], err.body["code"]) == ("permission_denied", code), err.body
    assert "hunter2" not in str(err.body)
    return err


# ---- the binding itself works (it did before the fix too) ---------------------------------


def test_the_docs_example_blocks_the_secret_for_acme(keyed: ServedGateway, make_client: Client,
                                                     upstream: ServedUpstream) -> None:
    for key in (ACME_KEY, ACME_ADMIN_KEY):
        with pytest.raises(openai.UnprocessableEntityError) as info:
            _create(make_client(keyed, api_key=key))
        assert "hunter2" not in str(info.value.body)


# ---- the attack: each form, for an ordinary key and for one granted selection -------------


@pytest.mark.parametrize("form", sorted(ESCAPES))
def test_an_ordinary_acme_key_cannot_escape_the_binding(
        keyed: ServedGateway, make_client: Client, upstream: ServedUpstream,
        form: str) -> None:
    client = make_client(keyed, api_key=ACME_KEY)
    err = _refused(lambda: _create(client, **ESCAPES[form]), "policy_selection_not_allowed")
    assert "acme-app" in err.body["message"]  # type: ignore[index]
    assert upstream.requests == []  # refused before the upstream is called (and bills)


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("form", sorted(ESCAPES))
def test_a_key_granted_selection_still_cannot_escape_the_binding(
        keyed: ServedGateway, make_client: Client, upstream: ServedUpstream,
        form: str, stream: bool) -> None:
    client = make_client(keyed, api_key=ACME_ADMIN_KEY)
    err = _refused(lambda: _create(client, stream=stream, **ESCAPES[form]), "policy_enforced")
    message = err.body["message"]  # type: ignore[index]
    assert "no-secrets" in message and "enforce" in message
    assert upstream.requests == []


def test_selecting_the_bound_policy_itself_is_no_escape(
        keyed: ServedGateway, make_client: Client, upstream: ServedUpstream) -> None:
    # no-secrets does not allow header selection: asking for it by name is the usual 403.
    client = make_client(keyed, api_key=ACME_ADMIN_KEY)
    _refused(lambda: _create(client, headers={"x-verity-policy": "no-secrets"}),
             "policy_not_allowed")


# ---- a selectable policy is offered only where its match allows -----------------------------


def test_header_selection_respects_the_policys_own_tenants(
        keyed: ServedGateway, make_client: Client, upstream: ServedUpstream) -> None:
    # Not offered to gamma's tenant: answered exactly like a name that does not exist,
    # so one tenant cannot probe the policy names of another.
    client = make_client(keyed, api_key=GAMMA_KEY)
    errors = []
    for name in ("beta-only", "no-such-policy"):
        with pytest.raises(openai.BadRequestError) as info:
            _create(client, headers={"x-verity-policy": name})
        body = info.value.body
        assert isinstance(body, dict) and body["code"] == "unknown_policy"
        assert body["param"] == "x-verity-policy"
        errors.append(body["message"].replace(repr(name), "NAME"))
    assert errors[0] == errors[1]
    assert "grounding" in errors[0] and "beta-only" not in errors[0]
    assert upstream.requests == []
    raw = _create(make_client(keyed, api_key=BETA_KEY), headers={"x-verity-policy": "beta-only"})
    assert raw.headers["x-verity-policy"] == "beta-only"


def test_header_selection_respects_the_policys_own_models(
        forward: ServedGateway, make_client: Client, upstream: ServedUpstream) -> None:
    client = make_client(forward)
    err = _refused(lambda: _create(client, model="scripted-large",
                                   headers={"x-verity-policy": "small-only"}),
                   "policy_not_offered")
    assert "small-only" in err.body["message"]  # type: ignore[index]
    assert upstream.requests == []
    raw = _create(client, headers={"x-verity-policy": "small-only"})
    assert raw.headers["x-verity-policy"] == "small-only"


# ---- selection is a per-key grant in gateway-keys mode ---------------------------------------


@pytest.mark.parametrize("form", sorted(ESCAPES))
def test_a_key_not_granted_selection_is_refused_not_silently_downgraded(
        keyed: ServedGateway, make_client: Client, upstream: ServedUpstream,
        form: str) -> None:
    client = make_client(keyed, api_key=PLAIN_KEY)
    _refused(lambda: _create(client, **ESCAPES[form]), "policy_selection_not_allowed")
    assert upstream.requests == []


def test_a_granted_key_without_a_binding_may_opt_in(
        keyed: ServedGateway, make_client: Client, upstream: ServedUpstream) -> None:
    client = make_client(keyed, api_key=GAMMA_KEY)
    for how in ({"headers": {"x-verity-policy": "grounding"}},
                {"metadata": {"verity": "grounding"}}):
        raw = _create(client, **how)
        assert raw.headers["x-verity-policy"] == "grounding"
        assert raw.headers["x-verity-mode"] == "inline"
    raw = _create(client, headers={"x-verity-profile": "compliance"})
    assert raw.headers["x-verity-policy"] == "compliance"


def test_without_a_choice_every_key_gets_what_the_operator_assigned(
        keyed: ServedGateway, make_client: Client, upstream: ServedUpstream) -> None:
    for key in (PLAIN_KEY, GAMMA_KEY):
        raw = _create(make_client(keyed, api_key=key))
        assert raw.headers["x-verity-policy"] == "default"
        assert raw.parse().choices[0].message.content == SECRET_ANSWER


# ---- forward mode: no identity, so no tenant binding; model bindings still hold ------------


@pytest.mark.parametrize("form", sorted(ESCAPES))
def test_forward_mode_model_binding_cannot_be_escaped(
        forward: ServedGateway, make_client: Client, upstream: ServedUpstream,
        form: str) -> None:
    client = make_client(forward)
    err = _refused(lambda: _create(client, model="scripted-large", **ESCAPES[form]),
                   "policy_enforced")
    assert "no-secrets-large" in err.body["message"]  # type: ignore[index]
    assert upstream.requests == []


def test_a_binding_lets_clients_upgrade_only_to_what_the_operator_listed(
        forward: ServedGateway, make_client: Client, upstream: ServedUpstream) -> None:
    # no-secrets-large: allow_upgrade_to: [large-strict] (its layers and one more).
    client = make_client(forward)
    for how in ({"headers": {"x-verity-policy": "large-strict"}},
                {"metadata": {"verity": "large-strict"}}):
        with pytest.raises(openai.UnprocessableEntityError) as info:
            _create(client, model="scripted-large", **how)
        assert info.value.response.headers["x-verity-policy"] == "large-strict"
    err = _refused(lambda: _create(client, model="scripted-large",
                                   headers={"x-verity-policy": "grounding"}),
                   "policy_enforced")
    assert "allow_upgrade_to): large-strict" in err.body["message"]  # type: ignore[index]


def test_forward_mode_clients_may_opt_in_over_the_shadow_default(
        forward: ServedGateway, make_client: Client, upstream: ServedUpstream) -> None:
    # The README quick start and `gateway demo`: the shipped default is shadow, and a
    # client asking for inline verification is the intended use.
    client = make_client(forward)
    assert _create(client).headers["x-verity-policy"] == "default"
    for how in ({"headers": {"x-verity-policy": "strict-rag"}},
                {"metadata": {"verity": "grounding"}}):
        raw = _create(client, **how)
        assert raw.headers["x-verity-mode"] == "inline"


# ---- item 8: metadata depth and size are bounded -------------------------------------------


def _nested(depth: int) -> bytes:
    value = '"grounding"'
    for _ in range(depth - 1):
        value = '{"v":' + value + "}"
    return ('{"model":"scripted-small","messages":[{"role":"user","content":"hi"}],'
            '"metadata":{"verity":' + value + "}}").encode()


@pytest.mark.parametrize("body, code", [
    (_nested(1020), "metadata_too_deep"),
    (_nested(40), "metadata_too_deep"),
    (('{"model":"scripted-small","messages":[{"role":"user","content":"hi"}],"metadata":{'
      + ",".join(f'"k{i}":{i}' for i in range(5000)) + "}}").encode(), "metadata_too_large"),
])
def test_hostile_metadata_is_a_400_not_a_500(forward: ServedGateway, upstream: ServedUpstream,
                                             body: bytes, code: str) -> None:
    with httpx.Client() as http:
        r = http.post(forward.base_url + "/chat/completions", content=body,
                      headers={"content-type": "application/json",
                               "authorization": "Bearer sk-x"})
    assert r.status_code == 400, r.text
    assert r.json() == {"error": {"message": r.json()["error"]["message"],
                                  "type": "invalid_request_error", "param": "metadata",
                                  "code": code}}
    assert upstream.requests == []


def test_ordinary_nested_metadata_still_selects(forward: ServedGateway, make_client: Client,
                                                upstream: ServedUpstream) -> None:
    client = make_client(forward)
    raw = _create(client, metadata={"verity": "grounding", "trace": {"a": {"b": [1, 2]}}})
    assert raw.headers["x-verity-policy"] == "grounding"
