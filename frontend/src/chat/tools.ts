// What the server says of the agent's tools (`tools` in GET /api/chat/{id}): which ones the browser runs, and
// how to word a call of each. The page knows tools by name only where it implements them (browser/registry.ts).

export interface ToolInfo {
  name: string;
  /** The browser runs it (seed 001), once the server hands a call over. */
  browser: boolean;
  description?: string;
  /** The policy's wording of a call, with placeholders for its arguments: `Play {track}` (see title.ts). */
  title?: string;
}

export type Tools = ReadonlyMap<string, ToolInfo>;

export const toolsByName = (tools: ToolInfo[]): Tools => new Map(tools.map((tool) => [tool.name, tool]));

export const browserToolNames = (tools: ToolInfo[]): ReadonlySet<string> =>
  new Set(tools.filter((tool) => tool.browser).map((tool) => tool.name));
