#!/usr/bin/env node
// Generates agentvfs-cli/src/schema.ts, the TypeScript types of avfs's JSON
// output, from the JSON Schemas in docs/schema. The schemas are the contract
// (the Go suite validates every command against them), so the types are
// derived from them rather than written by hand: a field added to a schema
// shows up here, and test/schema-types.test.mjs fails until the committed
// file is regenerated.
//
//   node scripts/gen-types.mjs          rewrite agentvfs-cli/src/schema.ts
//   node scripts/gen-types.mjs --check  exit 1 when it is out of date
//
// Only the schema keywords avfs uses are understood; any other keyword that
// could change a type throws, so a new construct cannot be silently dropped.
import { readFileSync, readdirSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
export const defaultSchemaDir = join(here, "..", "..", "docs", "schema");
export const outputFile = join(here, "..", "agentvfs-cli", "src", "schema.ts");

// Keywords that constrain values but not their TypeScript type.
const IGNORED = new Set([
  "$schema", "title", "description", "format", "pattern", "minimum", "maximum",
  "minLength", "maxLength", "minItems", "maxItems", "$defs",
]);
const HANDLED = new Set([
  "$ref", "const", "enum", "type", "properties", "required", "items", "oneOf", "anyOf",
]);

/** Type names that read better than the file-derived default. */
const NAMES = { "error.json": "ErrorDocument" };

const pascal = (s) => s.replace(/(^|[-_.])([a-z0-9])/g, (_, __, c) => c.toUpperCase());

/** The exported type name of a schema file: cat.json -> CatResult. */
export function fileTypeName(file) {
  return NAMES[file] ?? pascal(file.replace(/\.json$/, "")) + "Result";
}

function refName(ref, file) {
  const m = /^([a-z0-9-]+\.json)?(?:#\/\$defs\/([a-z0-9_]+))?$/.exec(ref);
  if (!m || (!m[1] && !m[2])) throw new Error(`${file}: unsupported $ref ${ref}`);
  if (m[2]) return pascal(m[2]); // a definition, in common.json or this file
  return fileTypeName(m[1]); // a whole document, e.g. "fsck.json"
}

function comment(text, indent) {
  if (!text) return "";
  const lines = String(text).split("\n");
  if (lines.length === 1) return `${indent}/** ${lines[0]} */\n`;
  return `${indent}/**\n${lines.map((l) => `${indent} * ${l}`.trimEnd()).join("\n")}\n${indent} */\n`;
}

const union = (types) => [...new Set(types)].join(" | ");
/** Wraps a union in parentheses (for T[]); unions nested in braces don't count. */
function paren(t) {
  let depth = 0;
  for (let i = 0; i < t.length; i++) {
    if ("{(".includes(t[i])) depth++;
    else if ("})".includes(t[i])) depth--;
    else if (t[i] === "|" && depth === 0) return `(${t})`;
  }
  return t;
}

/** The TypeScript type of a schema; indent is that of the line it starts on. */
function tsType(schema, indent, file) {
  for (const key of Object.keys(schema)) {
    if (!IGNORED.has(key) && !HANDLED.has(key)) {
      throw new Error(`${file}: schema keyword "${key}" is not supported by gen-types.mjs`);
    }
  }
  if (schema.$ref) return refName(schema.$ref, file);
  if ("const" in schema) return JSON.stringify(schema.const);
  if (schema.enum) return union(schema.enum.map((v) => JSON.stringify(v)));
  const alts = schema.oneOf ?? schema.anyOf;
  if (alts) return union(alts.map((s) => tsType(s, indent, file)));
  const types = Array.isArray(schema.type) ? schema.type : [schema.type];
  if (types[0] === undefined) throw new Error(`${file}: schema without a type: ${JSON.stringify(schema)}`);
  return union(types.map((t) => primitive(t, schema, indent, file)));
}

function primitive(type, schema, indent, file) {
  switch (type) {
    case "string": return "string";
    case "integer": case "number": return "number";
    case "boolean": return "boolean";
    case "null": return "null";
    case "array": return `${paren(schema.items ? tsType(schema.items, indent, file) : "unknown")}[]`;
    case "object": return objectType(schema, indent, file);
    default: throw new Error(`${file}: unsupported type ${type}`);
  }
}

function objectType(schema, indent, file) {
  const props = Object.entries(schema.properties ?? {});
  if (props.length === 0) return "Record<string, unknown>";
  const required = new Set(schema.required ?? []);
  const inner = indent + "  ";
  let out = "{\n";
  for (const [name, prop] of props) {
    out += comment(prop.description, inner);
    out += `${inner}${name}${required.has(name) ? "" : "?"}: ${tsType(prop, inner, file)};\n`;
  }
  return out + indent + "}";
}

function declaration(name, schema, doc, file) {
  const type = tsType(schema, "", file);
  const head = comment(doc, "");
  // A plain object becomes an interface (clearer in editors); anything else an alias.
  if (schema.type === "object" && type.startsWith("{")) return `${head}export interface ${name} ${type}\n`;
  return `${head}export type ${name} = ${type};\n`;
}

/** Returns the text of schema.ts for the schemas in dir. */
export function generate(dir = defaultSchemaDir) {
  const files = readdirSync(dir).filter((f) => f.endsWith(".json")).sort();
  const parts = [
    "// Code generated by npm/scripts/gen-types.mjs from docs/schema/*.json. DO NOT EDIT.\n" +
      "// Regenerate with `npm run gen-types` (in npm/) after changing a schema.\n",
  ];
  const seen = new Map();
  const emit = (name, schema, doc, file) => {
    if (seen.has(name)) throw new Error(`${file}: type ${name} is also defined by ${seen.get(name)}`);
    seen.set(name, file);
    parts.push(declaration(name, schema, doc, file));
  };
  for (const file of files) {
    const schema = JSON.parse(readFileSync(join(dir, file), "utf8"));
    for (const [def, sub] of Object.entries(schema.$defs ?? {})) {
      emit(pascal(def), sub, [sub.description, `Schema: docs/schema/${file}#/$defs/${def}`].filter(Boolean).join("\n"), file);
    }
    if (file === "common.json") continue; // holds only definitions
    const doc = [schema.description ?? schema.title, `Schema: docs/schema/${file}`]
      .filter(Boolean).join("\n");
    emit(fileTypeName(file), schema, doc, file);
  }
  return parts.join("\n");
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const text = generate();
  if (process.argv.includes("--check")) {
    let current = "";
    try { current = readFileSync(outputFile, "utf8"); } catch {}
    if (current !== text) {
      console.error(`${outputFile} is out of date with docs/schema: run \`npm run gen-types\` in npm/`);
      process.exit(1);
    }
  } else {
    writeFileSync(outputFile, text);
  }
}
