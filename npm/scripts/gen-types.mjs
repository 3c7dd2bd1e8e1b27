#!/usr/bin/env node
// Generates both clients from one contract: the JSON Schemas in docs/schema
// (what each command prints; the Go suite validates every command against
// them) and docs/commands.json (the command tree: `go run
// ./internal/cli/genmanifest`). It writes
//
//   npm/agentvfs-cli/src/schema.ts     the TypeScript types of every document
//   npm/agentvfs-cli/src/commands.ts   one typed TypeScript method per command
//   python/src/agentvfs/models.py      one Python dataclass per object (gen-python.mjs)
//   python/src/agentvfs/_commands.py   one typed Python method per command
//
// A field added to a schema or a flag added to a command shows up in all
// four, and test/schema-types.test.mjs (npm test) and python/scripts/test.sh
// fail until the committed files are regenerated.
//
//   node scripts/gen-types.mjs          rewrite the four files
//   node scripts/gen-types.mjs --check  exit 1 when one is out of date
//
// Only the schema keywords avfs uses are understood; any other keyword that
// could change a type throws, so a new construct cannot be silently dropped.
import { readFileSync, readdirSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { generatePythonCommands, generatePythonModels } from "./gen-python.mjs";

const here = dirname(fileURLToPath(import.meta.url));
export const defaultSchemaDir = join(here, "..", "..", "docs", "schema");
export const outputFile = join(here, "..", "agentvfs-cli", "src", "schema.ts");
export const defaultManifest = join(here, "..", "..", "docs", "commands.json");
const repo = join(here, "..", "..");

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

const camel = (s) => s.toLowerCase().replace(/[-_]([a-z0-9])/g, (_, c) => c.toUpperCase());

/** Commands the stubs leave out: `avfs mcp` serves until stopped (see docs/guides/mcp.md). */
const NO_STUB = new Set(["mcp"]);
/** Flags the stubs leave out: --stream prints JSON Lines (Avfs.proxy.stream reads them). */
const NO_STUB_FLAGS = { "proxy exec": new Set(["stream"]) };
export const stubbed = (c) => !NO_STUB.has(c.path.join(" "));
/**
 * A command as its stub takes it: without the flags above, and without a
 * positional VAULT where --vault says the same (`mount [VAULT] MOUNTPOINT`).
 */
export const stubCommand = (c) => ({
  ...c,
  flags: c.flags.filter((f) => !NO_STUB_FLAGS[c.path.join(" ")]?.has(f.name)),
  args: c.args.filter((a) => !(c.vault_scoped && a.name === "VAULT" && a.optional)),
});

function tsFlagType(f) {
  if (f.repeatable) return "string[]";
  switch (f.type) {
    case "bool": return "boolean";
    case "int": case "int64": case "int32": case "uint": case "uint64": return "number";
    case "duration": return "Duration";
    default: return "string";
  }
}

/** Returns the text of commands.ts for a manifest. */
export function generateCommands(manifest) {
  let types = "";
  let methods = "";
  for (const command of manifest.commands.filter(stubbed)) {
    const c = stubCommand(command);
    const base = pascal(c.path.join("-"));
    const iface = `${base}Flags`;
    types += `/** Flags of \`avfs ${c.path.join(" ")}\`. */\nexport interface ${iface} extends ${c.vault_scoped ? "CallOptions" : "Omit<CallOptions, \"vault\">"} {\n`;
    for (const f of c.flags) {
      types += comment(f.usage + (f.default && f.default !== "false" ? ` (default ${f.default})` : ""), "  ");
      types += `  ${camel(f.name)}?: ${tsFlagType(f)};\n`;
    }
    types += "}\n\n";
    const names = new Set(["flags"]);
    const params = c.args.map((a, i) => {
      const n = camel(a.name);
      if (names.has(n)) throw new Error(`${c.path.join(" ")}: argument ${n} clashes`);
      names.add(n);
      const trailing = c.args.slice(i).every((b) => b.optional);
      if (a.variadic) return `${n}: string[]${a.optional ? " = []" : ""}`;
      if (!a.optional) return `${n}: string`;
      return trailing ? `${n}?: string` : `${n}: string | undefined`;
    });
    const ret = c.schema ? `S.${fileTypeName(c.schema + ".json")}` : "unknown";
    methods += comment(`${c.short}: \`${c.use}\`${c.schema ? `, printing docs/schema/${c.schema}.json` : ""}.`, "  ");
    methods += `  ${camel(c.path.join("-"))}(${[...params, `flags: ${iface} = {}`].join(", ")}): Promise<${ret}> {\n`;
    const values = c.args.map((a) => `[${camel(a.name)}, ${a.optional}]`).join(", ");
    const fl = c.flags.map((f) => `["--${f.name}", ${JSON.stringify(f.repeatable ? "repeat" : f.type)}, flags.${camel(f.name)}]`);
    methods += `    return this.invoke(${JSON.stringify(c.path)}, [${values}], [${fl.join(", ")}], { ...flags, scoped: ${c.vault_scoped} }) as Promise<${ret}>;\n  }\n\n`;
  }
  return "// Code generated by npm/scripts/gen-types.mjs from docs/commands.json. DO NOT EDIT.\n" +
    "// Regenerate with `npm run gen-types` (in npm/) after changing a command.\n" +
    "import type { CallOptions, Duration, Invoke } from \"./args.js\";\n" +
    "import type * as S from \"./schema.js\";\n\n" + types +
    "/**\n * Every avfs command as a typed method (Avfs.commands): flags first, then\n" +
    " * `--`, then the positional values, so no value is ever read as an option.\n */\n" +
    "export class Commands {\n  constructor(private readonly invoke: Invoke) {}\n\n" + methods.trimEnd() + "\n}\n";
}

/** Every generated file, relative to the repository, and its text. */
export function generateAll(dir = defaultSchemaDir, manifestFile = defaultManifest) {
  const manifest = JSON.parse(readFileSync(manifestFile, "utf8"));
  return {
    "npm/agentvfs-cli/src/schema.ts": generate(dir),
    "npm/agentvfs-cli/src/commands.ts": generateCommands(manifest),
    "python/src/agentvfs/models.py": generatePythonModels(dir),
    "python/src/agentvfs/_commands.py": generatePythonCommands(manifest, dir, stubbed, stubCommand),
  };
}

/** The generated files whose committed text differs from what generateAll makes. */
export function stale(dir = defaultSchemaDir, manifestFile = defaultManifest) {
  return Object.entries(generateAll(dir, manifestFile)).filter(([file, text]) => {
    try { return readFileSync(join(repo, file), "utf8") !== text; } catch { return true; }
  }).map(([file]) => file);
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  if (process.argv.includes("--check")) {
    const files = stale();
    if (files.length) {
      console.error(`out of date with docs/schema and docs/commands.json: ${files.join(", ")}: run \`node npm/scripts/gen-types.mjs\``);
      process.exit(1);
    }
  } else {
    for (const [file, text] of Object.entries(generateAll())) writeFileSync(join(repo, file), text);
  }
}
