// The Python half of gen-types.mjs: python/src/agentvfs/models.py (one
// frozen dataclass per object in docs/schema) and _commands.py (one method
// per command of docs/commands.json). Imported by gen-types.mjs, which
// writes and checks every generated file.
import { readFileSync, readdirSync } from "node:fs";
import { join } from "node:path";

const pascal = (s) => s.replace(/(^|[-_.])([a-z0-9])/g, (_, __, c) => c.toUpperCase());
const KEYWORDS = new Set(("False None True and as assert async await break class continue def del elif else except " +
  "finally for from global if import in is lambda nonlocal not or pass raise return try while with yield").split(" "));
export const pyIdent = (s) => { const n = s.replace(/-/g, "_").toLowerCase(); return KEYWORDS.has(n) ? n + "_" : n; };

/**
 * The public class names of the hand-written models this file replaced,
 * by schema node ("FILE#POINTER"); a node not listed is named after its
 * file (tree.json -> TreeResult) or its parent and property. Two nodes may
 * share a name when they have the same fields (Decision in proxy-exec and
 * policy-check).
 */
const PY_NAMES = {
  "version.json#": "VersionInfo",
  "vault-info.json#": "Vault",
  "vault-info.json#/properties/origin/oneOf/1": "Origin",
  "vault-info.json#/properties/space": "VaultSpace",
  "vault-list.json#": "VaultList",
  "vault-list.json#/properties/vaults/items": "VaultSummary",
  "vault-fork.json#": "Fork",
  "vault-delete.json#": "VaultDeleted",
  "checkpoint-save.json#": "SavedCheckpoint",
  "checkpoint-list.json#": "CheckpointList",
  "checkpoint-restore.json#": "Restored",
  "checkpoint-delete.json#": "CheckpointDeleted",
  "diff.json#": "Diff",
  "diff.json#/properties/changes/items": "DiffEntry",
  "diff.json#/properties/summary": "DiffSummary",
  "content-diff.json#": "ContentDiff",
  "content-diff.json#/properties/changes/items": "ContentDiffEntry",
  "content-diff.json#/properties/summary": "ContentDiffSummary",
  "vault-merge.json#": "VaultMerge",
  "vault-merge.json#/properties/applied/items": "MergeApplied",
  "vault-merge.json#/properties/conflicts/items": "MergeConflict",
  "apply.json#": "ApplyResult",
  "apply.json#/properties/applied/items": "ApplyEntry",
  "apply.json#/$defs/notes/items": "ApplyNote",
  "ls.json#": "Listing",
  "stat.json#": "Stat",
  "mount.json#": "Mount",
  "mounts.json#": "Mounts",
  "mounts.json#/$defs/mount": "MountRecord",
  "unmount.json#": "Unmounted",
  "proxy-exec.json#/properties/request": "ProxyRequest",
  "proxy-exec.json#/properties/result": "ProxyResult",
  "proxy-exec.json#/properties/result/properties/stage_ms": "StageTimes",
  "proxy-exec.json#/properties/result/properties/checkpoint": "RunCheckpoint",
  "proxy-exec.json#/properties/result/properties/changes/items": "Change",
  "proxy-exec.json#/properties/result/properties/decision": "Decision",
  "proxy-exec.json#/properties/result/properties/decision/properties/commands/items": "CommandDecision",
  "proxy-exec.json#/properties/result/properties/approval": "Approval",
  "proxy-exec.json#/properties/result/properties/error": "RunError",
  "proxy-history.json#": "ProxyHistory",
  "proxy-history.json#/properties/runs/items": "HistoryRun",
  "proxy-approval.json#": "ApprovalResult",
  "proxy-approval.json#/properties/approval": "Approval",
  "proxy-undo.json#": "UndoResult",
  "proxy-redo.json#": "RedoResult",
  "proxy-exec.json#/properties/result/properties/summary": "ChangeSummary",
  "policy-check.json#": "PolicyCheck",
  "policy-check.json#/properties/request": "PolicyRequest",
  "policy-check.json#/properties/decision": "Decision",
  "policy-check.json#/properties/decision/properties/commands/items": "CommandDecision",
};

