// The browser tools this page implements, by the names the demo's agent gives them: the one place the page
// names a tool. The server says which tools the browser runs (see dispatch.ts).
import type { Registry } from "./dispatch";
import { locate } from "./location";
import { play, unlockAudio } from "./music";

export const BROWSER_TOOLS: Registry = new Map([
  ["get_location", locate],
  ["change_bgm", play],
]);

/** Readies what the browser allows only after a user gesture (sound): call it from one, the Send click. */
export function unlockBrowserTools(): void {
  unlockAudio();
}
