// The types in src/schema.ts must be what scripts/gen-types.mjs makes of
// docs/schema today: a field added to a schema fails this test until the
// types are regenerated (`npm run gen-types` in npm/).
import assert from "node:assert/strict";
import { cpSync, readFileSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import { fileTypeName, generate, outputFile } from "../../scripts/gen-types.mjs";
import { schemaDir, tempDir } from "./helpers.mjs";

test("src/schema.ts is generated from docs/schema and up to date", () => {
  assert.ok(
    readFileSync(outputFile, "utf8") === generate(schemaDir),
    "src/schema.ts differs from docs/schema: run `npm run gen-types` in npm/ and commit the result",
  );
});

test("every schema has an exported type", () => {
  const text = readFileSync(outputFile, "utf8");
  for (const file of readdirSync(schemaDir).filter((f) => f.endsWith(".json") && f !== "common.json")) {
    assert.match(text, new RegExp(`^export (interface|type) ${fileTypeName(file)}\\b`, "m"), file);
  }
});

/** generate() over a copy of docs/schema with proxy-exec.json changed by edit. */
function generateEdited(edit) {
  const dir = tempDir("agentvfs-cli-schema-");
  try {
    cpSync(schemaDir, dir, { recursive: true });
    const file = join(dir, "proxy-exec.json");
    const schema = JSON.parse(readFileSync(file, "utf8"));
    edit(schema);
    writeFileSync(file, JSON.stringify(schema));
    return generate(dir);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

test("a field added to a schema makes the committed types stale", () => {
  const text = generateEdited((s) => {
    s.properties.result.properties.new_field = { type: "integer", description: "added later" };
  });
  assert.notEqual(text, readFileSync(outputFile, "utf8"));
  assert.match(text, /\/\*\* added later \*\/\n {4}new_field\?: number;/);
});

test("a schema keyword the generator does not know is an error, not ignored", () => {
  assert.throws(() => generateEdited((s) => { s.properties.result.additionalProperties = false; }), /"additionalProperties" is not supported/);
});
