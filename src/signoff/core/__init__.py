"""Sans-I/O core: calls, decisions, policy, the approval state machine, grants and the audit chain.

Nothing here performs I/O or imports anything above it, so every rule can be tested as plain functions.
"""
