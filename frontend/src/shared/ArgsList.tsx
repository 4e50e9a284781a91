import { argumentRows, type Code } from "./argumentRows";
import { argumentView, lineClass } from "./argumentViews";

/** A tool call's arguments (or a result's fields) as rows of name and value, as every channel shows them
 * (argumentRows.ts): hidden characters spelled out, since whoever asked wrote them, and a nested value as
 * indented JSON whose line breaks show. With the call's `tool`, a call of a shape argumentViews.ts knows (a
 * shell command, a file edit) shows as blocks: its command, its diff, where `context.cwd` says it runs.
 * src/signoff/server/review_page.py renders the same markup for the email review page. */
export function ArgsList({
  args,
  tool,
  context,
  testId = "args",
}: {
  args: Record<string, unknown>;
  tool?: string;
  context?: Record<string, string>;
  testId?: string;
}) {
  const items = tool === undefined ? argumentRows(args) : argumentView(tool, args, context);
  if (items.length === 0) return <p className="args-empty">no arguments</p>;
  return (
    <dl className="args" data-testid={testId}>
      {items.map((item, index) =>
        // two names may read alike once revealed (a hidden character, and its spelling typed out)
        Array.isArray(item) ? (
          <div key={index}>
            <dt>{item[0]}</dt>
            <dd>{item[1]}</dd>
          </div>
        ) : (
          <CodeBlock key={index} code={item} />
        ),
      )}
    </dl>
  );
}

/** A block: a line a span, so the content's own line breaks are real and each line of a diff is coloured by
 * its mark; it wraps where the screen ends, never scrolling sideways. */
function CodeBlock({ code }: { code: Code }) {
  return (
    <div className="args-code">
      <dt>{code.name}</dt>
      <dd>
        <pre className={`code code-${code.kind}`} data-testid="code">
          {code.lines.map((line, index) => (
            <span key={index} className={lineClass(code.kind, line)}>
              {line}
            </span>
          ))}
        </pre>
        {code.more && <p className="code-more">{code.more}</p>}
      </dd>
    </div>
  );
}
