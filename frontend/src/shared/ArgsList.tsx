/** A tool call's arguments (or a result's fields) as name/value pairs; nested values are shown as compact JSON. */
export function ArgsList({ args, testId = "args" }: { args: Record<string, unknown>; testId?: string }) {
  const entries = Object.entries(args);
  if (entries.length === 0) return <p className="args-empty">no arguments</p>;
  return (
    <dl className="args" data-testid={testId}>
      {entries.map(([name, value]) => (
        <div key={name}>
          <dt>{name}</dt>
          <dd>{typeof value === "string" ? value : JSON.stringify(value)}</dd>
        </div>
      ))}
    </dl>
  );
}
