"""Which Python constructs a condition may use, and how a condition that uses another one is refused.

`core.expr` parses a condition with `ast.parse` and lets only a whitelist of node types through; these
tables name the rest in the error a policy author reads.
"""

from __future__ import annotations

import ast
from typing import Final

from signoff.core.errors import PolicyError

# A condition is a line of TOML, not a program. The caps keep a hostile or broken policy file from turning
# parsing or evaluation into a recursion or memory problem.
MAX_LENGTH: Final = 2000
MAX_DEPTH: Final = 48


class ExprError(PolicyError):
    """A condition that cannot be compiled. The message names the construct and where it is.

    It is a `PolicyError`, so a policy loader can prefix the source and key path and pass it on.
    """

    def __init__(self, message: str, column: int | None = None, line: int = 1) -> None:
        self.detail = message
        self.column = column
        self.line = line
        if column is None:
            where = ""
        elif line == 1:
            where = f" at column {column}"
        else:
            where = f" at line {line}, column {column}"
        super().__init__(message + where)


REJECTED: Final[dict[type[ast.AST], str]] = {
    ast.Call: "function call",
    ast.Subscript: "subscript",
    ast.Slice: "slice",
    ast.Lambda: "lambda",
    ast.ListComp: "comprehension",
    ast.SetComp: "comprehension",
    ast.DictComp: "comprehension",
    ast.GeneratorExp: "generator expression",
    ast.JoinedStr: "f-string",
    ast.FormattedValue: "f-string",
    ast.NamedExpr: "assignment expression (:=)",
    ast.Dict: "dict literal",
    ast.IfExp: "conditional expression (if/else)",
    ast.Starred: "starred expression",
    ast.Await: "await",
    ast.Yield: "yield",
    ast.YieldFrom: "yield",
}
BINOP: Final[dict[type[ast.operator], str]] = {
    ast.Add: "+",
    ast.Sub: "-",
    ast.Mult: "*",
    ast.MatMult: "@",
    ast.Div: "/",
    ast.FloorDiv: "//",
    ast.Mod: "%",
    ast.Pow: "**",
    ast.LShift: "<<",
    ast.RShift: ">>",
    ast.BitOr: "|",
    ast.BitXor: "^",
    ast.BitAnd: "&",
}
COLLECTION: Final[dict[type[ast.AST], str]] = {ast.List: "list", ast.Tuple: "tuple", ast.Set: "set"}
