"""One HTTP client for every API provider: rate limit, retries with backoff and jitter, error kinds.

Plain ``requests`` rather than vendor SDKs: the wire formats are small and stable, the kit needs the same
retry, rate and failure policy for all three providers, and tests can point every adapter at a local
server speaking the real format. The API key lives only in request headers; every error text that
leaves this module has it redacted, in any echoed form (``redact``). Every wait and every request is
bounded by the spec's limits, whatever the server sends (``transport``).
"""

from __future__ import annotations

import email.utils
import json
import logging
import math
import random
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

import requests

from milebench.http_deadline import new_session
from milebench.infer.adapter import InferenceError
from milebench.infer.api.redact import Redactor
from milebench.infer.api.transport import DeadlinePassed, TooLarge, post_json
from milebench.infer.records import FailureKind
from milebench.spec.model import ApiLimits

log = logging.getLogger(__name__)

RETRY_STATUS = frozenset({408, 409, 429, 500, 502, 503, 504, 529})
"""Answers worth retrying: timeouts, conflicts, rate limits, server errors (529: Anthropic overloaded)."""
MESSAGE_LIMIT = 500

Overflow = Callable[[int, str], bool]
"""Whether an error answer (status, message) says the input is longer than the model's context."""


def seconds(value: str, per_second: float = 1.0) -> float | None:
    """``value`` (in units of ``1 / per_second`` s) in seconds, if it is a finite number >= 0."""
    try:
        number = float(value) / per_second
    except ValueError:
        return None
    return number if math.isfinite(number) and number >= 0 else None


def retry_after(headers: Mapping[str, str], now: float | None = None) -> float | None:
    """Seconds the server asks us to wait: ``retry-after-ms``, ``retry-after`` seconds or HTTP date.

    None when absent or unusable (NaN, infinite, negative, garbage): the normal backoff applies then.
    """
    millis = headers.get("retry-after-ms")
    if millis is not None and (wait := seconds(millis, 1000)) is not None:
        return wait
    value = headers.get("retry-after")
    if value is None:
        return None
    if (wait := seconds(value)) is not None:
        return wait
    try:
        when = email.utils.parsedate_to_datetime(value).timestamp()
    except (TypeError, ValueError):
        return None
    return max(when - (time.time() if now is None else now), 0.0)


def error_message(body: bytes) -> str:
    """The provider's own error text (all three nest it as ``error.message``), else the raw body; whole,
    so that it is redacted before it is cut."""
    text = body.decode("utf-8", errors="replace")
    try:
        decoded = json.loads(text)
    except (ValueError, RecursionError):
        return text
    error = decoded.get("error") if isinstance(decoded, dict) else None
    if isinstance(error, dict) and isinstance(error.get("message"), str):
        return error["message"]
    return text


def unreachable(err: requests.ConnectionError) -> str | None:
    """Why a connection could not be made at all (refused, unknown host), else None: a reset or a proxy
    error mid-way may pass, these never do."""
    text = str(err)
    for needle, why in (
        ("Connection refused", "connection refused"),
        ("Name or service not known", "unknown host"),
        ("nodename nor servname", "unknown host"),
        ("Temporary failure in name resolution", "the host name does not resolve"),
        ("No address associated with hostname", "unknown host"),
        ("getaddrinfo failed", "unknown host"),
        ("Network is unreachable", "network unreachable"),
        ("No route to host", "no route to host"),
    ):
        if needle in text:
            return why
    return None


class Retryable(NamedTuple):
    """A failed attempt worth another try, and the wait the server asked for, if any."""

    error: InferenceError
    wait: float | None = None


