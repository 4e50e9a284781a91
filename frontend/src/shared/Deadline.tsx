import { countdown, useNow } from "./time";

/** "expires in 9:58", ticking; "deadline passed" once it is over (the server expires it shortly after). */
export function Deadline({ at }: { at: number }) {
  const left = at - useNow();
  return (
    <span className="deadline" data-testid="deadline">
      {left > 0 ? `expires in ${countdown(left)}` : "deadline passed"}
    </span>
  );
}
