// Finding the native avfs binary. The launcher (bin/avfs.js) and the typed
// client share this, so `npx avfs` and `new Avfs()` always run the same
// binary.
import { accessSync, closeSync, constants, openSync, readSync, statSync } from "node:fs";
import { createRequire } from "node:module";
import { delimiter, dirname, join } from "node:path";

/** The platforms a binary package is published for, as `${process.platform}-${process.arch}`. */
export const PLATFORMS = ["linux-x64", "linux-arm64", "darwin-x64", "darwin-arm64"] as const;

/**
 * Marks a file as an agentvfs-cli launcher. A launcher found on PATH (npm
 * puts node_modules/.bin there for scripts) is skipped, or it would start
 * itself forever.
 */
export const LAUNCHER_MARKER = "agentvfs-cli-launcher";

export interface ResolvedBinary {
  /** the binary to run */
  path: string;
  /** where it was found */
  source: "AGENTVFS_BIN" | "package" | "PATH";
}

export interface ResolveOptions {
  /** defaults to process.env */
  env?: NodeJS.ProcessEnv;
  /** defaults to process.platform */
  platform?: string;
  /** defaults to process.arch */
  arch?: string;
}

/** No avfs binary could be found; `tried` says what was looked at, in order. */
export class BinaryNotFoundError extends Error {
  readonly tried: string[];
  constructor(tried: string[], advice: string) {
    super(
      "agentvfs-cli: cannot find the avfs binary. Tried, in order:\n" +
        tried.map((t, i) => `  ${i + 1}. ${t}`).join("\n") +
        `\n${advice}`,
    );
    this.name = "BinaryNotFoundError";
    this.tried = tried;
  }
}

/** The npm package that ships the binary for a platform, e.g. agentvfs-cli-linux-x64. */
export function platformPackage(platform: string = process.platform, arch: string = process.arch): string {
  return `agentvfs-cli-${platform}-${arch}`;
}

function isExecutableFile(path: string): boolean {
  try {
    if (!statSync(path).isFile()) return false;
    accessSync(path, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

function isLauncher(path: string): boolean {
  const buf = Buffer.alloc(4096);
  let fd: number | undefined;
  try {
    fd = openSync(path, "r");
    const n = readSync(fd, buf, 0, buf.length, 0);
    return buf.subarray(0, n).includes(LAUNCHER_MARKER);
  } catch {
    return false;
  } finally {
    if (fd !== undefined) closeSync(fd);
  }
}

/**
 * Finds avfs: $AGENTVFS_BIN, else the binary of the platform package pulled
 * in as an optional dependency, else `avfs` on PATH. An AGENTVFS_BIN that is
 * set but unusable is an error, never skipped: whoever set it meant it.
 * Throws BinaryNotFoundError listing every attempt.
 */
export function resolveBinary(opts: ResolveOptions = {}): ResolvedBinary {
  const env = opts.env ?? process.env;
  const platform = opts.platform ?? process.platform;
  const arch = opts.arch ?? process.arch;
  const tried: string[] = [];

  const explicit = env.AGENTVFS_BIN;
  if (explicit) {
    if (isExecutableFile(explicit)) return { path: explicit, source: "AGENTVFS_BIN" };
    tried.push(`$AGENTVFS_BIN=${explicit}: not an executable file`);
    throw new BinaryNotFoundError(tried, "Fix or unset AGENTVFS_BIN.");
  }
  tried.push("$AGENTVFS_BIN: not set");

  const pkg = platformPackage(platform, arch);
  if (!(PLATFORMS as readonly string[]).includes(`${platform}-${arch}`)) {
    tried.push(`package ${pkg}: none is published for ${platform}-${arch} (there are: ${PLATFORMS.join(", ")})`);
  } else {
    let dir: string | undefined;
    try {
      dir = dirname(createRequire(import.meta.url).resolve(`${pkg}/package.json`));
    } catch {
      tried.push(`package ${pkg}: not installed (an optional dependency of agentvfs-cli)`);
    }
    if (dir) {
      const bin = join(dir, "bin", "avfs");
      if (isExecutableFile(bin)) return { path: bin, source: "package" };
      tried.push(`package ${pkg}: installed in ${dir}, but ${bin} is missing or not executable`);
    }
  }

  const dirs = (env.PATH ?? "").split(delimiter).filter(Boolean);
  const launchers: string[] = [];
  for (const d of dirs) {
    const candidate = join(d, "avfs");
    if (!isExecutableFile(candidate)) continue;
    if (isLauncher(candidate)) {
      launchers.push(candidate);
      continue;
    }
    return { path: candidate, source: "PATH" };
  }
  const skipped = launchers.length ? ` (skipped agentvfs-cli launchers: ${launchers.join(", ")})` : "";
  tried.push(`avfs on $PATH: none in ${dirs.length ? dirs.join(", ") : "(empty PATH)"}${skipped}`);
  throw new BinaryNotFoundError(
    tried,
    `Install agentvfs-cli with its optional dependencies (not --omit=optional or --no-optional), ` +
      `set AGENTVFS_BIN to an avfs binary, or put avfs on PATH.`,
  );
}
