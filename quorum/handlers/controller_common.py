"""What the controller-side handlers share: is this node the controller?"""
from __future__ import annotations

from ...protocol.errors import ErrorCode


def controller_or_error(ctx):
    """(controller, NONE) on the active controller, else (None, NOT_CONTROLLER)."""
    plane = ctx.plane
    controller = plane.active_controller() if plane is not None else None
    if controller is None:
        return None, ErrorCode.NOT_CONTROLLER
    return controller, ErrorCode.NONE
