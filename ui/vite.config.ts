import { defineConfig } from "vitest/config";
import { svelte } from "@sveltejs/vite-plugin-svelte";

// `base: "./"` so the same build loads from the Tauri asset protocol and from
// `sextant serve` at any path.
export default defineConfig({
  plugins: [svelte()],
  base: "./",
  clearScreen: false,
  build: { outDir: "dist", target: "es2022", chunkSizeWarningLimit: 1500 },
  server: { port: 5173, strictPort: true },
  test: { include: ["test/**/*.test.ts"], environment: "node" },
});
