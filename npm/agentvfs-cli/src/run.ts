// Running avfs once and turning what it prints into a value or an error.
import { execFile } from "node:child_process";
import { AvfsError, AvfsProcessError } from "./errors.js";
import type { ErrorDocument } from "./schema.js";

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
