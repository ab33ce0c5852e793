"""The operator's liveness endpoint: kopf's own ``/healthz`` server with kvright's probe, on loopback.

``sweep_health`` is the verdict; the served endpoint is kopf 1.45's real health reporter (aiohttp on
127.0.0.1) running the probe handler that ``kvright.operator`` registers, against real asyncio tasks."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import kopf
import pytest
from kopf._core.engines.probing import health_reporter
from kopf._core.intents.causes import Activity
from kopf._core.intents.registries import OperatorRegistry, get_default_registry

from kvright import operator
from kvright.settings import Settings
from kvright_dev.ports import free_port

PERIOD = 60.0


async def _forever() -> None:
    await asyncio.Event().wait()


async def _crash() -> None:
    raise RuntimeError("listing answered garbage")


def _done(coro: Any) -> asyncio.Task[None]:
    """A task that has finished running ``coro`` (its exception, if any, kept)."""
    loop = asyncio.new_event_loop()
    try:
        task = loop.create_task(coro)
        with contextlib.suppress(BaseException):
            loop.run_until_complete(task)
        return task
    finally:
        loop.close()


def test_a_running_sweep_that_began_a_pass_lately_is_healthy() -> None:
    async def verdicts() -> list[str | None]:
        task = asyncio.create_task(_forever())
        try:
            return [
                operator.sweep_health(task, last_pass=1000.0, now=1000.0 + PERIOD + 599, period=PERIOD),
                # a long pass over many objects: ten periods, and the bound is at least ten minutes
                operator.sweep_health(task, last_pass=0.0, now=PERIOD + 600.0, period=PERIOD),
                operator.sweep_health(task, last_pass=0.0, now=PERIOD + 601.0, period=PERIOD),
                operator.sweep_health(task, last_pass=0.0, now=3300.0, period=300.0),  # 300 + 10 x 300
            ]
        finally:
            task.cancel()

    assert asyncio.run(verdicts()) == [
        None,
        None,
        "the periodic reconcile began no pass for 661 s (period 60 s, allowed 660 s): a pass is stuck",
        None,
    ]


def test_a_sweep_that_stopped_or_never_started_is_not_healthy() -> None:
    assert operator.sweep_health(None, 0.0, 0.0, PERIOD) == "the periodic reconcile was never started"
    crashed = _done(_crash())
    assert operator.sweep_health(crashed, 0.0, 0.0, PERIOD) == (
        "the periodic reconcile stopped: RuntimeError: listing answered garbage"
    )


@pytest.mark.parametrize(
    ("port", "address", "url"),
    [
        (8081, "0.0.0.0", "http://0.0.0.0:8081/healthz"),
        (9000, "127.0.0.1", "http://127.0.0.1:9000/healthz"),
        (8081, "::", "http://[::]:8081/healthz"),
        (0, "0.0.0.0", None),
    ],
    ids=["chart", "loopback", "ipv6", "off"],
)
def test_the_endpoint_kopf_is_given(port: int, address: str, url: str | None) -> None:
    assert operator.health_endpoint(port, address) == url


def _probes() -> list[Any]:
    """The probe handlers importing kvright.operator registered with kopf (kopf's internal registry)."""
    return list(get_default_registry()._activities.get_handlers(activity=Activity.PROBE))


def test_the_probe_is_registered_with_kopf() -> None:
    assert [str(h.id) for h in _probes()] == ["periodicReconcile"]


@contextlib.asynccontextmanager
async def _served(memo: kopf.Memo) -> AsyncIterator[str]:
    """kopf's health reporter on a free loopback port with kvright's probes; yields its URL."""
    registry = OperatorRegistry()
    for handler in _probes():
        registry._activities.append(handler)
    url = f"http://127.0.0.1:{free_port()}/healthz"
    ready = asyncio.Event()
    task = asyncio.create_task(
        health_reporter(
            url,
            memo=memo,
            indices={},
            registry=registry,
            settings=kopf.OperatorSettings(),
            ready_flag=ready,
        )
    )
    try:
        await asyncio.wait_for(ready.wait(), 10)
        yield url
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def _get(url: str) -> tuple[int, str]:
    async with (
        aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as session,
        session.get(url) as response,
    ):
        return response.status, await response.text()


def _runtime() -> operator.Runtime:
    return operator.Runtime(settings=Settings(reconcile_seconds=PERIOD), kube=None, hub=None)  # type: ignore[arg-type]


def test_healthz_answers_200_while_the_sweep_runs_and_500_once_it_stopped() -> None:
    async def scenario() -> None:
        memo = kopf.Memo()
        async with _served(memo) as url:
            assert await _get(url) == (200, '{"periodicReconcile": {"starting": true}}')
        memo.runtime = _runtime()
        memo.sweeper = asyncio.create_task(_forever())
        async with _served(memo) as url:
            status, body = await _get(url)
            assert status == 200 and '"lastPassSecondsAgo"' in body
        memo.sweeper.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await memo.sweeper
        memo.sweeper = asyncio.create_task(_crash())
        with contextlib.suppress(RuntimeError):
            await memo.sweeper
        async with _served(memo) as url:
            status, _ = await _get(url)
            assert status == 500
        memo.sweeper = asyncio.create_task(_forever())
        memo.runtime.last_sweep = time.monotonic() - PERIOD - 601
        async with _served(memo) as url:
            status, _ = await _get(url)
            assert status == 500
        memo.sweeper.cancel()

    asyncio.run(scenario())
