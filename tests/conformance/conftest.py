"""Fixtures for the real-vLLM conformance suite.

Real parts only: the vLLM CPU build from PyPI in its own cached venv (deploy/vllm-env.sh), tiny
randomly initialised Llama checkpoints built here with transformers and a tokenizer trained with
`tokenizers` (no hub), vLLM's own parser/config code, real `vllm.entrypoints.openai.api_server`
processes on 127.0.0.1. The tests run in kvright's venv and drive vLLM as subprocesses with the
vLLM venv's python. If the vLLM venv cannot be made, every test here FAILS with the reason.

Servers are expensive on 2 shared cores (about 30 s each, nearly all of it one process at a time
importing vLLM), so a pool keeps one server in use and hands it to every test that asks for the same
(shape, TP, KV budget); test order is arranged so consecutive tests share it. While a test waits for
its server, the pool is already starting the next test's (``get(spec, then=next)``), so two starts
overlap on two cores.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from capacity.architecture import FAMILIES

from .harness import (
    HERE,
    SHAPES,
    SUITE_PARAMETERS,
    ModelSuite,
    ServerPool,
    VllmEnv,
    build_model,
    make_vllm_env,
    model_suites_probe,
)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """A :class:`~tests.conformance.harness.ModelSuite` subclass's tests run once for each config its class
    attributes name."""
    suite = metafunc.cls
    if suite is None or not issubclass(suite, ModelSuite):
        return
    for parameter, attribute in SUITE_PARAMETERS.items():
        if parameter in metafunc.fixturenames:
            metafunc.parametrize(parameter, sorted(getattr(suite, attribute)))


@pytest.fixture(scope="session")
def vllm_env() -> VllmEnv:
    """Create or reuse the vLLM venv via deploy/vllm-env.sh (a no-op when its stamp matches)."""
    return make_vllm_env()


@pytest.fixture(scope="session")
def vllm_supports(vllm_env: VllmEnv) -> dict[str, dict[str, bool]]:
    """Which of the classes kvright reads, and of every text-generation and multimodal class vLLM registers,
    implement pipeline parallelism (``pp``) and LoRA (``lora``) in vLLM's CUDA build, for every class it can
    inspect here (vllm_supports_probe.py): asked once a session."""
    request = json.dumps(sorted(FAMILIES))
    out = vllm_env.run([str(HERE / "vllm_supports_probe.py")], stdin=request, timeout=600)
    answers = json.loads(out.strip().splitlines()[-1])
    return {name: answer for name, answer in answers.items() if None not in answer.values()}


@pytest.fixture(scope="session")
def model_suites_answers(
    request: pytest.FixtureRequest, vllm_env: VllmEnv
) -> dict[type[ModelSuite], dict[str, dict[str, Any]]]:
    """The weights probe's answers for every :class:`~tests.conformance.harness.ModelSuite` the session
    collected, by suite (its ``vllm_answers``): one probe process for the session's suites."""
    suites = {item.cls for item in request.session.items if isinstance(item, pytest.Function)}
    collected = [suite for suite in suites if suite is not None and issubclass(suite, ModelSuite)]
    return model_suites_probe(vllm_env, sorted(collected, key=lambda suite: suite.__qualname__))


@pytest.fixture(scope="session")
def tiny_models(vllm_env: VllmEnv) -> dict[str, Path]:
    """Every shape's checkpoint folder, by shape name."""
    return {name: build_model(vllm_env, shape) for name, shape in SHAPES.items()}


@pytest.fixture(scope="session")
def vllm_servers(
    vllm_env: VllmEnv, tiny_models: dict[str, Path], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServerPool]:
    pool = ServerPool(vllm_env, tiny_models, tmp_path_factory.mktemp("vllm-logs"))
    yield pool
    pool.close()
