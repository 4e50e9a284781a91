"""The short import path: `from signoff.pydantic_ai import ApprovalToolset` replaces the 0.8.0 import.

It re-exports `signoff.integrations.pydantic_ai`, whose `__all__` is the one list of public names.
"""

from signoff.integrations.pydantic_ai import *  # noqa: F403
from signoff.integrations.pydantic_ai import __all__ as __all__
