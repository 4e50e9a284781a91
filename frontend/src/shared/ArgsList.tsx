import { argumentRows } from "./argumentRows";

/** A tool call's arguments (or a result's fields) as rows of name and value, as every channel shows them
 * (argumentRows.ts): hidden characters spelled out, since whoever asked wrote them, and a nested value as
 * indented JSON whose line breaks show. */
export function ArgsList({ args, testId = "args" }: { args: Record<string, unknown>; testId?: string }) {
  const rows = argumentRows(args);
  if (rows.length === 0) return <p className="args-empty">no arguments</p>;
  return (
    <dl className="args" data-testid={testId}>
      {rows.map(([name, value], index) => (
        // two names may read alike once revealed (a hidden character, and its spelling typed out)
        <div key={index}>
          <dt>{name}</dt>
          <dd>{value}</dd>
        </div>
      ))}
    </dl>
  );
}