class RateLimiter:
    """Spaces request starts at least ``60 / requests_per_minute`` seconds apart, across threads."""

    def __init__(
        self,
        requests_per_minute: float | None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.interval = 60.0 / requests_per_minute if requests_per_minute else 0.0
        self.clock = clock
        self.sleep = sleep
        self.next_start = float("-inf")
        self.lock = threading.Lock()

    def wait(self) -> None:
        if not self.interval:
            return
        with self.lock:
            now = self.clock()
            start = max(now, self.next_start)
            self.next_start = start + self.interval
        if start > now:
            self.sleep(start - now)


class ApiClient:
    """POSTs JSON with the spec's limits; returns the decoded body or raises ``InferenceError``.

    ``sleep`` and ``rng`` are injectable so tests can see every backoff without waiting for it.
    """

    def __init__(
        self,
        limits: ApiLimits,
        secret: str,
        sleep: Callable[[float], None] = time.sleep,
        rng: random.Random | None = None,
    ) -> None:
        self.limits = limits
        self.redactor = Redactor(secret)
        self.sleep = sleep
        self.rng = rng or random.Random()
        self.rate = RateLimiter(limits.requests_per_minute, sleep=sleep)
        self.local = threading.local()

    def session(self) -> requests.Session:
        """One session per thread: connection reuse without sharing a session across threads."""
        if not hasattr(self.local, "session"):
            self.local.session = new_session()
        return self.local.session

    def backoff(self, attempt: int) -> float:
        """Exponential backoff with equal jitter: half fixed, half random."""
        ceiling = min(self.limits.max_backoff_s, self.limits.backoff_s * 2**attempt)
        return ceiling / 2 + self.rng.uniform(0, ceiling / 2)

    def post(self, url: str, headers: dict[str, str], body: dict[str, Any], overflow: Overflow) -> Any:
        """The decoded answer body, after up to ``max_retries`` retries of retryable failures; a server
        asking for a wait beyond ``max_retry_wait_s`` fails the request at once."""
        for attempt in range(self.limits.max_retries + 1):
            self.rate.wait()
            outcome = self.attempt(url, headers, body, overflow)
            if not isinstance(outcome, Retryable):
                return outcome
            if attempt == self.limits.max_retries:
                raise outcome.error
            if outcome.wait is not None and outcome.wait > self.limits.max_retry_wait_s:
                raise self.error(
                    outcome.error.kind,
                    f"{outcome.error}; the server asks for a wait of {outcome.wait:.0f} s, beyond "
                    f"max_retry_wait_s ({self.limits.max_retry_wait_s:g} s)",
                )
            delay = self.backoff(attempt) if outcome.wait is None else outcome.wait
            log.info(
                "retry %d/%d in %.2f s after: %s", attempt + 1, self.limits.max_retries, delay, outcome.error
            )
            self.sleep(delay)
        raise AssertionError("unreachable: the last attempt returns or raises")

    def attempt(self, url: str, headers: dict[str, str], body: dict[str, Any], overflow: Overflow) -> Any:
        """One request: the decoded body, a ``Retryable`` failure, or a raised final failure."""
        limits = self.limits
        try:
            answer = post_json(
                self.session(), url, headers, body, limits.timeout_s, limits.max_response_bytes
            )
        except DeadlinePassed as err:
            return Retryable(self.error(FailureKind.TIMEOUT, str(err)))
        except TooLarge as err:
            raise self.error(FailureKind.API_ERROR, str(err)) from None
        except requests.Timeout as err:
            return Retryable(self.error(FailureKind.TIMEOUT, f"no answer within {limits.timeout_s} s: {err}"))
        except requests.ConnectionError as err:
            failure = self.error(FailureKind.API_ERROR, f"request failed: {err}")
            if unreachable(err) is not None:  # refused, unknown host: no retry makes it answer
                raise failure from None
            return Retryable(failure)
        except requests.RequestException as err:
            return Retryable(self.error(FailureKind.API_ERROR, f"request failed: {err}"))
        if answer.status == 200:
            try:
                return json.loads(answer.body)
            except (ValueError, RecursionError) as err:
                raise self.error(
                    FailureKind.API_ERROR, f"HTTP 200 with a body that is not JSON: {err}"
                ) from None
        message = self.redactor.redact(error_message(answer.body))[:MESSAGE_LIMIT]
        if overflow(answer.status, message):
            raise self.error(FailureKind.CONTEXT_OVERFLOW, f"HTTP {answer.status}: {message}")
        error = self.error(FailureKind.API_ERROR, f"HTTP {answer.status}: {message}")
        if answer.status not in RETRY_STATUS:
            raise error
        return Retryable(error, retry_after(answer.headers))

    def error(self, kind: FailureKind, message: str) -> InferenceError:
        return InferenceError(kind, self.redactor.redact(message))
