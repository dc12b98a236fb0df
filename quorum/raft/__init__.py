"""KIP-595 Raft, one group per partition, sans-IO.

`Replication` (replication.py) drives every group a node hosts: it is fed requests, responses,
unreachable peers and `poll(now_ms)`, and hands back what to persist and what to send; it is
each group's environment (the GroupEnv of env.py) and composes one part per job. Each group
(group.py) holds one role object (roles/), dispatches its timer and messages to it, and changes
role only through the table in transitions.py. Nothing here touches a socket, a thread or a clock.
"""
