// change_bgm: plays a short generated chime for the track the model asked for (no audio files, no network).
import type { ToolResult } from "./dispatch";

let audio: AudioContext | undefined;

/** Creates or resumes the page's AudioContext. Call it from a user gesture, so that the autoplay policy lets
 * the chime play later, when the model asks for it. */
export function unlockAudio(): AudioContext {
  audio ??= new AudioContext();
  if (audio.state === "suspended") void audio.resume();
  return audio;
}

/** Two notes, fading out over 1.5 s. */
export async function play(input: unknown): Promise<ToolResult> {
  const asked = (input as { track?: unknown } | undefined)?.track;
  const track = typeof asked === "string" ? asked : "the track";
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