/** Hand-written behaviour (agentvfs/_document.py) mixed into generated classes. */
const PY_MIXINS = { CatResult: "CatContent", ProxyExecResult: "EnvelopeAccess" };

/** Schemas that are no one class: the shared definitions, the error document (AvfsError), the stream's lines. */
const PY_NO_CLASS = new Set(["common.json", "error.json", "proxy-exec-stream.json"]);

/** Enums exported as tuples: NAME -> node. */
const PY_ENUMS = {
  RUN_STATES: ["RunState", "proxy-exec.json", "/properties/result/properties/state",
    "How a run ends (ProxyExecResult.state, HistoryRun.state): completed (the command exited by itself),\n" +
    "timed_out, interrupted (SIGINT or SIGTERM to avfs; exit code 130), denied, awaiting_approval, failed."],
  ERROR_KINDS: ["ErrorKind", "error.json", "/properties/error",
    "Every error type avfs prints (AvfsError.error): docs/schema/error.json, kept in step with the Go code."],
};

function loadAll(dir) {
  const docs = {};
  for (const f of readdirSync(dir).filter((f) => f.endsWith(".json")).sort()) {
    docs[f] = JSON.parse(readFileSync(join(dir, f), "utf8"));
  }
  return docs;
}

function at(docs, file, ptr) {
  let node = docs[file];
  if (!node) throw new Error(`no schema ${file}`);
  for (const part of ptr.split("/").filter(Boolean)) node = node[part];
  if (node === undefined) throw new Error(`${file}#${ptr}: no such node`);
  return node;
}

function resolveRef(ref, file) {
  const [target, ptr = ""] = ref.split("#");
  return [target || file, ptr];
}

const isClassNode = (n) => n && typeof n === "object" && n.properties &&
  (n.type === "object" || (Array.isArray(n.type) && n.type.includes("object")));

/** Registers a class for every object node with properties, walking every schema but not through $ref. */
function collectClasses(docs) {
  const byPtr = new Map(); // "file#ptr" -> name
  const order = []; // [name, file, ptr]
  const walk = (file, ptr, node, hint) => {
    if (!node || typeof node !== "object") return;
    if (isClassNode(node)) {
      const key = `${file}#${ptr}`;
      const name = PY_NAMES[key] ?? hint;
      byPtr.set(key, name);
      order.push([name, file, ptr]);
      for (const [p, sub] of Object.entries(node.properties)) walk(file, `${ptr}/properties/${p}`, sub, name + pascal(p));
      return;
    }
    if (node.items) walk(file, `${ptr}/items`, node.items, hint);
    for (const k of ["oneOf", "anyOf"]) (node[k] ?? []).forEach((s, i) => walk(file, `${ptr}/${k}/${i}`, s, hint));
  };
  for (const [file, doc] of Object.entries(docs)) {
    for (const [def, sub] of Object.entries(doc.$defs ?? {})) {
      walk(file, `/$defs/${def}`, sub, PY_NAMES[`${file}#/$defs/${def}`] ?? pascal(def));
    }
    if (PY_NO_CLASS.has(file)) continue;
    walk(file, "", doc, PY_NAMES[`${file}#`] ?? pascal(file.replace(/\.json$/, "")) + "Result");
  }
  return { byPtr, order };
}

