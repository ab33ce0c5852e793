"""A refused API read is never read as absence (issue 16): the feedback loop's HPA and rollout reads and the
operator's CRD probe surface a 403 (a MetricsAvailable condition naming the request; an error log naming the
missing grant) instead of acting as if there were no HPA, no rollout or no CRD. Faked: the API server, a
reader that answers 403 (or 404) to chosen paths; Prometheus, a client whose queries answer nothing."""

from __future__ import annotations

import datetime
import logging
from collections.abc import Mapping
from typing import Any

import pytest

import capacity
from kvright import conditions as cond
from kvright import feedback
from kvright.inventory import GPUNode, summarize
from kvright.observe import PrometheusClient, Sample
from kvright.operator import Kube, KubeError, Runtime
from kvright.reasons import Reason
from kvright.reconcile import Facts
from kvright.resolve import HubClient
from kvright.settings import Settings
from tests.builders import llmd

NOW = datetime.datetime(2026, 1, 1, 12, 0, tzinfo=datetime.UTC)
H100 = "NVIDIA-H100-80GB-HBM3"
HPAS = "/apis/autoscaling/v2/namespaces/ml/horizontalpodautoscalers"
DEPLOYMENT = "/apis/apps/v1/namespaces/ml/deployments/chat"


class Reader:
    """Answers ``answers[path]``: a dict (200), None (404), or an int status to raise as KubeError."""

    def __init__(self, answers: dict[str, Any]) -> None:
        self.answers = answers

    def get(self, path: str) -> dict[str, Any] | None:
        answer = self.answers.get(path)
        if isinstance(answer, int):
            raise KubeError(answer, f"GET {path}: {answer} forbidden: User cannot list this")
        return answer  # type: ignore[no-any-return]

    def deployment(self, namespace: str, name: str) -> dict[str, Any] | None:
        return self.get(f"/apis/apps/v1/namespaces/{namespace}/deployments/{name}")


class Silent(PrometheusClient):
    def __init__(self) -> None:
        super().__init__("http://127.0.0.1:9")

    def query(self, promql: str, *, at: float, headers: Mapping[str, str] | None = None) -> list[Sample]:
        return []


def facts() -> Facts:
    spec = llmd("chat", "ml").model("llama-3.1-8b").gpu(H100).tpot_ms(50).feedback("Adjust").spec()
    return Facts(
        name="chat", namespace="ml", uid="u-1", generation=1, spec=spec, current_status={},
        architecture=capacity.catalog_architecture("llama-3.1-8b"), architecture_source="Catalog",
        inventory=summarize([GPUNode(name="n0", product=H100, allocatable_gpus=8, memory_mib=None)]),
        default_image="vllm/vllm-openai:test",
    )


FEEDBACK_CASES = [
    ("hpa-list-forbidden", {HPAS: 403, DEPLOYMENT: None}, f"GET {HPAS}: 403"),
    ("deployment-read-forbidden", {HPAS: {"items": []}, DEPLOYMENT: 403}, f"GET {DEPLOYMENT}: 403"),
    ("api-server-away", {HPAS: 0, DEPLOYMENT: None}, f"GET {HPAS}: 0"),
]


@pytest.mark.parametrize(
    ("answers", "named"), [c[1:] for c in FEEDBACK_CASES], ids=[c[0] for c in FEEDBACK_CASES]
)
def test_a_refused_feedback_read_is_a_metrics_condition_not_absence(
    answers: dict[str, Any], named: str
) -> None:
    result = feedback.run(facts(), kube=Reader(answers), prometheus=Silent(), now=NOW)
    (metrics,) = [c for c in result.conditions if c.type == cond.METRICS_AVAILABLE]
    assert (metrics.status, metrics.reason) == ("Unknown", Reason.FEEDBACK_FAILED)
    assert named in metrics.message
    assert result.decision is None  # the loop does not act on a half-gathered picture


def test_no_hpa_api_and_no_deployment_are_absence() -> None:
    """404s are answers: no HPA, nothing rolling out; the loop runs (and finds no metrics here)."""
    reader = Reader({HPAS: None, DEPLOYMENT: None})
    gathered = feedback.gather(facts(), kube=reader, prometheus=Silent(), now=NOW)
    assert (gathered.hpa, gathered.rollout_in_progress) == (None, False)


class Refusing(Kube):
    def __init__(self, status: int) -> None:
        self.status = status

    def request(self, method: str, path: str, **_: Any) -> Any:
        raise KubeError(self.status, f"{method} {path}: {self.status} forbidden")


def test_a_forbidden_crd_read_raises_rather_than_answering_no_crd() -> None:
    with pytest.raises(KubeError) as raised:
        Refusing(403).has_crd("podmonitors.monitoring.coreos.com")
    assert raised.value.status == 403


@pytest.mark.parametrize(
    ("status", "level", "words"),
    [
        (403, logging.ERROR, "forbidden (the operator's RBAC rules lack this read"),
        (0, logging.WARNING, "0 forbidden"),
    ],
    ids=["forbidden-is-an-error-naming-the-rbac-rules", "other-errors-warn"],
)
def test_the_crd_probe_logs_a_refusal_with_its_reason(
    caplog: pytest.LogCaptureFixture, status: int, level: int, words: str
) -> None:
    runtime = Runtime(
        settings=Settings(metrics_port=0), kube=Refusing(status), hub=HubClient("http://127.0.0.1:9")
    )
    with caplog.at_level(logging.WARNING, logger="kvright.operator"):
        assert runtime.pod_monitor_supported() is False
    (record,) = [r for r in caplog.records if "podmonitors.monitoring.coreos.com" in r.getMessage()]
    assert record.levelno == level
    assert words in record.getMessage()
