// The types in src/schema.ts must be what scripts/gen-types.mjs makes of
// docs/schema today: a field added to a schema fails this test until the
// types are regenerated (`npm run gen-types` in npm/).
import assert from "node:assert/strict";
import { cpSync, readFileSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import { fileTypeName, generate, generateAll, outputFile, stale } from "../../scripts/gen-types.mjs";
import { repoRoot, schemaDir, tempDir } from "./helpers.mjs";

test("every generated client file (TypeScript and Python) is up to date", () => {
  assert.deepEqual(stale(), [], "run `node npm/scripts/gen-types.mjs` and commit the result");
});

test("a flag added to the command manifest shows up in both clients' stubs", () => {
  const dir = tempDir("agentvfs-cli-manifest-");
  try {
    const manifest = JSON.parse(readFileSync(join(repoRoot, "docs", "commands.json"), "utf8"));
    const tree = manifest.commands.find((c) => c.path.join(" ") === "tree");
    tree.flags.push({ name: "new-flag", type: "duration", default: "0s", repeatable: false, usage: "added later" });
    writeFileSync(join(dir, "commands.json"), JSON.stringify(manifest));
    const out = generateAll(schemaDir, join(dir, "commands.json"));
    assert.match(out["npm/agentvfs-cli/src/commands.ts"], /\/\*\* added later \(default 0s\) \*\/\n {2}newFlag\?: Duration;/);
    assert.match(out["npm/agentvfs-cli/src/commands.ts"], /\["--new-flag", "duration", flags\.newFlag\]/);
    assert.match(out["python/src/agentvfs/_commands.py"], /new_flag: Optional\[Duration\] = None/);
    assert.match(out["python/src/agentvfs/_commands.py"], /Flag\("--new-flag", "duration", new_flag\)/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("the error kinds are a union type, from error.json's enum", () => {
  const kinds = JSON.parse(readFileSync(join(schemaDir, "error.json"), "utf8")).properties.error.enum;
  assert.ok(kinds.length > 30 && kinds.includes("VaultNotFound"));
  const text = readFileSync(outputFile, "utf8");
  assert.ok(text.includes(`error: ${kinds.map((k) => JSON.stringify(k)).join(" | ")};`), "ErrorDocument.error is not the union of error.json's enum");
});

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
