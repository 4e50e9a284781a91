"""The short import path: `from signoff.adk import SignoffPlugin` (needs `pip install signoff[adk]`).

It re-exports `signoff.integrations.adk`, whose `__all__` is the one list of public names.
"""

from signoff.integrations.adk import *  # noqa: F403
from signoff.integrations.adk import __all__ as __all__
