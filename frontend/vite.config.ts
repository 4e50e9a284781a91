// Four pages, one build: the chat (index.html, served at /), the approvals inbox (approvals.html, served at
// /approvals), and two the server renders into their built HTML: the email review page (review.html) and the
// demo's mailbox (mailbox.html, its stylesheet only). The server serves the output folder at /static/. Same
// sources, same bytes: file names carry content hashes only, and there are no source maps (they would carry
// paths).
import react from "@vitejs/plugin-react";
import { defineConfig } from "vite";

export default defineConfig({
  base: "/static/",
  plugins: [react()],
  build: {
    outDir: "../src/signoff/server/static",
    emptyOutDir: true,
    sourcemap: false,
    rolldownOptions: {
      // relative to this folder (Vite's root)
      input: { chat: "index.html", approvals: "approvals.html", review: "review.html", mailbox: "mailbox.html" },
      output: { chunkFileNames: "assets/shared-[hash].js" }, // what the pages share (React, CSS)
    },
  },
});
