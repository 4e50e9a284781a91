"""Channels that can decide: callbacks (sync or async) and the terminal prompt."""

from signoff.approvers.callback import Approver, ApproverFailed, call_approver
from signoff.approvers.terminal import TerminalApprover

__all__ = ["Approver", "ApproverFailed", "TerminalApprover", "call_approver"]
