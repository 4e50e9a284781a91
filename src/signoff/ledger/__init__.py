"""Durable approvals: the interface, its backends, and the URL that picks one."""

from signoff.ledger.base import Ledger
from signoff.ledger.memory import MemoryLedger
from signoff.ledger.records import Change, StoredChat
from signoff.ledger.sqlite import SqliteLedger
from signoff.ledger.url import open_ledger

__all__ = ["Change", "Ledger", "MemoryLedger", "SqliteLedger", "StoredChat", "open_ledger"]
