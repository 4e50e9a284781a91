// A tool's title filled from a call's arguments, as render_description in src/signoff/core/policy.py fills a
// policy's description: `Pay {amount} {currency} to {recipient}` reads "Pay 50 USD to Hanako". Keep the two
// alike. Not a template engine: a placeholder only walks object keys, and one that doesn't resolve stays as
// written, so a typo in the policy shows instead of hiding the call.

// Python's `\w` (see visible.ts), dotted.
const PLACEHOLDER = /\{([\p{L}\p{N}_]+(?:\.[\p{L}\p{N}_]+)*)\}/gu;
// What Python's str.isprintable refuses: other and separator characters, but for the plain space.
const UNPRINTABLE = /(?! )[\p{C}\p{Z}]/u;

function lookup(args: unknown, path: string): { value: unknown } | undefined {
  let value = args;
  for (const key of path.split(".")) {
    if (typeof value !== "object" || value === null || Array.isArray(value) || !Object.hasOwn(value, key)) {
      return undefined;
    }
    value = (value as Record<string, unknown>)[key];
  }
  return { value };
}

/** A plain string as it is; anything else as JSON, and so a string with a line break that could pass for a
 * second line, so that what a person reads is what was sent. */
const show = (value: unknown): string =>
  typeof value === "string" && !UNPRINTABLE.test(value) ? value : JSON.stringify(value);

export const fillTitle = (title: string, args: Record<string, unknown>): string =>
  title.replace(PLACEHOLDER, (written, path: string) => {
    const found = lookup(args, path);
    return found ? show(found.value) : written;
  });
