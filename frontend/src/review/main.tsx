// The email review page (/approvals/email/<token>). The server renders it whole, the inbox's card and a plain
// form that decides with JavaScript off (src/signoff/server/review_page.py); this script only adds to it: the
// deadline counts down as the inbox's does, and a second press does not post the form again (the link decides
// once, so a second post would answer "used already" over the page that says what was decided).
// The page's CSP lets scripts and styles come from /static/ only: nothing here is inline.
import { createRoot } from "react-dom/client";
import { Deadline } from "../shared/Deadline";
import "../shared/style.css";

for (const slot of document.querySelectorAll<HTMLElement>("[data-countdown]")) {
  createRoot(slot).render(<Deadline at={Number(slot.dataset.countdown)} />);
}

for (const form of document.querySelectorAll("form")) {
  let sent = false;
  form.addEventListener("submit", (event) => {
    if (sent) event.preventDefault();
    sent = true;
  });
}
