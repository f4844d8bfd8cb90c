"""Guarded tasks: a crash and an unexpected end are logged with the task's name; an end that is
normal for the task, and a cancellation, are not warned about."""

from __future__ import annotations

import asyncio
import logging

import pytest

from coxswain_service import tasks


async def _crash() -> None:
    raise RuntimeError("boom")


async def _return() -> None:
    return None


def _named(caplog: pytest.LogCaptureFixture, level: int) -> list[tuple[str, str]]:
    return [
        (r.getMessage(), getattr(r, "fields", {}).get("task", ""))
        for r in caplog.records
        if r.levelno == level
    ]


async def test_a_crash_is_logged_with_its_name_and_traceback(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.DEBUG, logger="coxswain_service.tasks"):
        task = tasks.spawn(_crash(), name="watch-ingress")
        await asyncio.gather(task, return_exceptions=True)
        await asyncio.sleep(0)
    assert _named(caplog, logging.ERROR) == [("background task crashed", "watch-ingress")]
    assert caplog.records[-1].exc_info is not None
    assert "watch-ingress" not in tasks.running()


async def test_an_unexpected_end_is_a_warning_but_a_one_shot_is_not(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.DEBUG, logger="coxswain_service.tasks"):
        await tasks.spawn(_return(), name="publisher")
        await tasks.spawn(_return(), name="first-publish", may_end=True)
        await asyncio.sleep(0)
    assert _named(caplog, logging.WARNING) == [("background task ended unexpectedly", "publisher")]


async def test_cancel_waits_for_every_task(caplog: pytest.LogCaptureFixture) -> None:
    started = asyncio.Event()

    async def forever() -> None:
        started.set()
        await asyncio.Event().wait()

    with caplog.at_level(logging.DEBUG, logger="coxswain_service.tasks"):
        task = tasks.spawn(forever(), name="reader")
        await started.wait()
        assert "reader" in tasks.running()
        await tasks.cancel(task)
        await asyncio.sleep(0)
    assert task.cancelled()
    assert "reader" not in tasks.running()
    assert not _named(caplog, logging.WARNING)
    assert not _named(caplog, logging.ERROR)
