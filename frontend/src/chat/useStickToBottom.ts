// Keeps the newest message in view while the reply streams, unless the reader has scrolled up.
import { useLayoutEffect, useRef } from "react";

export function useStickToBottom(): void {
  const height = useRef(0);
  useLayoutEffect(() => {
    const page = document.documentElement;
    if (page.scrollTop + page.clientHeight >= height.current - 80) page.scrollTop = page.scrollHeight;
    height.current = page.scrollHeight;
  });
}
