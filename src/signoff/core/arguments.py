"""Arguments against a tool's JSON Schema: an edit a person makes must fit the tool before it counts.

A tool declares its parameters as JSON Schema (pydantic-ai's `parameters_json_schema`, ADK's
`parameters_json_schema`). The approval keeps it, so an edit that the tool can't take (`amount: "lots"`)
is refused when it is made, from any channel, and the approval stays pending; otherwise the approval would
be used up by a call that then fails. jsonschema does the checking: the standard, well-kept validator.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import jsonschema
from jsonschema.exceptions import SchemaError, best_match


def misfit(schema: dict[str, Any] | None, args: Mapping[str, Any]) -> str | None:
    """What in `args` does not fit `schema`, in words; None when they fit (or there is no usable schema)."""
    if schema is None:
        return None
    try:
        validator = jsonschema.validators.validator_for(schema)(schema)
        validator.check_schema(schema)
    except SchemaError:  # a tool's own broken schema can't refuse anything; the tool checks when it runs
        return None
    error = best_match(validator.iter_errors(dict(args)))
    if error is None:
        return None
    where = ".".join(str(part) for part in error.absolute_path)
    return f"{where}: {error.message}" if where else error.message
