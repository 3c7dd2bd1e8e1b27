// Drives `avfs mcp` with the official TypeScript SDK's client
// (@modelcontextprotocol/sdk), over stdio and over streamable HTTP, as an
// agent would. Usage: node mcp-test.mjs AVFS_BINARY WORK_DIR. Run by
// test.sh; exits non-zero at the first check that fails.
import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import assert from "node:assert/strict";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const [bin, work] = process.argv.slice(2);
const home = mkdtempSync(join(work, "home-mcp-"));
const env = { ...process.env, AVFS_HOME: home, AVFS_PROXY_LINGER: "0" };

const newClient = () => new Client({ name: "avfs-npm-test", version: "1.0.0" });

// call calls a tool that must succeed and returns its structured content.
async function call(client, name, args, opts) {
  const res = await client.callTool({ name, arguments: args }, undefined, opts);
  assert.ok(!res.isError, `${name}: ${res.content?.[0]?.text}`);
  return res.structuredContent;
}

// fails calls a tool that must fail and returns its error document.
async function fails(client, name, args) {
  const res = await client.callTool({ name, arguments: args });
  assert.ok(res.isError, `${name} succeeded: ${JSON.stringify(res)}`);
  const doc = JSON.parse(res.content[0].text);
  assert.ok(doc.error && doc.message && doc.exit_code, `${name}: not an error document: ${res.content[0].text}`);
  return doc;
}

// --- stdio ---
{
  const client = newClient();
  await client.connect(new StdioClientTransport({ command: bin, args: ["mcp"], env, stderr: "inherit" }));
  const { tools } = await client.listTools();
  assert.equal(tools.length, 18, tools.map((t) => t.name).join(", "));
  const exec = tools.find((t) => t.name === "exec");
  assert.equal(exec.annotations.destructiveHint, true);
  assert.equal(tools.find((t) => t.name === "file_read").annotations.readOnlyHint, true);
  assert.ok(exec.inputSchema.properties.argv && exec.outputSchema);

  assert.equal((await call(client, "vault_create", { name: "ts", use: true })).name, "ts");
  await call(client, "file_write", { path: "/src/a.txt", content: "alpha\nbeta\n", create_dirs: true });
  assert.equal((await call(client, "file_read", { path: "/src/a.txt", tail: 1 })).content, "beta\n");
  const dry = await call(client, "file_edit", { path: "/src/a.txt", dry_run: true, edits: [{ old_text: "beta", new_text: "gamma" }] });
  assert.equal(dry.content, "alpha\ngamma\n");
  assert.equal((await call(client, "file_read", { path: "/src/a.txt" })).content, "alpha\nbeta\n");
  const found = await call(client, "file_search", { pattern: "^b" });
  assert.deepEqual(found.matches.map((m) => [m.path, m.line]), [["/src/a.txt", 2]]);

  // exec: the envelope is the structured content; output streams as
  // progress notifications while the command runs.
  const streamed = [];
  const run = await call(client, "exec", { shell: "echo hi; echo there > b.txt" }, { onprogress: (p) => streamed.push(p.message) });
  assert.equal(run.kind, "proxy_exec_result");
  assert.equal(run.result.state, "completed");
  assert.equal(run.result.stdout, "hi\n");
  assert.deepEqual(run.result.changes.map((c) => c.path), ["/b.txt"]);
  assert.equal(streamed.join(""), "hi\n");
  const denied = await call(client, "exec", { argv: ["cat", "/etc/passwd"] });
  assert.equal(denied.result.state, "denied");
  assert.equal(denied.result.checkpoint, null);
  assert.equal((await call(client, "undo", {})).run, run.id);
  assert.equal((await fails(client, "file_read", { path: "/b.txt" })).error, "NotFound");
  assert.equal((await fails(client, "vault_create", { name: "ts" })).error, "VaultExists");
  await client.close();
  console.log("stdio: tools, files, exec with progress, a denied exec, undo and errors");
}

// --- streamable HTTP ---
{
  const server = spawn(bin, ["mcp", "--json", "--http", "127.0.0.1:0", "--vault", "ts"], { env, stdio: ["ignore", "pipe", "inherit"] });
  try {
    const serving = await new Promise((resolve, reject) => {
      let out = "";
      server.stdout.on("data", (d) => {
        out += d;
        try {
          resolve(JSON.parse(out));
        } catch {} // not whole yet
      });
      server.on("exit", (code) => reject(new Error(`avfs mcp --http exited ${code}`)));
    });
    assert.equal(statSync(serving.token_file).mode & 0o777, 0o600);
    const token = readFileSync(serving.token_file, "utf8").trim();
    const transport = (t) => new StreamableHTTPClientTransport(new URL(serving.url), { requestInit: { headers: { Authorization: `Bearer ${t}` } } });

    await assert.rejects(newClient().connect(transport("not-the-token")), "a wrong token connected");
    const client = newClient();
    await client.connect(transport(token));
    const { tools } = await client.listTools();
    assert.ok(!tools.some((t) => t.name === "vault_create"), "a pinned server offers vault_create");
    const list = await call(client, "vault_list", {});
    assert.deepEqual(list.vaults.map((v) => v.name), ["ts"]);
    assert.equal((await call(client, "file_read", { path: "/src/a.txt" })).content, "alpha\nbeta\n");
    assert.equal((await fails(client, "file_read", { vault: "other", path: "/x" })).error, "PermissionDenied");
    await client.close();
    console.log("http: a wrong token is refused; the right one reaches the pinned vault");
  } finally {
    server.kill("SIGINT");
  }
}
