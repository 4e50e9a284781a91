// The tools this page runs for the model (seed 001): get_location and change_bgm. Each returns an output or
// an error text for `addToolOutput`; a browser that refuses is an error, never a made-up success.

export type ToolResult = { output: Record<string, unknown> } | { errorText: string };

let audio: AudioContext | undefined;

/** Creates or resumes the page's AudioContext. Call it from a user gesture (the Send click), so that the
 * autoplay policy lets change_bgm play later, when the model asks for it. */
export function unlockAudio(): AudioContext {
  audio ??= new AudioContext();
  if (audio.state === "suspended") void audio.resume();
  return audio;
}

export function runBrowserTool(tool: string, input: unknown): Promise<ToolResult> {
  if (tool === "get_location") return locate();
  const track = (input as { track?: unknown } | undefined)?.track;
  return play(typeof track === "string" ? track : "the track");
}

function locate(): Promise<ToolResult> {
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

/** A short generated chime (no audio files, no network): two notes, fading out over 1.5 s. */
async function play(track: string): Promise<ToolResult> {
  if (!audio && !navigator.userActivation.hasBeenActive) {
    return { errorText: "the browser blocks sound until you use the page (click Send, then ask again)" };
  }
  const context = unlockAudio();
  // resume() may wait for a user gesture forever; two seconds is plenty when it is allowed at all
  await Promise.race([context.resume().catch(() => undefined), new Promise((wake) => setTimeout(wake, 2000))]);
  if (context.state !== "running") {
    return { errorText: `the browser would not play sound (audio is ${context.state})` };
  }
  const start = context.currentTime;
  const gain = context.createGain();
  gain.connect(context.destination);
  gain.gain.setValueAtTime(0.0001, start);
  gain.gain.exponentialRampToValueAtTime(0.2, start + 0.05);
  gain.gain.exponentialRampToValueAtTime(0.0001, start + 1.5);
  for (const [frequency, delay] of [
    [440, 0],
    [660, 0.4],
  ]) {
    const tone = context.createOscillator();
    tone.type = "sine";
    tone.frequency.value = frequency;
    tone.connect(gain);
    tone.start(start + delay);
    tone.stop(start + 1.5);
  }
  return { output: { track, playing: true } };
}
