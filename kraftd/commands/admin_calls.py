"""What the admin commands share: send a request to any of the bootstrap servers (a node that is
not the controller forwards it) and ask again while the answer says to retry."""
from __future__ import annotations

import time

RETRIED = ("REQUEST_TIMED_OUT", "NOT_CONTROLLER", "NOT_LEADER_OR_FOLLOWER")


class AdminCallError(Exception):
    pass


def servers_of(bootstrap: str) -> list[str]:
    servers = [s.strip() for s in bootstrap.split(",") if s.strip()]
    if not servers:
        raise AdminCallError("no bootstrap server given")
    return servers


def _top_level(response) -> tuple[int, str | None]:
    return response.error_code, getattr(response, "error_message", None)


def call_until_done(servers: list[str], api_key: int, request, timeout: float, *, version: int = 0,
                    client_id: str = "kraftd-admin", error_of=_top_level):
    """The first answer whose `error_of(response)` code is not a retriable one (RETRIED); raises
    AdminCallError for another error, or once `timeout` seconds have passed."""
    from kraftd.client import WireClient
    from kraftd.protocol.errors import ErrorCode

    deadline = time.monotonic() + timeout
    last = "no answer"
    while True:
        for server in servers:
            try:
                client = WireClient(server, client_id=client_id, timeout=min(timeout, 35.0))
                try:
                    response = client.request(api_key, version, request)
                finally:
                    client.close()
            except OSError as e:
                last = f"{server}: {e.strerror or e}"
                continue
            code, message = error_of(response)
            if code == 0:
                return response
            name = ErrorCode(code).name
            last = f"{name} from {server}" + (f": {message}" if message else "")
            if name not in RETRIED:
                raise AdminCallError(last)
            break
        if time.monotonic() >= deadline:
            raise AdminCallError(f"gave up after {timeout:g} s: {last}")
        time.sleep(0.5)
