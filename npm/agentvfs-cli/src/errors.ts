import type { ErrorDocument } from "./schema.js";

/**
 * avfs printed an error document (docs/schema/error.json). `error` is the
 * stable type name (VaultNotFound, VaultHasForks, ...; see
 * docs/json-contract.md): branch on it, not on the message.
 */
export class AvfsError extends Error {
  /** the error type, e.g. "VaultNotFound": one of the ErrorKind union */
  readonly error: ErrorDocument["error"];
  /** the process exit code (also document.exit_code) */
  readonly exitCode: number;
  /** what the user can do, when avfs knows */
  readonly hint: string | undefined;
  /** the whole document, with context fields such as forks, path or vault */
  readonly document: ErrorDocument;
  /** what avfs wrote on stderr */
  readonly stderr: string;

  constructor(document: ErrorDocument, exitCode: number, stderr: string) {
    super(document.message);
    this.name = "AvfsError";
    this.error = document.error;
    this.exitCode = exitCode;
    this.hint = document.hint;
    this.document = document;
    this.stderr = stderr;
  }
}

/**
 * avfs could not be run, or broke the JSON contract: it failed to start,
 * was killed by a signal, or printed something that is not one JSON document.
 */
export class AvfsProcessError extends Error {
  /** the exit code, or null when the process did not exit by itself */
  readonly exitCode: number | null;
  /** the signal that ended it, if any */
  readonly signal: string | null;
  readonly stdout: string;
  readonly stderr: string;

  constructor(message: string, info: { exitCode: number | null; signal: string | null; stdout: string; stderr: string }) {
    super(message);
    this.name = "AvfsProcessError";
    this.exitCode = info.exitCode;
    this.signal = info.signal;
    this.stdout = info.stdout;
    this.stderr = info.stderr;
  }
}
