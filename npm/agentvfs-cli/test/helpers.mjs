// Shared by the tests: the avfs binary under test, throwaway homes that are
// always unmounted before they are removed, and a strict check of documents
// against docs/schema.
import { execFileSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
export const packageDir = join(here, "..");
export const repoRoot = join(here, "..", "..", "..");
export const schemaDir = join(repoRoot, "docs", "schema");

let built;
/** $AVFS_BIN_PATH, else avfs built from this checkout (once per test file). */
export function avfsBin() {
  if (process.env.AVFS_BIN_PATH) return process.env.AVFS_BIN_PATH;
  if (built) return built;
  const out = join(tempDir("avfs-bin-"), "avfs");
  const go = existsSync("/usr/local/go/bin/go") ? "/usr/local/go/bin/go" : "go";
  execFileSync(go, ["build", "-o", out, "./cmd/avfs"], { cwd: repoRoot, env: { ...process.env, CGO_ENABLED: "0" }, stdio: "inherit" });
  built = out;
  process.on("exit", () => rmSync(dirname(out), { recursive: true, force: true }));
  return out;
}

export function tempDir(prefix = "agentvfs-cli-test-") {
  return mkdtempSync(join(tmpdir(), prefix));
}

/** Unmounts whatever the home still has mounted, then removes the directory. */
export function removeHome(home, bin = avfsBin()) {
  try {
    const { mounts } = JSON.parse(execFileSync(bin, ["--home", home, "--json", "mounts"], { encoding: "utf8" }));
    for (const m of mounts) {
      try {
        execFileSync(bin, ["--home", home, "--json", "unmount", m.mountpoint], { stdio: "ignore" });
      } catch {
        execFileSync(bin, ["--home", home, "--json", "unmount", "--lazy", m.mountpoint], { stdio: "ignore" });
      }
    }
  } finally {
    rmSync(home, { recursive: true, force: true });
  }
}

const schemas = new Map();
function loadSchema(file) {
  if (!schemas.has(file)) schemas.set(file, JSON.parse(readFileSync(join(schemaDir, file), "utf8")));
  return schemas.get(file);
}

/**
 * What is wrong with doc under docs/schema/FILE, strictly: besides the
 * schema, every field must be listed (as the Go suite checks), so the
 * typed client never receives a field its types do not declare.
 */
export function schemaErrors(file, doc) {
  const errors = [];
  check(loadSchema(file), doc, "$", file, errors);
  return errors;
}

function resolveRef(ref, base) {
  const [file, pointer] = ref.split("#");
  const target = file || base;
  let schema = loadSchema(target);
  for (const part of (pointer ?? "").split("/").filter(Boolean)) schema = schema[part];
  return [schema, target];
}

const typeOf = (v) =>
  v === null ? "null" : Array.isArray(v) ? "array" : Number.isInteger(v) ? "integer" : typeof v;

function check(schema, value, at, base, errors) {
  if (schema.$ref) {
    const [target, file] = resolveRef(schema.$ref, base);
    return check(target, value, at, file, errors);
  }
  if ("const" in schema && JSON.stringify(value) !== JSON.stringify(schema.const)) {
    errors.push(`${at}: ${JSON.stringify(value)} is not ${JSON.stringify(schema.const)}`);
  }
  if (schema.enum && !schema.enum.includes(value)) errors.push(`${at}: ${JSON.stringify(value)} is not one of ${schema.enum}`);
  const alts = schema.oneOf ?? schema.anyOf;
  if (alts && !alts.some((s) => { const e = []; check(s, value, at, base, e); return e.length === 0; })) {
    errors.push(`${at}: ${JSON.stringify(value)} matches none of the alternatives`);
  }
  if (schema.type) {
    const types = [].concat(schema.type);
    const t = typeOf(value);
    if (!types.includes(t) && !(t === "integer" && types.includes("number"))) {
      errors.push(`${at}: ${t}, expected ${types.join(" or ")}`);
      return;
    }
  }
  if (typeof value === "string" && schema.pattern && !new RegExp(schema.pattern).test(value)) {
    errors.push(`${at}: ${JSON.stringify(value)} does not match ${schema.pattern}`);
  }
  if (typeof value === "number" && schema.minimum !== undefined && value < schema.minimum) {
    errors.push(`${at}: ${value} < ${schema.minimum}`);
  }
  if (Array.isArray(value) && schema.items) value.forEach((v, i) => check(schema.items, v, `${at}[${i}]`, base, errors));
  if (typeOf(value) === "object" && schema.properties) {
    for (const key of schema.required ?? []) if (!(key in value)) errors.push(`${at}: missing ${key}`);
    for (const [key, v] of Object.entries(value)) {
      if (key in schema.properties) check(schema.properties[key], v, `${at}.${key}`, base, errors);
      else errors.push(`${at}: ${key} is not in the schema`);
    }
  }
}
