// get_location: the browser's position, if the person lets the page have it.
import type { ToolResult } from "./dispatch";

export function locate(): Promise<ToolResult> {
  return new Promise((resolve) => {
    if (!("geolocation" in navigator)) {
      resolve({ errorText: "the browser did not share the location: it has no geolocation" });
      return;
    }
    navigator.geolocation.getCurrentPosition(
      ({ coords }) =>
        resolve({ output: { latitude: coords.latitude, longitude: coords.longitude, accuracy: coords.accuracy } }),
      (error) => resolve({ errorText: `the browser did not share the location: ${error.message}` }),
      { timeout: 10_000, maximumAge: 60_000 },
    );
  });
}
