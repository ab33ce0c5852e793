"""kvright_dev.rbac_audit: the chart's rules for a ServiceAccount against the requests an audit log records
for it. Pure: rendered documents and audit lines are written out here (the shapes rbac.authorization.k8s.io/v1
and audit.k8s.io/v1 define); the real ones are compared in tests/integration/test_rbac_audit.py."""

from __future__ import annotations

import datetime
import json
from typing import Any

import pytest

from kvright_dev.rbac_audit import (
    Grant,
    Request,
    compare,
    granted,
    implied,
    parse_audit,
    service_account_user,
)

SA = ("kvr-system", "kvr")
USER = service_account_user(*SA)


def role(kind: str, name: str, rules: list[dict[str, Any]], namespace: str | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if namespace:
        meta["namespace"] = namespace
    return {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": kind, "metadata": meta, "rules": rules}


def binding(kind: str, role_kind: str, name: str, namespace: str | None = None,
            subject: tuple[str, str] = SA) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if namespace:
        meta["namespace"] = namespace
    return {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": kind, "metadata": meta,
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": role_kind, "name": name},
            "subjects": [{"kind": "ServiceAccount", "namespace": subject[0], "name": subject[1]}]}


def rule(group: str, resources: list[str], verbs: list[str]) -> dict[str, Any]:
    return {"apiGroups": [group], "resources": resources, "verbs": verbs}


def g(verb: str, resource: str, group: str = "", namespace: str | None = None) -> Grant:
    return Grant(group=group, resource=resource, verb=verb, namespace=namespace)


def req(verb: str, resource: str, group: str = "", namespace: str | None = "team", code: int = 200,
        decision: str = "allow") -> Request:
    return Request(verb=verb, group=group, resource=resource, namespace=namespace, code=code,
                   decision=decision, uri=f"/{group or 'api'}/{resource}")


def audit_line(*, user: str = USER, verb: str = "get", resource: str | None = "configmaps",
               subresource: str = "", group: str = "", namespace: str = "team", code: int = 200,
               decision: str = "allow", stage: str = "ResponseComplete") -> str:
    event: dict[str, Any] = {
        "kind": "Event", "apiVersion": "audit.k8s.io/v1", "level": "Metadata", "stage": stage,
        "auditID": "a1", "requestReceivedTimestamp": "2026-12-01T08:40:01.123456Z",
        "requestURI": f"/api/v1/namespaces/{namespace}/{resource}", "verb": verb,
        "user": {"username": user, "groups": ["system:serviceaccounts", "system:authenticated"]},
        "responseStatus": {"metadata": {}, "code": code},
        "annotations": {"authorization.k8s.io/decision": decision, "authorization.k8s.io/reason": ""},
    }
    if resource is not None:
        event["objectRef"] = {"resource": resource, "namespace": namespace, "apiGroup": group,
                              "apiVersion": "v1"}
        if subresource:
            event["objectRef"]["subresource"] = subresource
    return json.dumps(event)


# --- granted: rendered documents -> grants ------------------------------------------------------------

GRANTED_CASES = [
    (
        "clusterrole-via-clusterrolebinding-is-cluster-wide",
        [role("ClusterRole", "inv", [rule("", ["nodes"], ["list", "watch"])]),
         binding("ClusterRoleBinding", "ClusterRole", "inv")],
        {g("list", "nodes"), g("watch", "nodes")},
    ),
    (
        "role-grants-in-its-namespace-only",
        [role("Role", "wl", [rule("apps", ["deployments"], ["get"])], "team"),
         binding("RoleBinding", "Role", "wl", "team")],
        {g("get", "deployments", "apps", "team")},
    ),
    (
        "clusterrole-via-rolebinding-is-that-namespace",
        [role("ClusterRole", "wl", [rule("", ["pods"], ["list"])]),
         binding("RoleBinding", "ClusterRole", "wl", "team")],
        {g("list", "pods", namespace="team")},
    ),
    (
        "subresources-are-their-own-resource",
        [role("ClusterRole", "wl", [rule("kvright.dev", ["llmdeployments/status"], ["patch"])]),
         binding("ClusterRoleBinding", "ClusterRole", "wl")],
        {g("patch", "llmdeployments/status", "kvright.dev")},
    ),
    (
        "a-binding-to-another-service-account-grants-nothing",
        [role("ClusterRole", "wl", [rule("", ["pods"], ["list"])]),
         binding("ClusterRoleBinding", "ClusterRole", "wl", subject=("other", "kvr"))],
        set(),
    ),
    (
        "a-role-nobody-binds-grants-nothing-and-other-kinds-are-ignored",
        [role("ClusterRole", "wl", [rule("", ["pods"], ["list"])]), None,
         {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "kvr"}}],
        set(),
    ),
]


@pytest.mark.parametrize(("docs", "want"), [c[1:] for c in GRANTED_CASES], ids=[c[0] for c in GRANTED_CASES])
def test_granted(docs: list[dict[str, Any] | None], want: set[Grant]) -> None:
    assert granted(docs, service_account=SA) == want


@pytest.mark.parametrize(
    "bad_rule",
    [rule("", ["pods"], ["*"]), {**rule("", ["pods"], ["get"]), "resourceNames": ["one"]}],
    ids=["wildcard-verb", "resource-names"],
)
def test_rules_that_cannot_be_enumerated_are_refused(bad_rule: dict[str, Any]) -> None:
    docs = [role("ClusterRole", "wl", [bad_rule]), binding("ClusterRoleBinding", "ClusterRole", "wl")]
    with pytest.raises(ValueError, match="rule"):
        granted(docs, service_account=SA)


def test_a_binding_to_a_role_not_rendered_is_an_error() -> None:
    with pytest.raises(ValueError, match="do not define"):
        granted([binding("ClusterRoleBinding", "ClusterRole", "missing")], service_account=SA)


# --- parse_audit: audit lines -> the user's resource requests ---------------------------------------

PARSE_CASES = [
    ("a-get", audit_line(), [req("get", "configmaps")]),
    ("subresource-joined", audit_line(verb="patch", resource="llmdeployments", subresource="status",
                                      group="kvright.dev"),
     [req("patch", "llmdeployments/status", "kvright.dev")]),
    ("forbidden-keeps-code-and-decision", audit_line(verb="list", code=403, decision="forbid"),
     [req("list", "configmaps", code=403, decision="forbid")]),
    ("cluster-scoped-has-no-namespace", audit_line(verb="watch", resource="nodes", namespace=""),
     [req("watch", "nodes", namespace=None)]),
    ("another-user-is-skipped", audit_line(user="system:serviceaccount:kube-system:x"), []),
    ("non-resource-url-is-skipped", audit_line(resource=None), []),
    ("garbage-is-skipped", f"{{not json {USER}", []),
]


@pytest.mark.parametrize(("line", "want"), [c[1:] for c in PARSE_CASES], ids=[c[0] for c in PARSE_CASES])
def test_parse_audit(line: str, want: list[Request]) -> None:
    got = parse_audit([line], user=USER)
    assert all(r.received == datetime.datetime(2026, 12, 1, 8, 40, 1, 123456, datetime.UTC) for r in got)
    assert [(r.verb, r.group, r.resource, r.namespace, r.code, r.decision) for r in got] == [
        (r.verb, r.group, r.resource, r.namespace, r.code, r.decision) for r in want
    ]


# --- compare ------------------------------------------------------------------------------------------

GRANTS = {g("get", "configmaps", namespace="team"), g("list", "nodes"),
          g("create", "deployments", "apps", "team"), g("patch", "deployments", "apps", "team")}
ALL_USED = [req("get", "configmaps"), req("list", "nodes", namespace=None),
            req("patch", "deployments", "apps", code=201), req("patch", "deployments", "apps")]

COMPARE_CASES = [
    ("every-grant-used-every-request-granted", GRANTS, ALL_USED, {}, ("", "", "", "")),
    ("a-needless-verb-is-unused", GRANTS | {g("delete", "configmaps", namespace="team")}, ALL_USED, {},
     ("delete configmaps in team", "", "", "")),
    ("a-dropped-rule-leaves-its-request-ungranted", GRANTS - {g("get", "configmaps", namespace="team")},
     ALL_USED, {}, ("", "get /api/configmaps -> 200", "", "")),
    ("apply-that-creates-uses-create", GRANTS, [r for r in ALL_USED if r.code != 201], {},
     ("create deployments.apps in team", "", "", "")),
    ("apply-that-creates-needs-create", GRANTS - {g("create", "deployments", "apps", "team")}, ALL_USED, {},
     ("", "patch /apps/deployments -> 201", "", "")),
    ("a-role-grant-does-not-cover-another-namespace", GRANTS,
     [*ALL_USED, req("get", "configmaps", namespace="other")], {},
     ("", "get /api/configmaps -> 200", "", "")),
    ("rbac-denial-is-forbidden", GRANTS, [*ALL_USED, req("list", "secrets", code=403, decision="forbid")], {},
     ("", "", "list /api/secrets -> 403", "")),
    ("admission-403-is-refused", GRANTS, [*ALL_USED, req("patch", "deployments", "apps", code=403)], {},
     ("", "", "", "patch /apps/deployments -> 403")),
    ("a-namespaced-request-uses-the-namespaced-grant-not-the-cluster-wide-one",
     GRANTS | {g("list", "pods"), g("list", "pods", namespace="team")}, [*ALL_USED, req("list", "pods")], {},
     ("list pods cluster-wide", "", "", "")),
    ("a-cluster-wide-listing-uses-the-cluster-wide-grant",
     GRANTS | {g("list", "pods"), g("list", "pods", namespace="team")},
     [*ALL_USED, req("list", "pods"), req("list", "pods", namespace=None)], {}, ("", "", "", "")),
    ("a-request-in-a-namespace-without-a-role-uses-the-cluster-wide-grant",
     GRANTS | {g("list", "pods")}, [*ALL_USED, req("list", "pods", namespace="other")], {}, ("", "", "", "")),
    ("an-exempt-grant-is-never-unused",
     GRANTS | {g("update", "llmdeployments/finalizers", "kvright.dev")}, ALL_USED,
     {g("update", "llmdeployments/finalizers", "kvright.dev"): "admission checks it"}, ("", "", "", "")),
]


@pytest.mark.parametrize(
    ("grants", "requests", "exempt", "want"), [c[1:] for c in COMPARE_CASES],
    ids=[c[0] for c in COMPARE_CASES],
)
def test_compare(grants: set[Grant], requests: list[Request], exempt: dict[Grant, str],
                 want: tuple[str, str, str, str]) -> None:
    verdict = compare(grants, requests, exempt=exempt)
    got = (
        "; ".join(str(x) for x in verdict.unused),
        "; ".join(sorted({str(x) for x in verdict.ungranted})),
        "; ".join(str(x) for x in verdict.forbidden),
        "; ".join(str(x) for x in verdict.refused),
    )
    assert got == want
    assert verdict.ok is (want == ("", "", "", ""))


def test_explain_names_each_finding_under_its_heading() -> None:
    verdict = compare(GRANTS | {g("delete", "pods")}, [*ALL_USED, req("list", "secrets", code=403,
                                                                    decision="forbid")])
    assert verdict.explain() == (
        "granted but never used:\n  delete pods cluster-wide\n"
        "forbidden by the authorizer:\n  list /api/secrets -> 403"
    )
    assert compare(GRANTS, ALL_USED).explain() == "ok"


IMPLIED_CASES = [
    ("same-grant-cluster-wide", g("list", "pods", namespace="team"), {g("list", "pods")}, True),
    ("same-namespace", g("list", "pods", namespace="team"), {g("list", "pods", namespace="team")}, True),
    ("a-role-does-not-imply-cluster-wide", g("list", "pods"), {g("list", "pods", namespace="team")}, False),
    ("another-namespace", g("list", "pods", namespace="a"), {g("list", "pods", namespace="b")}, False),
    ("another-verb", g("watch", "pods"), {g("list", "pods")}, False),
    ("another-group", g("list", "events"), {g("list", "events", "events.k8s.io")}, False),
]


@pytest.mark.parametrize(
    ("grant", "by", "want"), [c[1:] for c in IMPLIED_CASES], ids=[c[0] for c in IMPLIED_CASES]
)
def test_implied(grant: Grant, by: set[Grant], want: bool) -> None:
    assert implied(grant, by) is want
