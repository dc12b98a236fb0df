"""Deterministic simulation of a kraftd cluster: the real `quorum/` core on memory logs, a
seeded scheduler in virtual time, a faulty network, crashes, restarts and disk loss.

Replay one seed: python -m tests.sim.run --seed N   (the failing-seed message prints this)
"""
