// A coding agent's calls as a person judges them: a port of src/signoff/core/argument_views.py, which the
// email, the review page, Slack and MCP clients use; keep the two alike (tests/test_argument_views.py runs
// both on the same calls).
//
// Claude Code's `Bash`, `Edit`, `MultiEdit` and `Write` calls, recognised by the tool's name and the
// arguments' shape together, show as blocks: a command's lines with where it runs, an edit's unified diff, a
// new file's path and the start of its content. Any other call, or an argument a shape does not know, and the
// arguments are rows (argumentRows.ts), so a view never leaves one out.
import { argumentRows, type Code, type Item, type Row } from "./argumentRows";
import { unifiedDiff } from "./difflib";
import { reveal } from "./visible";

const CONTEXT = 3;
const WRITE_LINES = 40;
const WRITE_CHARACTERS = 2000;

type Args = Record<string, unknown>;
type Type = "string" | "number" | "boolean" | "edits";

const ONE_EDIT: Record<string, Type> = { old_string: "string", new_string: "string", replace_all: "boolean" };
const TYPES: Record<Type, (value: unknown) => boolean> = {
  string: (value) => typeof value === "string",
  number: (value) => typeof value === "number",
  boolean: (value) => typeof value === "boolean",
  edits: (value) => Array.isArray(value) && value.length > 0 && value.every((e) => fits(e, ONE_EDIT, ["old_string", "new_string"])),
};

function fits(args: unknown, types: Record<string, Type>, required: string[]): boolean {
  if (typeof args !== "object" || args === null || Array.isArray(args)) return false;
  const record = args as Args;
  return (
    required.every((name) => name in record) &&
    Object.entries(record).every(([name, value]) => Object.hasOwn(types, name) && TYPES[types[name]](value))
  );
}

/** Code points, as Python counts a string's length. */
const length = (text: string): number => Array.from(text).length;
const plural = (count: number): string => (count === 1 ? "line" : "lines");

/** `text`'s lines, split at line feeds; the one that ends the text makes no line of its own. */
function split(text: string): string[] {
  const lines = text.split("\n");
  return lines.length > 1 && lines[lines.length - 1] === "" ? lines.slice(0, -1) : lines;
}

/** The unified diff of `old`'s lines to `new`'s, each line's text revealed after its mark (argument_views.diff). */
export function diff(old: string, next: string): string[] {
  const both = old.endsWith("\n") && next.endsWith("\n");
  const [before, after] = (both ? [old.slice(0, -1), next.slice(0, -1)] : [old, next]).map((t) => t.split("\n"));
  const made = unifiedDiff(before, after, CONTEXT);
  if (made.length === 0) return before.map((line) => ` ${reveal(line)}`);
  return made.map((line) => (line.startsWith("@@") ? line : line[0] + reveal(line.slice(1))));
}

const path = (args: Args): Row => ["file_path", reveal(args.file_path as string)];

function rest(args: Args, ...shown: string[]): Row[] {
  return argumentRows(Object.fromEntries(Object.entries(args).filter(([name]) => !shown.includes(name))));
}

type View = (args: Args, context: Record<string, string>) => Item[];

function bash(args: Args, context: Record<string, string>): Item[] {
  const cwd = context.cwd;
  const name = cwd ? `command in ${reveal(cwd)}` : "command";
  const code: Code = { name, kind: "shell", lines: split(args.command as string).map(reveal), more: "" };
  return [code, ...rest(args, "command")];
}

function edit(args: Args): Item[] {
  const lines = diff(args.old_string as string, args.new_string as string);
  const code: Code = { name: "old_string → new_string", kind: "diff", lines, more: "" };
  return [path(args), code, ...rest(args, "file_path", "old_string", "new_string")];
}

function multiEdit(args: Args): Item[] {
  const edits = args.edits as Args[];
  return [
    path(args),
    ...edits.map((one, index): Code => {
      const every = one.replace_all ? ", replace_all" : "";
      const name = `edit ${index + 1} of ${edits.length}${every}: old_string → new_string`;
      return { name, kind: "diff", lines: diff(one.old_string as string, one.new_string as string), more: "" };
    }),
  ];
}

function write(args: Args): Item[] {
  const every = split(args.content as string);
  const shown: string[] = [];
  let size = 0;
  for (const line of every.slice(0, WRITE_LINES)) {
    if (size + length(line) > WRITE_CHARACTERS) {
      if (shown.length === 0) shown.push(Array.from(line).slice(0, WRITE_CHARACTERS).join("")); // its start, at least
      break;
    }
    shown.push(line);
    size += length(line);
  }
  const left = every.length - shown.length;
  let more = left ? `… ${left} more ${plural(left)} not shown` : "";
  if (shown.length > 0 && shown[shown.length - 1].length < every[shown.length - 1].length) {
    more = "… the rest of this line" + (left ? ` and ${more.slice(2)}` : " not shown");
  }
  const name = `content, ${every.length} ${plural(every.length)}`;
  return [path(args), { name, kind: "text", lines: shown.map(reveal), more }];
}

const SHAPES: Record<string, [types: Record<string, Type>, required: string[], view: View]> = {
  Bash: [
    { command: "string", description: "string", timeout: "number", run_in_background: "boolean", dangerouslyDisableSandbox: "boolean" },
    ["command"],
    bash,
  ],
  Edit: [{ file_path: "string", ...ONE_EDIT }, ["file_path", "old_string", "new_string"], edit],
  MultiEdit: [{ file_path: "string", edits: "edits" }, ["file_path", "edits"], multiEdit],
  Write: [{ file_path: "string", content: "string" }, ["file_path", "content"], write],
};

/** The call's arguments as a person judges them: a block and rows where the tool and the arguments are of a
 * shape this module knows, rows otherwise. `context` is where the call was made (`cwd`). */
export function argumentView(tool: string, args: Args, context: Record<string, string> = {}): Item[] {
  const shape = Object.hasOwn(SHAPES, tool) ? SHAPES[tool] : undefined;
  if (shape === undefined || !fits(args, shape[0], shape[1])) return argumentRows(args);
  return shape[2](args, context);
}

/** A line's class in a block: a diff's by its mark (added, removed, a hunk's header). */
export function lineClass(kind: Code["kind"], line: string): string {
  const marks: Record<string, string> = { "+": "line line-add", "-": "line line-del", "@": "line line-hunk" };
  return kind === "diff" ? (marks[line[0]] ?? "line") : "line";
}
