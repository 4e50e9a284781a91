// Handing a browser call to this page's implementation of the tool. The server says which tools the browser
// runs, and an agent may declare one this page does not implement: then the page answers at once with an
// error, rather than leave the reply waiting for a result that never comes.
import { getToolName } from "ai";
import type { ToolPart } from "../parts";

/** What an implementation returns: an output, or why the browser could not; a refusal is never a made-up
 * success. */
export type ToolResult = { output: Record<string, unknown> } | { errorText: string };
export type BrowserTool = (input: unknown) => Promise<ToolResult>;
export type Registry = ReadonlyMap<string, BrowserTool>;
/** A browser call's answer, as `addToolOutput` takes it. */
export type BrowserAnswer = { state: "output-available"; output: unknown } | { state: "output-error"; errorText: string };

/** SSE: the server hands a browser call over by streaming its complete input once it may run (at once, or
 * after its approval); the reply ends there. `browser` holds the names of the tools the server declared. */
export const handedOver = (browser: ReadonlySet<string>, part: ToolPart): boolean =>
  part.state === "input-available" && browser.has(getToolName(part));

export async function answerBrowserCall(registry: Registry, part: ToolPart): Promise<BrowserAnswer> {
  const tool = getToolName(part);
  const run = registry.get(tool);
  if (!run) return { state: "output-error", errorText: `this page has no implementation of the browser tool ${tool}` };
  const result = await run(part.input);
  return "output" in result
    ? { state: "output-available", output: result.output }
    : { state: "output-error", errorText: result.errorText };
}
