// docs/guides/typescript.md shows its code in pieces; each piece must still
// be in examples/typescript/example.mjs, which test.sh runs, so the guide
// cannot drift from code that works.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import { repoRoot } from "./helpers.mjs";

const guides = join(repoRoot, "docs", "guides");
// Indentation differs (the example runs inside try), so compare trimmed lines.
const normalize = (text) => text.split("\n").map((l) => l.trim()).join("\n").trim();

test("every js block of the TypeScript guide is in the example it runs", () => {
  const guide = readFileSync(join(guides, "typescript.md"), "utf8");
  const example = normalize(readFileSync(join(guides, "examples", "typescript", "example.mjs"), "utf8"));
  const blocks = [...guide.matchAll(/```js\n([\s\S]*?)```/g)].map((m) => normalize(m[1]));
  assert.ok(blocks.length >= 5, "the guide has its code blocks");
  for (const block of blocks) assert.ok(example.includes(block), `not in example.mjs:\n${block}`);
});
