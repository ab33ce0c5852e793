"""Every condition and event reason kvright writes, declared once.

CamelCase, specific (``KVCachePreempting``, not ``Failed``), stable: users alert and filter on them.
Conditions (``kvright.conditions``), events, the planner seam (``kvright.reconcile``), the resolver, the
inventory, the Prometheus observation (``kvright.observation``), the control law (``kvright.control``)
and the feedback seam (``kvright.feedback``) all take their reasons from here; a test checks that no
product module spells a reason of its own. Pure: constants only.
"""

from __future__ import annotations

from typing import Final

__all__ = ["Reason"]


class Reason:
    """CamelCase reasons, shared by conditions and events. Each says what happened, specifically."""

    # PlanFeasible
    PLANNED: Final = "Planned"
    INVALID_SPEC: Final = "InvalidSpec"
    ARCHITECTURE_UNKNOWN: Final = "ArchitectureUnknown"
    ARCHITECTURE_INVALID: Final = "ArchitectureInvalid"
    REMOTE_CODE_NOT_TRUSTED: Final = "RemoteCodeNotTrusted"
    """vLLM reads the model's config only with the repository's own code and model.trustRemoteCode is off."""
    CONFIG_MAP_MISSING: Final = "ConfigMapMissing"
    HUB_FETCH_FAILED: Final = "HubFetchFailed"
    TOKEN_SECRET_MISSING: Final = "TokenSecretMissing"
    GPU_PRODUCT_AMBIGUOUS: Final = "GPUProductAmbiguous"
    GPU_PRODUCT_UNKNOWN: Final = "GPUProductUnknown"
    NO_GPU_NODES: Final = "NoGPUNodes"
    TENSOR_PARALLEL_INVALID: Final = "TensorParallelInvalid"
    INFEASIBLE: Final = "Infeasible"
    LEADER_WORKER_SET_MISSING: Final = "LeaderWorkerSetMissing"
    """A replica must span nodes and the cluster does not serve the LeaderWorkerSet API."""
    PLAN_INPUT_INVALID: Final = "PlanInputInvalid"
    # Deployed
    APPLIED: Final = "Applied"
    APPLY_FAILED: Final = "ApplyFailed"
    NOT_PLANNED: Final = "NotPlanned"
    ROLLING_OUT: Final = "RollingOut"
    ROLLOUT_STALLED: Final = "RolloutStalled"
    KEPT_LAST_PLAN: Final = "KeptLastPlan"
    # Ready
    REPLICAS_READY: Final = "ReplicasReady"
    REPLICAS_NOT_READY: Final = "ReplicasNotReady"
    SCALED_TO_ZERO: Final = "ScaledToZero"
    PENDING: Final = "Pending"
    # WeightsReady (spec.model.source: where the weights come from)
    WEIGHTS_AVAILABLE: Final = "WeightsAvailable"
    WEIGHTS_CLAIM_MISSING: Final = "WeightsClaimMissing"
    """The PersistentVolumeClaim the weights are on (source PVC, or the cache's) does not exist."""
    MODEL_CACHE_FILLING: Final = "ModelCacheFilling"
    """The cache's download Job has not finished: the workload waits (not created, not rolled)."""
    MODEL_CACHE_FILL_FAILED: Final = "ModelCacheFillFailed"
    WEIGHTS_IMAGE_PULL_FAILED: Final = "WeightsImagePullFailed"
    """A vLLM pod's kubelet cannot pull the image volume holding the weights."""
    WEIGHTS_STATUS_UNKNOWN: Final = "WeightsStatusUnknown"
    """Reading the claim or the download Job failed (the API server away, a missing grant)."""
    # events only
    PLAN_CHANGED: Final = "PlanChanged"
    GPU_PRODUCT_CHOSEN: Final = "GPUProductChosen"
    REPLICAS_CAPPED: Final = "ReplicasCapped"

    # MetricsAvailable (the Prometheus observation)
    METRICS_FOUND: Final = "MetricsFound"
    PROMETHEUS_UNREACHABLE: Final = "PrometheusUnreachable"
    PROMETHEUS_QUERY_FAILED: Final = "PrometheusQueryFailed"
    NO_SERIES: Final = "NoSeries"
    TPOT_METRIC_MISSING: Final = "TPOTMetricMissing"
    TPOT_INVALID: Final = "TPOTInvalid"
    FEEDBACK_OFF: Final = "FeedbackOff"
    PROMETHEUS_NOT_CONFIGURED: Final = "PrometheusNotConfigured"
    FEEDBACK_FAILED: Final = "FeedbackFailed"
    # SLOMet
    NOT_MEASURED: Final = "NotMeasured"
    TPOT_WITHIN_SLO: Final = "TPOTWithinSLO"
    TPOT_ABOVE_SLO: Final = "TPOTAboveSLO"
    TTFT_ABOVE_SLO: Final = "TTFTAboveSLO"
    # status.calibration notes and feedback events
    NO_PLAN_YET: Final = "NoPlanYet"
    KV_CAPACITY_MISMATCH: Final = "KVCapacityMismatch"
    PREFIX_CACHE_BELOW_PLAN: Final = "PrefixCacheBelowPlan"
    REPLICAS_RECOMMENDED: Final = "ReplicasRecommended"

    # The control law's decisions (status.calibration.lastDecision.reason, and events for applied moves)
    ROLLOUT_IN_PROGRESS: Final = "RolloutInProgress"
    INSUFFICIENT_SAMPLES: Final = "InsufficientSamples"
    NO_TRAFFIC: Final = "NoTraffic"
    TPOT_UNAVAILABLE: Final = "TPOTUnavailable"
    COOLDOWN: Final = "Cooldown"
    REPLAN_FP8_KV_CACHE: Final = "ReplanFP8KVCache"
    REPLAN_LARGER_TP: Final = "ReplanLargerTP"
    SLO_UNATTAINABLE: Final = "SLOUnattainable"
    KV_CACHE_PREEMPTING: Final = "KVCachePreempting"
    QUEUE_WITH_HEADROOM: Final = "QueueWithHeadroom"
    REQUESTS_WAITING: Final = "RequestsWaiting"
    DEMAND_RISING: Final = "DemandRising"
    REPLICA_CEILING: Final = "ReplicaCeiling"
    TPOT_WELL_BELOW_SLO: Final = "TPOTWellBelowSLO"
    SLO_MET: Final = "SLOMet"
