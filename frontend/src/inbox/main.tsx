// The approvals inbox page (/approvals).
import { StrictMode } from "react";
import { createRoot } from "react-dom/client";
import { InboxApp } from "./InboxApp";
import "../shared/style.css";

createRoot(document.getElementById("root") as HTMLElement).render(
  <StrictMode>
    <InboxApp />
  </StrictMode>,
);
