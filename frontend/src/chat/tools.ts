// What the server says of the agent's tools (`tools` in GET /api/chat/{id}): which ones the browser runs, and
// how to word a call of each. The page knows tools by name only where it implements them (browser/registry.ts).

export interface ToolInfo {
  name: string;
  /** The browser runs it (seed 001), once the server hands a call over. */
  browser: boolean;
  /** The server answers its calls at once, and the page acts on each call as it sees it (seed 001's
   * change_bgm): nothing to hand over, nothing to send back. */
  acknowledged?: boolean;
  description?: string;
  /** The policy's wording of a call, with placeholders for its arguments: `Play {track}` (see title.ts). */
  title?: string;
}

export type Tools = ReadonlyMap<string, ToolInfo>;

export const toolsByName = (tools: ToolInfo[]): Tools => new Map(tools.map((tool) => [tool.name, tool]));

/** The browser tools whose result the server waits for. */
export const browserToolNames = (tools: ToolInfo[]): ReadonlySet<string> =>
  new Set(tools.filter((tool) => tool.browser && !tool.acknowledged).map((tool) => tool.name));

export const acknowledgedToolNames = (tools: ToolInfo[]): ReadonlySet<string> =>
  new Set(tools.filter((tool) => tool.browser && tool.acknowledged).map((tool) => tool.name));
