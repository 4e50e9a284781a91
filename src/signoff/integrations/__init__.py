"""Adapters that put the gate in front of the tool calls of agent frameworks."""
