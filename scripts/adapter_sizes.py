"""The size of each framework adapter, in lines of code: docstrings, comments and blank lines left out.

`python scripts/adapter_sizes.py` prints one line per adapter folder. A line counts when it holds a token
of code: a string that is a module's, class's or function's docstring is not code, and neither is a
comment; a line that only closes a bracket counts, as it would in any line count of code.
"""

from __future__ import annotations

import ast
import io
import itertools
import tokenize
from pathlib import Path

SRC = Path(__file__).resolve().parent.parent / "src" / "signoff"
ADAPTERS = {
    "pydantic-ai": "integrations/pydantic_ai",
    "adk": "integrations/adk",
    "openai-agents": "openai_agents",
    "langchain": "langchain",
}


def _string(statement: ast.stmt | None) -> set[int]:
    """The lines of `statement` if it is a bare string (a docstring where it stands), else none."""
    match statement:
        case ast.Expr(value=ast.Constant(value=str())):
            return set(range(statement.lineno, (statement.end_lineno or statement.lineno) + 1))
    return set()


def docstring_lines(tree: ast.Module) -> set[int]:
    """A module's, class's or function's docstring, and an attribute's (a string right after it)."""
    lines: set[int] = set()
    for node in ast.walk(tree):
        statements = getattr(node, "body", None)
        if not isinstance(statements, list) or not statements:
            continue
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            lines |= _string(statements[0])
        for earlier, later in itertools.pairwise(statements):
            lines |= _string(later) if isinstance(earlier, ast.Assign | ast.AnnAssign) else set()
    return lines


def code_lines(source: str) -> int:
    docs = docstring_lines(ast.parse(source))
    code: set[int] = set()
    skip = {
        tokenize.COMMENT,
        tokenize.NL,
        tokenize.NEWLINE,
        tokenize.INDENT,
        tokenize.DEDENT,
        tokenize.ENCODING,
    }
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type in skip or token.type == tokenize.ENDMARKER:
            continue
        code.update(line for line in range(token.start[0], token.end[0] + 1) if line not in docs)
    return len(code)


def main() -> None:
    for name, folder in ADAPTERS.items():
        files = sorted((SRC / folder).rglob("*.py"))
        if not files:
            print(f"{name:14} (not built)")
            continue
        counted = sum(code_lines(path.read_text()) for path in files)
        print(f"{name:14} {counted:4} lines of code in {len(files)} files under src/signoff/{folder}/")


if __name__ == "__main__":
    main()