/** [python type, nested class or null] of a schema node. */
function pyType(docs, classes, file, ptr, node) {
  if (node.$ref) {
    const [f, p] = resolveRef(node.$ref, file);
    return pyType(docs, classes, f, p, at(docs, f, p));
  }
  const key = `${file}#${ptr}`;
  if (classes.byPtr.has(key)) {
    const name = classes.byPtr.get(key);
    const nullable = Array.isArray(node.type) && node.type.includes("null");
    return [nullable ? `Optional[${name}]` : name, name];
  }
  if ("const" in node) return [`Literal[${JSON.stringify(node.const)}]`, null];
  if (node.enum) {
    const vals = node.enum.filter((v) => v !== null).map((v) => JSON.stringify(v));
    const lit = `Literal[${vals.join(", ")}]`;
    return [node.enum.includes(null) ? `Optional[${lit}]` : lit, null];
  }
  const alts = node.oneOf ?? node.anyOf;
  if (alts) {
    const kinds = alts.map((s, i) => pyType(docs, classes, file, `${ptr}/${node.oneOf ? "oneOf" : "anyOf"}/${i}`, s));
    return unionOf(kinds, key);
  }
  const types = Array.isArray(node.type) ? node.type : [node.type];
  return unionOf(types.map((t) => {
    switch (t) {
      case "string": return ["str", null];
      case "integer": return ["int", null];
      case "number": return ["float", null];
      case "boolean": return ["bool", null];
      case "null": return ["None", null];
      case "object": return ["Dict[str, Any]", null];
      case "array": {
        if (!node.items) return ["List[Any]", null];
        const [t2, cls] = pyType(docs, classes, file, `${ptr}/items`, node.items);
        return [`List[${t2}]`, cls];
      }
      default: throw new Error(`${key}: unsupported type ${t}`);
    }
  }), key);
}

function unionOf(kinds, key) {
  const nullable = kinds.some(([t]) => t === "None");
  const rest = [...new Set(kinds.filter(([t]) => t !== "None").map(([t]) => t.replace(/^Optional\[(.*)\]$/, "$1")))];
  const classes = [...new Set(kinds.map(([, c]) => c).filter(Boolean))];
  if (classes.length > 1) throw new Error(`${key}: a union of classes ${classes} is not supported`);
  let t = rest.length === 1 ? rest[0] : rest.length === 0 ? "None" : `Union[${rest.join(", ")}]`;
  if (nullable && rest.length) t = `Optional[${t}]`;
  return [t, classes[0] ?? null];
}

