"""A codec bug planted on purpose, so the simulation can show that it finds one (issue 22).

Never set in production: the simulation turns it on for a run when its BugSwitches say
`codec_drops_diverging_epoch`. While on, Fetch answers are encoded as if the DivergingEpoch
field did not exist: a follower whose log diverged from its leader's is never told to truncate.
Passed as Python objects, messages would carry the field anyway; only the real wire format
shows the bug.
"""
from __future__ import annotations

import copy

FETCH = 1
drop_diverging_epoch = False


def as_encoded(api_key: int, response):
    """The response as the buggy encoder writes it (the caller's object is left alone)."""
    if not drop_diverging_epoch or api_key != FETCH:
        return response
    response = copy.copy(response)
    response.responses = [copy.copy(t) for t in response.responses]
    for topic in response.responses:
        topic.partitions = [copy.copy(p) for p in topic.partitions]
        for p in topic.partitions:
            p.diverging_epoch = type(p.diverging_epoch)(epoch=-1, end_offset=-1)
    return response
