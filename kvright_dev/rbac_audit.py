"""Least privilege, checked against what the API server saw: the chart's RBAC rules for one ServiceAccount
(parsed from the rendered manifests) against the requests the API server's audit log records for it.

Pure: no IO. The integration test (tests/integration/test_rbac_audit.py) renders the chart, runs the operator
as its ServiceAccount, reads the audit log and calls:

    grants = granted(rendered_docs, service_account=("kvright-system", "kvright"))
    requests = parse_audit(audit_lines, user="system:serviceaccount:kvright-system:kvright")
    verdict = compare(grants, requests, exempt=EXEMPT)
    assert verdict.ok, verdict.explain()

A grant is one (API group, resource[/subresource], verb) in one scope: cluster-wide (a ClusterRole bound by
a ClusterRoleBinding) or one namespace (a Role, or a ClusterRole bound by a RoleBinding). The verdict fails
when

- a grant was never used by an allowed request (``unused``: the chart asks for more than the operator does;
  a request uses the narrowest grants that allow it, so a cluster-wide grant needs a request that no
  namespaced grant covers),
- an allowed request matches no grant (``ungranted``: the rules checked are not the rules that let it
  through, e.g. a copy with a rule removed),
- the authorizer refused a request (``forbidden``: a 403 with the audit annotation
  ``authorization.k8s.io/decision: forbid``), or admission refused one with 403 (``refused``).

The audit log names the verb of the request, not every verb the API server authorized for it. One case
matters here: a server-side apply (verb ``patch``) that creates its object is also authorized as
``create``; the API server answers it 201 Created, so a ``patch`` answered 201 counts as using ``create``
too. Grants that no request can show (a verb that only admission checks, such as ``update`` on an owner's
``finalizers`` for ``blockOwnerDeletion``) are listed in ``exempt`` with the reason.
"""

from __future__ import annotations

import datetime
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "Grant", "Request", "Verdict", "compare", "granted", "implied", "parse_audit", "service_account_user",
]

DECISION = "authorization.k8s.io/decision"
"""The audit annotation the authorizer writes on every request it decided (``allow`` or ``forbid``)."""


@dataclass(frozen=True, kw_only=True)
class Grant:
    """One verb on one resource, in one scope."""

    group: str
    """API group; "" is the core group."""
    resource: str
    """Plural resource name, with ``/subresource`` when it is one (``llmdeployments/status``)."""
    verb: str
    namespace: str | None = None
    """The namespace a Role (or a RoleBinding) grants it in; None: every namespace and cluster-scoped."""

    @property
    def sort_key(self) -> tuple[str, str, str, str]:
        return (self.group, self.resource, self.verb, self.namespace or "")

    def __str__(self) -> str:
        where = f" in {self.namespace}" if self.namespace else " cluster-wide"
        return f"{self.verb} {self.resource}{'.' + self.group if self.group else ''}{where}"


@dataclass(frozen=True, kw_only=True)
class Request:
    """One request as the audit log records it (Metadata level)."""

    verb: str
    group: str
    resource: str
    """Plural resource name, with ``/subresource``."""
    namespace: str | None
    code: int
    """The HTTP status answered (200 for a watch that started)."""
    decision: str
    """The authorizer's decision, ``allow`` or ``forbid`` ("" when not recorded)."""
    uri: str
    received: datetime.datetime | None = None
    """When the API server received it (``requestReceivedTimestamp``)."""

    @property
    def verbs_used(self) -> tuple[str, ...]:
        """The verbs this request shows were granted: its own, and ``create`` for an apply that created."""
        if self.verb == "patch" and self.code == 201:
            return ("patch", "create")
        return (self.verb,)

    @property
    def allowed(self) -> bool:
        return self.decision != "forbid" and self.code != 403

    def __str__(self) -> str:
        return f"{self.verb} {self.uri} -> {self.code}"


@dataclass(frozen=True, kw_only=True)
class Verdict:
    unused: tuple[Grant, ...] = ()
    """Granted, never used by an allowed request (nor exempt)."""
    ungranted: tuple[Request, ...] = ()
    """Allowed, yet no grant covers it."""
    forbidden: tuple[Request, ...] = ()
    """Refused by the authorizer (RBAC)."""
    refused: tuple[Request, ...] = ()
    """Refused with 403 after authorization (admission)."""
    used: Mapping[Grant, tuple[Request, ...]] = field(default_factory=dict)
    """Each grant with the requests that used it (for the report)."""

    @property
    def ok(self) -> bool:
        return not (self.unused or self.ungranted or self.forbidden or self.refused)

    def explain(self) -> str:
        lines: list[str] = []
        for title, items in (
            ("granted but never used", [str(g) for g in self.unused]),
            ("allowed but not granted by these rules", sorted({str(r) for r in self.ungranted})),
            ("forbidden by the authorizer", sorted({str(r) for r in self.forbidden})),
            ("refused with 403 by admission", sorted({str(r) for r in self.refused})),
        ):
            if items:
                lines.append(f"{title}:")
                lines.extend(f"  {item}" for item in items)
        return "\n".join(lines) or "ok"


def service_account_user(namespace: str, name: str) -> str:
    """The user name the API server gives a ServiceAccount's tokens."""
    return f"system:serviceaccount:{namespace}:{name}"


def _rule_grants(rule: Mapping[str, Any], namespace: str | None) -> set[Grant]:
    if rule.get("resourceNames") or rule.get("nonResourceURLs"):
        raise ValueError(f"rule {dict(rule)}: resourceNames and nonResourceURLs are not compared")
    out = set()
    for group in rule.get("apiGroups") or ():
        for resource in rule.get("resources") or ():
            for verb in rule.get("verbs") or ():
                if "*" in (group, resource, verb):
                    raise ValueError(f"rule {dict(rule)}: wildcards grant what no test can enumerate")
                out.add(Grant(group=group, resource=resource, verb=verb, namespace=namespace))
    return out


