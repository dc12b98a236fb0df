"""ApiVersions: the version ranges we serve."""
from __future__ import annotations

from ...protocol.api import API_BY_KEY
from ...protocol.messages import ApiVersionsResponse

from ..outcomes import Respond


def supported_api_versions() -> list:
    return [
        ApiVersionsResponse.ApiVersion(api_key=key, min_version=spec.min_version, max_version=spec.max_version)
        for key, spec in sorted(API_BY_KEY.items())
    ]


def handle(ctx, header, request, now_ms, peer):
    return Respond(ApiVersionsResponse(error_code=0, api_keys=supported_api_versions(), throttle_time_ms=0))
