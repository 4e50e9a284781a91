// A call's arguments as a person reads them: a port of src/signoff/core/argument_rows.py (`rows`), which the
// email, the review page, Slack and MCP clients use, so every channel shows a call the same way; keep the two
// alike (tests/test_argument_rows.py runs both on the same calls).
//
// - One row per top-level argument, [name, value], by name in code point order, as the call's canonical JSON
//   has them.
// - A string as it is; anything else as JSON, a nested value indented by two spaces, a line per member, its
//   keys sorted too. Numbers as JavaScript writes them (Python writes them the same way).
// - Everything the requester wrote (names, keys, strings) revealed (visible.ts), a line break inside a value
//   included; the layout's own line breaks and indentation never are, so every real line break in a value is
//   the layout's. The page wraps long lines where the screen ends (`white-space: pre-wrap`).
import { reveal } from "./visible";

export type Row = [name: string, value: string];

const INDENT = "  ";

/** Code point order, as Python sorts strings (JavaScript's own sort compares UTF-16 code units). */
function byCodePoint(a: string, b: string): number {
  const [x, y] = [Array.from(a, (c) => c.codePointAt(0) ?? 0), Array.from(b, (c) => c.codePointAt(0) ?? 0)];
  for (let i = 0; i < Math.min(x.length, y.length); i++) {
    if (x[i] !== y[i]) return x[i] - y[i];
  }
  return x.length - y.length;
}

/** The call's arguments as rows, by name. */
export function argumentRows(args: Record<string, unknown>): Row[] {
  return Object.keys(args)
    .sort(byCodePoint)
    .map((name): Row => [reveal(name), argumentValue(args[name])]);
}

/** One argument's value: a string as it is, anything else as (indented) JSON; revealed either way. */
export function argumentValue(value: unknown): string {
  return typeof value === "string" ? reveal(value) : json(value, "");
}

function json(value: unknown, indent: string): string {
  const inner = indent + INDENT;
  if (Array.isArray(value)) return nested("[", value.map((member) => json(member, inner)), "]", indent);
  if (typeof value === "object" && value !== null) {
    const record = value as Record<string, unknown>;
    const members = Object.keys(record)
      .sort(byCodePoint)
      .map((key) => `${quoted(key)}: ${json(record[key], inner)}`);
    return nested("{", members, "}", indent);
  }
  if (typeof value === "string") return quoted(value);
  return JSON.stringify(value) ?? "null"; // a number, true, false or null
}

function nested(opening: string, members: string[], closing: string, indent: string): string {
  if (members.length === 0) return opening + closing;
  const inner = indent + INDENT;
  return `${opening}\n${inner}${members.join(`,\n${inner}`)}\n${indent}${closing}`;
}

/** A string inside JSON: quoted, its quotes and backslashes escaped, and revealed instead of JSON's escapes. */
function quoted(text: string): string {
  return `"${reveal(text.replaceAll("\\", "\\\\").replaceAll('"', '\\"'))}"`;
}

/** An argument shown as a block of lines (a shell command, a diff, a file's content): `name` and each line
 * revealed, each line on its own; `more` says what a bounded block leaves out. See argumentViews.ts. */
export interface Code {
  name: string;
  kind: "shell" | "diff" | "text";
  lines: string[];
  more: string;
}

/** What a channel lays out, in order: a row, or a block. */
export type Item = Row | Code;