function docstring(text, indent) {
  if (!text) return "";
  const lines = String(text).replace(/\\/g, "\\\\").replace(/"""/g, '\\"\\"\\"').split("\n");
  if (lines.length === 1) return `${indent}"""${lines[0]}"""\n`;
  return `${indent}"""${lines[0]}\n${lines.slice(1).map((l) => (indent + l).trimEnd()).join("\n")}\n${indent}"""\n`;
}

/** Returns the text of python/src/agentvfs/models.py for the schemas in dir. */
export function generatePythonModels(dir) {
  const docs = loadAll(dir);
  const classes = collectClasses(docs);
  const defs = new Map(); // name -> {sig, text, nested}
  for (const [name, file, ptr] of classes.order) {
    const node = at(docs, file, ptr);
    const required = new Set(node.required ?? []);
    const fields = [];
    for (const [prop, sub] of Object.entries(node.properties)) {
      const [t, cls] = pyType(docs, classes, file, `${ptr}/properties/${prop}`, sub);
      const opt = !required.has(prop);
      fields.push({ prop, attr: KEYWORDS.has(prop) ? prop + "_" : prop, t: opt && !t.startsWith("Optional[") ? `Optional[${t}]` : t, opt, cls, doc: sub.description });
    }
    fields.sort((a, b) => a.opt - b.opt); // fields with a default come last (stable: schema order otherwise)
    const sig = JSON.stringify(fields.map(({ attr, t, opt }) => [attr, t, opt]));
    if (defs.has(name)) {
      if (defs.get(name).sig !== sig) throw new Error(`${file}#${ptr}: class ${name} is also ${defs.get(name).where}, with other fields`);
      continue;
    }
    const doc = [node.description ?? node.title, `Schema: docs/schema/${file}${ptr ? "#" + ptr : ""}`].filter(Boolean).join("\n\n");
    let text = `@dataclass(frozen=True)\nclass ${name}(${PY_MIXINS[name] ? PY_MIXINS[name] + ", " : ""}Document):\n`;
    text += docstring(doc, "    ") + "\n";
    for (const f of fields) {
      if (f.doc) text += `    #: ${String(f.doc).split("\n").join(" ")}\n`;
      text += `    ${f.attr}: ${f.t}${f.opt ? " = None" : ""}\n`;
    }
    const nested = fields.filter((f) => f.cls).map((f) => `${JSON.stringify(f.attr)}: ${f.cls}`);
    defs.set(name, { sig, text, nested, where: `${file}#${ptr}` });
  }
  const out = [
    "# Code generated by npm/scripts/gen-types.mjs from docs/schema/*.json. DO NOT EDIT.\n" +
    "# Regenerate with `node npm/scripts/gen-types.mjs` after changing a schema.\n" +
    '"""Typed results: one frozen dataclass per JSON object avfs prints.\n\n' +
    "Generated from docs/schema; parsing (``from_dict``, ``raw``) and the rules it\n" +
    "follows are in :mod:`agentvfs._document`: unknown fields are ignored (and kept\n" +
    "in ``.raw``), a missing required field is a :class:`ProtocolError`, optional\n" +
    "fields default to None, times stay RFC 3339 strings, and a key that is a\n" +
    "Python keyword gets a trailing underscore (``from`` is ``from_``).\n" +
    '"""\n\n' +
    "from __future__ import annotations\n\n" +
    "from dataclasses import dataclass\n" +
    "from typing import Any, Dict, List, Literal, Optional, Tuple, Type, Union\n\n" +
    "from ._document import CatContent, Document, EnvelopeAccess, StreamOutput, attr_name, json_key\n\n" +
    '__all__ = ["Document", "StreamOutput", "attr_name", "json_key", "SCHEMAS", ' +
    Object.entries(PY_ENUMS).flatMap(([n, [alias]]) => [JSON.stringify(n), JSON.stringify(alias)]).join(", ") + ", " +
    [...defs.keys()].map((n) => JSON.stringify(n)).join(", ") + "]\n",
  ];
  for (const { text } of defs.values()) out.push(text);
  let tail = "# Which class parses which nested object (set after every class exists: a tree\n# node holds tree nodes).\n";
  for (const [name, { nested }] of defs) if (nested.length) tail += `${name}.nested = {${nested.join(", ")}}\n`;
  out.push(tail);
  let enums = "";
  for (const [n, [alias, file, ptr, doc]] of Object.entries(PY_ENUMS)) {
    const node = at(docs, file, ptr);
    if (!node.enum) throw new Error(`${file}#${ptr}: no enum for ${n}`);
    const vals = node.enum.map((v) => `    ${JSON.stringify(v)},\n`).join("");
    enums += `#: ${doc.split("\n").join("\n#: ")}\n${alias} = Literal[\n${vals}]\n${n}: Tuple[${alias}, ...] = (\n${vals})\n\n`;
  }
  out.push(enums.trimEnd() + "\n");
  let schemas = "#: The class that parses each document of docs/schema/.\nSCHEMAS: Dict[str, Type[Document]] = {\n";
  for (const file of Object.keys(docs)) {
    if (PY_NO_CLASS.has(file)) continue;
    schemas += `    ${JSON.stringify(file)}: ${rootClass(docs, classes, file)},\n`;
  }
  out.push(schemas + "}\n");
  return out.join("\n\n");
}

function rootClass(docs, classes, file) {
  const [, cls] = pyType(docs, classes, file, "", docs[file]);
  if (!cls) throw new Error(`${file}: the document is not an object`);
  return cls;
}