def granted(docs: Iterable[Mapping[str, Any] | None], *, service_account: tuple[str, str]) -> set[Grant]:
    """Every grant the rendered ``docs`` give the ServiceAccount ``(namespace, name)``: the rules of each
    Role and ClusterRole that a RoleBinding or ClusterRoleBinding among the docs binds to it."""
    sa_ns, sa_name = service_account
    roles: dict[tuple[str, str | None, str], list[Mapping[str, Any]]] = {}
    bindings: list[Mapping[str, Any]] = []
    for doc in docs:
        if not doc:
            continue
        kind, meta = doc.get("kind"), doc.get("metadata") or {}
        if kind == "ClusterRole":
            roles[("ClusterRole", None, meta["name"])] = list(doc.get("rules") or ())
        elif kind == "Role":
            roles[("Role", meta.get("namespace"), meta["name"])] = list(doc.get("rules") or ())
        elif kind in ("ClusterRoleBinding", "RoleBinding"):
            bindings.append(doc)
    out: set[Grant] = set()
    for binding in bindings:
        subjects = binding.get("subjects") or ()
        if not any(
            s.get("kind") == "ServiceAccount" and s.get("name") == sa_name and s.get("namespace") == sa_ns
            for s in subjects
        ):
            continue
        ref = binding["roleRef"]
        where = (binding.get("metadata") or {}).get("namespace") if binding["kind"] == "RoleBinding" else None
        key = ("ClusterRole", None, ref["name"])
        if ref["kind"] == "Role":
            key = ("Role", where, ref["name"])
        if key not in roles:
            raise ValueError(f"{binding['kind']} {binding['metadata']['name']} binds {ref['kind']} "
                             f"{ref['name']}, which the documents do not define")
        for rule in roles[key]:
            out |= _rule_grants(rule, where)
    return out


def parse_audit(lines: Iterable[str], *, user: str) -> list[Request]:
    """The resource requests of ``user`` in audit.k8s.io/v1 Event JSON lines (one per line; other
    users, non-resource URLs such as discovery, and unreadable lines are skipped). A watch appears once
    per stage logged (ResponseStarted, then ResponseComplete when it ends)."""
    out: list[Request] = []
    for line in lines:
        if f'"{user}"' not in line:  # cheap pre-filter: most lines are other users'
            continue
        try:
            event = json.loads(line)
        except ValueError:
            continue
        ref = event.get("objectRef")
        if (event.get("user") or {}).get("username") != user or not ref or not ref.get("resource"):
            continue
        resource = ref["resource"] + (f"/{ref['subresource']}" if ref.get("subresource") else "")
        out.append(
            Request(
                verb=str(event.get("verb", "")),
                group=str(ref.get("apiGroup", "")),
                resource=resource,
                namespace=ref.get("namespace") or None,
                code=int((event.get("responseStatus") or {}).get("code", 0) or 0),
                decision=str((event.get("annotations") or {}).get(DECISION, "")),
                uri=str(event.get("requestURI", "")),
                received=_timestamp(event.get("requestReceivedTimestamp")),
            )
        )
    return out


def implied(grant: Grant, by: Iterable[Grant]) -> bool:
    """Whether ``by`` grants ``grant`` already: the same verb on the same resource, cluster-wide or in
    the same namespace (a rule whose every grant is implied by the others is redundant: dropping it changes
    nothing the API server allows)."""
    return any(
        (g.group, g.resource, g.verb) == (grant.group, grant.resource, grant.verb)
        and (g.namespace is None or g.namespace == grant.namespace)
        for g in by
    )


def _timestamp(value: Any) -> datetime.datetime | None:
    try:
        return datetime.datetime.fromisoformat(str(value)) if value else None
    except ValueError:
        return None


def _covers(grant: Grant, request: Request, verb: str) -> bool:
    return (
        grant.group == request.group
        and grant.resource == request.resource
        and grant.verb == verb
        and (grant.namespace is None or grant.namespace == request.namespace)
    )


def compare(
    grants: Iterable[Grant], requests: Iterable[Request], *, exempt: Mapping[Grant, str] | None = None
) -> Verdict:
    """The verdict on ``grants`` given the ``requests`` made (see the module docstring). ``exempt`` maps
    a grant (namespace ignored) to the reason no request can show its use; such a grant is never
    ``unused``."""
    grants = sorted(set(grants), key=lambda g: g.sort_key)
    exempt_keys = {(g.group, g.resource, g.verb) for g in (exempt or {})}
    used: dict[Grant, list[Request]] = {g: [] for g in grants}
    ungranted: list[Request] = []
    forbidden: list[Request] = []
    refused: list[Request] = []
    for request in requests:
        if request.decision == "forbid":
            forbidden.append(request)
            continue
        if request.code == 403:
            refused.append(request)
            continue
        for verb in request.verbs_used:
            covering = [g for g in grants if _covers(g, request, verb)]
            if not covering:
                ungranted.append(request)
            # The narrowest grant that allows it is the one it needs: a cluster-wide grant is used only by
            # a request no namespaced grant covers (a cluster-wide listing, another namespace).
            narrow = [g for g in covering if g.namespace is not None]
            for g in narrow or covering:
                used[g].append(request)
    unused = tuple(
        g for g in grants if not used[g] and (g.group, g.resource, g.verb) not in exempt_keys
    )
    return Verdict(
        unused=unused,
        ungranted=tuple(ungranted),
        forbidden=tuple(forbidden),
        refused=tuple(refused),
        used={g: tuple(r) for g, r in used.items() if r},
    )
