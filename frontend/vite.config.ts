// Two pages, one build: the chat (index.html, served at /) and the approvals inbox (approvals.html, served at
// /approvals). The server serves the output folder at /static/. Same sources, same bytes: file names carry
// content hashes only, and there are no source maps (they would carry paths).
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
      input: { chat: "index.html", approvals: "approvals.html" }, // relative to this folder (Vite's root)
      output: { chunkFileNames: "assets/shared-[hash].js" }, // the one chunk both pages load (React, CSS)
    },
  },
});
