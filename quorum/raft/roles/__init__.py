"""One class per role (KIP-595 plus KIP-996's Prospective), as Kafka's EpochState classes: what
the role holds, when the group's timer fires and what it does then, and how the role reacts to
each message (base.py lists them). The durable part (epoch, leader, vote) is the group's
ElectionState; the role changes only through the group's `become_*` methods."""
from .base import Role
from .deleted import Deleted
from .election import Candidate, ElectionRound, Prospective
from .follower import Follower
from .leader import Leader
from .resigned import Resigned
from .unattached import Unattached, Voted, Waiting

__all__ = ["Candidate", "Deleted", "ElectionRound", "Follower", "Leader", "Prospective", "Resigned", "Role",
           "Unattached", "Voted", "Waiting"]