/** The Python type of a flag value in a stub. */
function pyFlagType(f) {
  if (f.repeatable) return "Optional[Sequence[str]]";
  switch (f.type) {
    case "bool": return "bool";
    case "int": case "int64": case "uint": case "uint64": case "int32": return "Optional[int]";
    case "duration": return "Optional[Duration]";
    default: return "Optional[str]";
  }
}

/** Returns the text of python/src/agentvfs/_commands.py. */
export function generatePythonCommands(manifest, dir, stubbed, stubCommand) {
  const docs = loadAll(dir);
  const classes = collectClasses(docs);
  let out = "# Code generated by npm/scripts/gen-types.mjs from docs/commands.json and docs/schema. DO NOT EDIT.\n" +
    "# Regenerate with `node npm/scripts/gen-types.mjs` after changing a command or a schema.\n" +
    '"""Every avfs command as a typed method (``Avfs.commands``), generated from the\n' +
    "command manifest: flags first, then ``--``, then the positional arguments, so\n" +
    'no value is ever read as an option."""\n\n' +
    "from __future__ import annotations\n\n" +
    "from typing import Any, Callable, Optional, Sequence, Union\n\n" +
    "from . import models as m\n" +
    "from ._args import Duration, Flag\n\n\n" +
    "class Commands:\n" +
    '    """One method per command of docs/commands.json; see docs/cli-reference.md."""\n\n' +
    "    def __init__(self, invoke: Callable[..., Any]) -> None:\n" +
    "        self._invoke = invoke\n";
  for (const c of manifest.commands.filter(stubbed).map(stubCommand)) {
    const params = [];
    const names = new Set(["self", "vault", "input"]);
    const use = (n, what) => { if (names.has(n)) throw new Error(`${c.path.join(" ")}: ${what} ${n} clashes`); names.add(n); return n; };
    const pos = c.args.map((a, i) => {
      const n = use(pyIdent(a.name), "argument");
      const trailingOpt = c.args.slice(i).every((b) => b.optional);
      if (a.variadic) params.push(`${n}: Sequence[str]${a.optional ? " = ()" : ""}`);
      else params.push(`${n}: ${a.optional ? "Optional[str]" : "str"}${a.optional && trailingOpt ? " = None" : ""}`);
      return { n, a };
    });
    const kw = c.flags.map((f) => ({ f, n: use(pyIdent(f.name), "flag") }));
    const star = [...kw.map(({ f, n }) => `${n}: ${pyFlagType(f)} = ${f.type === "bool" && !f.repeatable ? "False" : "None"}`)];
    if (c.vault_scoped) star.push("vault: Optional[str] = None");
    star.push("input: Optional[bytes] = None");
    const cls = c.schema && !PY_NO_CLASS.has(c.schema + ".json") ? `m.${rootClass(docs, classes, c.schema + ".json")}` : "Any";
    const method = c.path.map(pyIdent).join("_");
    out += `\n    def ${method}(\n        self,\n${[...params, "*", ...star].map((p) => `        ${p},\n`).join("")}    ) -> ${cls}:\n`;
    out += `        """${c.short.replace(/"/g, '\\"')}: \`\`${c.use}\`\`${c.schema ? ` (docs/schema/${c.schema}.json)` : ""}."""\n`;
    const posExpr = pos.map(({ n, a }) => `(${a.variadic ? `list(${n})` : n}, ${a.optional ? "True" : "False"})`).join(", ");
    const flagsExpr = kw.map(({ f, n }) => `Flag("--${f.name}", ${JSON.stringify(f.repeatable ? "repeat" : f.type)}, ${n})`);
    out += `        return self._invoke(\n            ${cls === "Any" ? "None" : cls},\n            ${JSON.stringify(c.path)},\n` +
      `            [${posExpr}],\n            [${flagsExpr.join(", ")}],\n` +
      `            scoped=${c.vault_scoped ? "True" : "False"},\n            vault=${c.vault_scoped ? "vault" : "None"},\n            input=input,\n        )\n`;
  }
  return out;
}
