// Generates src/lib/wire/types.gen.ts from src/lib/wire/schema.json, which the Rust side
// writes from its own types (crates/api/tests/wire.rs). Run: npm run gen:wire.
// `wireTypes()` is exported so the UI's staleness test compares without writing.
import { compile } from "json-schema-to-typescript";
import { readFileSync, writeFileSync } from "node:fs";
import { fileURLToPath } from "node:url";

const dir = new URL("../src/lib/wire/", import.meta.url);

export async function wireTypes() {
  const schema = JSON.parse(readFileSync(new URL("schema.json", dir), "utf8"));
  const banner =
    "/* Generated from Sextant's Rust types (src/lib/wire/schema.json) by scripts/gen-wire.mjs; do not edit.\n" +
    " * Regenerate with `npm run gen:wire` after `SEXTANT_BLESS=1 cargo test -p sextant-api --test wire`. */";
  return compile(schema, "Wire", {
    bannerComment: banner,
    additionalProperties: false,
    unreachableDefinitions: true,
    format: true,
    style: { printWidth: 110, singleQuote: false, trailingComma: "all" },
  });
}

/** The generated file as checked in. */
export function checkedInTypes() {
  return readFileSync(new URL("types.gen.ts", dir), "utf8");
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  writeFileSync(new URL("types.gen.ts", dir), await wireTypes());
}
