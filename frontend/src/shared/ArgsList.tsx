import { reveal } from "./visible";

/** A tool call's arguments (or a result's fields) as name/value pairs; nested values are shown as compact JSON.
 * Both are shown with hidden characters spelled out (see visible.ts): whoever asked wrote them. */
export function ArgsList({ args, testId = "args" }: { args: Record<string, unknown>; testId?: string }) {
  const entries = Object.entries(args);
  if (entries.length === 0) return <p className="args-empty">no arguments</p>;
  return (
    <dl className="args" data-testid={testId}>
      {entries.map(([name, value]) => (
        <div key={name}>
          <dt>{reveal(name)}</dt>
          <dd>{reveal(typeof value === "string" ? value : JSON.stringify(value))}</dd>
        </div>
      ))}
    </dl>
  );
}
