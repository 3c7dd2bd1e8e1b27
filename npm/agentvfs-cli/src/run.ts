// Running avfs once and turning what it prints into a value or an error.
import { execFile, spawn } from "node:child_process";
import { createInterface } from "node:readline";
import { AvfsError, AvfsProcessError } from "./errors.js";
import type { ErrorDocument, ProxyExecStreamResult } from "./schema.js";

export interface RunProcessOptions {
  env?: NodeJS.ProcessEnv;
  /** written to avfs's stdin (which is otherwise empty, never inherited) */
  input?: string | Uint8Array;
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);

/**
 * Runs `bin argv...` without a shell and reads the one JSON document avfs
 * prints on stdout (docs/json-contract.md):
 *
 * - a proxy exec envelope (kind "proxy_exec_result") is returned whatever the
 *   exit code: proxy exec exits with the command's code, 14 when denied, 15
 *   awaiting approval, 124 on timeout, and the envelope says which;
 * - an error document (an "error" field) is thrown as AvfsError;
 * - anything else with exit code 0 is returned;
 * - no document, or a non-zero exit without an error document, is an
 *   AvfsProcessError: avfs did not keep the contract.
 */
export function runAvfs(bin: string, argv: string[], opts: RunProcessOptions = {}): Promise<unknown> {
  return new Promise((resolve, reject) => {
    const child = execFile(bin, argv, { env: opts.env, maxBuffer: Infinity, encoding: "utf8" }, (err, stdout, stderr) => {
      const code = (err as { code?: unknown } | null)?.code;
      const exitCode = err ? (typeof code === "number" ? code : null) : 0;
      const signal = err?.signal ?? null;
      const info = { exitCode, signal, stdout, stderr };
      const what = `avfs ${argv.join(" ")}`;
      if (typeof code === "string") {
        reject(new AvfsProcessError(`cannot run ${bin}: ${err!.message}`, info));
        return;
      }
      let doc: unknown;
      try {
        doc = JSON.parse(stdout);
      } catch {
        const how = signal ? `was killed by ${signal}` : `exited with ${exitCode}`;
        reject(new AvfsProcessError(`${what} ${how} without printing a JSON document: ${stderr.trim()}`, info));
        return;
      }
      if (isObject(doc) && doc.kind === "proxy_exec_result") resolve(doc);
      else if (isObject(doc) && typeof doc.error === "string") {
        const document = doc as unknown as ErrorDocument;
        reject(new AvfsError(document, exitCode ?? document.exit_code, stderr));
      } else if (exitCode !== 0) {
        reject(new AvfsProcessError(`${what} exited with ${exitCode ?? signal} but printed no error document`, info));
      } else resolve(doc);
    });
    // avfs may exit before reading its input (an error, a denied command); its
    // exit status says what happened, so a broken pipe here is not news.
    child.stdin?.on("error", () => {});
    child.stdin?.end(opts.input);
  });
}

/**
 * Runs `bin argv...` (a `proxy exec --stream` command line) and yields the
 * JSON Lines it prints (docs/schema/proxy-exec-stream.json) as they come:
 * stdout and stderr events while the command runs, then the result event,
 * last. An error event is thrown as AvfsError once the process has ended;
 * a line that is not JSON, or an end without a result, is an
 * AvfsProcessError. Leaving the loop early stops avfs with SIGTERM, which
 * interrupts the run (it is recorded, state interrupted).
 */
export async function* streamAvfs(bin: string, argv: string[], opts: RunProcessOptions = {}): AsyncGenerator<ProxyExecStreamResult, void, undefined> {
  const child = spawn(bin, argv, { env: opts.env, stdio: ["pipe", "pipe", "pipe"] });
  let stderr = "";
  let stdout = "";
  child.stderr.setEncoding("utf8").on("data", (d: string) => (stderr += d));
  const ended = new Promise<{ exitCode: number | null; signal: string | null; startError?: Error }>((resolve) => {
    child.on("error", (e) => resolve({ exitCode: null, signal: null, startError: e }));
    child.on("close", (exitCode, signal) => resolve({ exitCode, signal }));
  });
  child.stdin.on("error", () => {});
  child.stdin.end(opts.input);
  const what = `avfs ${argv.join(" ")}`;
  let error: ErrorDocument | undefined;
  let result = false;
  let done = false;
  try {
    for await (const line of createInterface({ input: child.stdout, crlfDelay: Infinity })) {
      stdout += line + "\n";
      if (line === "") continue;
      let ev: unknown;
      try {
        ev = JSON.parse(line);
      } catch {
        throw new AvfsProcessError(`${what} printed a line that is not JSON: ${line.slice(0, 200)}`, { exitCode: null, signal: null, stdout, stderr });
      }
      if (isObject(ev) && ev.event === "error" && isObject(ev.error)) {
        error = ev.error as unknown as ErrorDocument;
        continue;
      }
      if (isObject(ev) && ev.event === "result") result = true;
      yield ev as unknown as ProxyExecStreamResult;
    }
    done = true;
  } finally {
    if (!done && child.exitCode === null && child.signalCode === null) child.kill("SIGTERM");
  }
  const end = await ended;
  const info = { exitCode: end.exitCode, signal: end.signal, stdout, stderr };
  if (end.startError) throw new AvfsProcessError(`cannot run ${bin}: ${end.startError.message}`, info);
  if (error) throw new AvfsError(error, end.exitCode ?? error.exit_code, stderr);
  if (!result) throw new AvfsProcessError(`${what} ended (${end.exitCode ?? end.signal}) without a result event: ${stderr.trim()}`, info);
}
