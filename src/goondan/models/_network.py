"""What every network provider adapter shares: the pooled client, the retry loop and streaming.

Subclasses only map requests and responses; this class decides when to stream (whenever somebody
listens to text deltas and ``options.stream`` is on), keeps API keys out of ``repr``/errors, and
releases the pooled client on ``aclose``.
"""

from __future__ import annotations

import abc
import asyncio
import os
from collections.abc import Hashable
from typing import Any

from ..errors import ModelError
from ._base import ModelRequest, ModelResponse, TextDeltaCallback
from ._errors import ProviderError, scrub
from ._options import NetworkOptions
from ._pool import acquire, release, secret_fingerprint
from ._retry import Failure, call_with_retries, endpoint_label


class NetworkAdapter(abc.ABC):
    provider: str = ""
    # the base URL the provider's SDK uses when Model.spec.endpoint is not set (named in errors)
    default_endpoint: str = ""
    #: the variable the SDK takes its base URL from when given none (OPENAI_BASE_URL...)
    base_url_variable: str = ""
    # attributes of the SDK client a call goes through that the SDK makes (and imports) lazily: the
    # fork server touches them on a throwaway client so agent processes inherit those imports
    client_paths: tuple[str, ...] = ()

    def __init__(self, model: str, options: NetworkOptions, api_key: str | None, endpoint: str | None) -> None:
        self.model = model
        self.options = options
        self.endpoint = endpoint
        self.__api_key = api_key
        self._pool_key: Hashable = (
            self.provider,
            endpoint,
            secret_fingerprint(api_key),
            options.timeout,
            tuple(sorted((k, repr(v)) for k, v in options.extra.items())),
        )
        self._client_loop: asyncio.AbstractEventLoop | None = None
        self._client: Any = None

    def __repr__(self) -> str:
        return f"<{type(self).__name__} model={self.model!r} endpoint={self.endpoint!r}>"

    @property
    def _api_key(self) -> str | None:
        return self.__api_key

    # --- what a provider implements -----------------------------------------------------------

    @abc.abstractmethod
    def _make_client(self) -> Any: ...

    @abc.abstractmethod
    async def _close_client(self, client: Any) -> None: ...

    @abc.abstractmethod
    def _classify(self, exc: BaseException) -> Failure | None: ...

    @abc.abstractmethod
    async def _call(self, client: Any, request: ModelRequest, emit: TextDeltaCallback | None) -> ModelResponse:
        """One attempt. ``emit`` is set when the call should stream and deliver text deltas."""

    # --- the shared part ----------------------------------------------------------------------

    def _get_client(self) -> Any:
        loop = asyncio.get_running_loop()
        if self._client is None or self._client_loop is not loop:
            self._client = acquire(self._pool_key, self._make_client, self._close_client)
            self._client_loop = loop
        return self._client

    async def generate(self, request: ModelRequest) -> ModelResponse:
        client = self._get_client()
        listener = request.on_text_delta if self.options.stream else None
        delivered = False
        emit: TextDeltaCallback | None = None
        if listener is not None:
            sink = listener

            def emit(delta: str) -> None:
                nonlocal delivered
                if delta:
                    delivered = True
                    sink(delta)

        try:
            return await call_with_retries(
                lambda: self._call(client, request, emit),
                provider=self.provider,
                options=self.options,
                classify=self._classify,
                secret=self.__api_key,
                delivered=lambda: delivered,
                endpoint=self._endpoint_name(),
            )
        except ModelError:
            raise
        except Exception as exc:
            # anything else the SDK raised (an SDK/API mismatch, a bug): still one clear model error
            raise ProviderError(
                "E_MODEL_CALL",
                f"{self.provider} call to {self._endpoint_name()} failed: {type(exc).__name__}: "
                f"{scrub(str(exc), self.__api_key)}",
                provider=self.provider,
            ) from exc

    def _endpoint_name(self) -> str:
        if self.endpoint:
            return endpoint_label(self.endpoint)
        # the SDK's own variable, when set, is where the request went: naming the default endpoint
        # sent a user with OPENAI_BASE_URL at a proxy to check api.openai.com
        override = os.environ.get(self.base_url_variable, "").strip() if self.base_url_variable else ""
        if override:
            return f"{endpoint_label(override)} ({self.base_url_variable})"
        return self.default_endpoint or "its default endpoint"

    async def aclose(self) -> None:
        if self._client is not None and self._client_loop is asyncio.get_running_loop():
            self._client = None
            self._client_loop = None
            await release(self._pool_key)
