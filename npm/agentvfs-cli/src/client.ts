// The typed client: one method per avfs command, each running
// `avfs --json ...` and returning the document typed by docs/schema.
import { commandArgs, duration, type Duration } from "./args.js";
import { Commands } from "./commands.js";
import { resolveBinary } from "./resolve.js";
import { runAvfs, streamAvfs } from "./run.js";
import type * as S from "./schema.js";

export interface AvfsOptions {
  /** the avfs binary; default: $AGENTVFS_BIN, the platform package, then avfs on PATH */
  bin?: string;
  /** the avfs home (passed as --home); default: $AVFS_HOME, else ~/.avfs */
  home?: string;
  /** the vault that vault-scoped calls work on unless they name another (--vault) */
  vault?: string;
  /** extra environment for avfs, over process.env */
  env?: Record<string, string>;
}

/** For calls that work on one vault: which one, over the client's default. */
export interface VaultOption {
  vault?: string;
}

/** A REF naming the state to read instead of the working state. */
export interface AtOption {
  at?: string;
}

export type { Duration };

export interface ExecOptions extends VaultOption {
  /** working directory inside the vault (default "/") */
  cwd?: string;
  /** stop the command after this long (default 5 minutes; 0: no limit) */
  timeout?: Duration;
  /** time between SIGTERM and SIGKILL on timeout (default 2 s) */
  grace?: Duration;
  /** keep the pre-run checkpoint: auto (default), always or never */
  checkpoint?: "auto" | "always" | "never";
  /** set in the command's environment; only the keys are recorded */
  env?: Record<string, string>;
  /** run on a read-only mount: no checkpoint, no changes */
  readonly?: boolean;
  /** run the request approved under this id (the command may then be left empty) */
  approval?: string;
  /** leave the mount this run starts in place; unmount it yourself */
  keepMount?: boolean;
  /** how long a mount this run starts stays, idle, for the next run (default 1 minute; 0: unmount after the run) */
  linger?: Duration;
  /** bytes of stdout and of stderr kept in the envelope (default 1 MiB) */
  maxOutput?: number;
  /** given to the command as its stdin (default: /dev/null) */
  stdin?: string | Uint8Array;
  /** kernel isolation: auto (default: namespaces where the host can), on (else IsolationUnavailable) or off */
  isolate?: "auto" | "on" | "off";
}

export interface RunOptions extends VaultOption {
  /** pass --vault (the call's or the client's default) */
  scoped?: boolean;
  /** written to avfs's stdin */
  input?: string | Uint8Array;
}

const flag = (on: boolean | undefined, name: string) => (on ? [name] : []);
const opt = (value: string | number | undefined, name: string) => (value === undefined ? [] : [name, String(value)]);
const at = (ref: string | undefined) => opt(ref, "--at");

/**
 * A client for one avfs home. Every method runs the avfs binary once with
 * --json (execFile, no shell) and resolves to the typed document, or
 * rejects with AvfsError (an error document) or AvfsProcessError.
 */
export class Avfs {
  readonly home: string | undefined;
  /** the default vault of vault-scoped calls */
  readonly defaultVault: string | undefined;
  readonly vault: VaultCommands;
  readonly checkpoint: CheckpointCommands;
  readonly proxy: ProxyCommands;
  readonly policy: PolicyCommands;
  /**
   * Every avfs command as a typed method, generated from the command
   * manifest (docs/commands.json): `avfs.commands.tree("/", { level: 2 })`.
   */
  readonly commands: Commands;
  private readonly env: Record<string, string> | undefined;
  private bin: string | undefined;

  constructor(options: AvfsOptions = {}) {
    this.bin = options.bin;
    this.home = options.home;
    this.defaultVault = options.vault;
    this.env = options.env;
    this.vault = new VaultCommands(this);
    this.checkpoint = new CheckpointCommands(this);
    this.proxy = new ProxyCommands(this);
    this.policy = new PolicyCommands(this);
    this.commands = new Commands((path, values, flags, o) =>
      this.run(commandArgs(path, values, flags), { vault: o.vault, scoped: o.scoped, input: o.input }));
  }

  /** The binary this client runs, found on first use (see resolveBinary). */
  get binary(): string {
    this.bin ??= resolveBinary({ env: { ...process.env, ...this.env } }).path;
    return this.bin;
  }

  /**
   * Runs `avfs --json [--home H] [--vault V] ARGS...` and returns its
   * document. The methods below use it; call it for a command they lack,
   * e.g. `run<TreeResult>(["tree", "/"], { scoped: true })`.
   */
  async run<T>(args: string[], options: RunOptions = {}): Promise<T> {
    const vault = options.vault ?? this.defaultVault;
    const argv = ["--json", ...opt(this.home, "--home"), ...(options.scoped ? opt(vault, "--vault") : []), ...args];
    const env = this.env ? { ...process.env, ...this.env } : undefined;
    // Inside the async function, a BinaryNotFoundError from this.binary rejects, never throws.
    return (await runAvfs(this.binary, argv, { env, input: options.input })) as T;
  }

  /** As run, for a command that prints JSON Lines (proxy exec --stream): yields each line's document. */
  async *stream<T>(args: string[], options: RunOptions = {}): AsyncGenerator<T, void, undefined> {
    const vault = options.vault ?? this.defaultVault;
    const argv = ["--json", ...opt(this.home, "--home"), ...(options.scoped ? opt(vault, "--vault") : []), ...args];
    const env = this.env ? { ...process.env, ...this.env } : undefined;
    yield* streamAvfs(this.binary, argv, { env, input: options.input }) as AsyncGenerator<T, void, undefined>;
  }

  /** avfs version: the build, formats and backends. */
  version(): Promise<S.VersionResult> {
    return this.run(["version"]);
  }

  /** Writes a file from a string or bytes (through stdin, so any size and any byte). */
  write(path: string, content: string | Uint8Array, o: VaultOption & { append?: boolean } = {}): Promise<S.WriteResult> {
    return this.run(["write", ...flag(o.append, "--append"), "--", path], { ...o, scoped: true, input: content });
  }

  /**
   * cat: the content as text (encoding utf-8) or base64; see readFile for
   * bytes. `at` is a REF: "@", CHECKPOINT, "vault:NAME[@CHECKPOINT]",
   * "run:ID" or "run:ID^after".
   */
  cat(path: string, o: VaultOption & AtOption = {}): Promise<S.CatResult> {
    return this.run(["cat", ...at(o.at), "--", path], { ...o, scoped: true });
  }

  /** The bytes of a file, whatever cat's encoding was. */
  async readFile(path: string, o: VaultOption = {}): Promise<Buffer> {
    const doc = await this.cat(path, o);
    return Buffer.from(doc.content, doc.encoding === "base64" ? "base64" : "utf8");
  }

  ls(path = "/", o: VaultOption & AtOption & { all?: boolean } = {}): Promise<S.LsResult> {
    return this.run(["ls", ...flag(o.all, "--all"), ...at(o.at), "--", path], { ...o, scoped: true });
  }

  stat(path: string, o: VaultOption & AtOption & { dereference?: boolean } = {}): Promise<S.StatResult> {
    return this.run(["stat", ...flag(o.dereference, "--dereference"), ...at(o.at), "--", path], { ...o, scoped: true });
  }

  /** Writes the changes from o.from (default: the recorded origin) to o.to into hostDir. */
  apply(
    hostDir: string,
    o: VaultOption & { from?: string; to?: string; dryRun?: boolean; force?: boolean } = {},
  ): Promise<S.ApplyResult> {
    return this.run([
      "apply", ...opt(o.from, "--from"), ...opt(o.to, "--to"), ...flag(o.dryRun, "--dry-run"),
      ...flag(o.force, "--force"), "--", hostDir,
    ], { ...o, scoped: true });
  }

  /**
   * What changed between two REFs, each change with its git-format patch
   * (null when binary). FROM defaults to the latest checkpoint, TO to the
   * working state.
   */
  diff(from?: string, to?: string, o: VaultOption = {}): Promise<S.ContentDiffResult> {
    const states = [from, to].filter((s): s is string => s !== undefined);
    return this.run(["diff", "--", ...states], { ...o, scoped: true });
  }

  mkdir(path: string, o: VaultOption & { parents?: boolean } = {}): Promise<S.MkdirResult> {
    return this.run(["mkdir", ...flag(o.parents, "--parents"), "--", path], { ...o, scoped: true });
  }

  rm(path: string, o: VaultOption & { recursive?: boolean; force?: boolean } = {}): Promise<S.RmResult> {
    const flags = [...flag(o.recursive, "--recursive"), ...flag(o.force, "--force")];
    return this.run(["rm", ...flags, "--", path], { ...o, scoped: true });
  }

  /** Mounts the vault on an existing directory; always unmount it (in a finally). */
  mount(mountpoint: string, o: VaultOption & { readonly?: boolean } = {}): Promise<S.MountResult> {
    return this.run(["mount", ...flag(o.readonly, "--readonly"), "--", mountpoint], { ...o, scoped: true });
  }

  unmount(mountpoint: string, o: { lazy?: boolean } = {}): Promise<S.UnmountResult> {
    return this.run(["unmount", ...flag(o.lazy, "--lazy"), "--", mountpoint]);
  }

  mounts(o: { prune?: boolean } = {}): Promise<S.MountsResult> {
    return this.run(["mounts", ...flag(o.prune, "--prune")]);
  }
}

export class VaultCommands {
  constructor(private readonly avfs: Avfs) {}

  create(
    name: string,
    o: { backend?: string; use?: boolean; maxSizeMb?: number; maxFiles?: number; maxFileSizeMb?: number } = {},
  ): Promise<S.VaultInfoResult> {
    const flags = [
      ...opt(o.backend, "--backend"),
      ...flag(o.use, "--use"),
      ...opt(o.maxSizeMb, "--max-size-mb"),
      ...opt(o.maxFiles, "--max-files"),
      ...opt(o.maxFileSizeMb, "--max-file-size-mb"),
    ];
    return this.avfs.run(["vault", "create", ...flags, "--", name]);
  }

  list(): Promise<S.VaultListResult> {
    return this.avfs.run(["vault", "list"]);
  }

  /** Describes vault NAME, or the client's default vault, or the current one. */
  info(name?: string): Promise<S.VaultInfoResult> {
    return this.avfs.run(["vault", "info", ...(name === undefined ? [] : ["--", name])], { scoped: true });
  }

  fork(source: string, name: string, o: { use?: boolean } = {}): Promise<S.VaultForkResult> {
    return this.avfs.run(["vault", "fork", ...flag(o.use, "--use"), "--", source, name]);
  }

  /** Three-way merge of source into o.into (default: source's parent). */
  merge(
    source: string,
    o: { into?: string; dryRun?: boolean; onConflict?: "fail" | "ours" | "theirs" | "markers" } = {},
  ): Promise<S.VaultMergeResult> {
    return this.avfs.run([
      "vault", "merge", ...opt(o.into, "--into"), ...flag(o.dryRun, "--dry-run"),
      ...opt(o.onConflict, "--on-conflict"), "--", source,
    ]);
  }

  /**
   * Deletes a vault and its checkpoints. The CLI's --yes is passed: it exists
   * so a script that forgot it cannot delete, and a call to delete() is
   * not forgetting.
   */
  delete(name: string): Promise<S.VaultDeleteResult> {
    return this.avfs.run(["vault", "delete", "--yes", "--", name]);
  }

  /** Makes NAME the home's current vault. */
  use(name: string): Promise<S.VaultInfoResult> {
    return this.avfs.run(["vault", "use", "--", name]);
  }
}

export class CheckpointCommands {
  constructor(private readonly avfs: Avfs) {}

  /** Saves the working state; a name is generated when none is given. */
  save(name?: string, o: VaultOption & { message?: string } = {}): Promise<S.CheckpointSaveResult> {
    const args = [...opt(o.message, "--message"), ...(name === undefined ? [] : ["--", name])];
    return this.avfs.run(["checkpoint", "save", ...args], { ...o, scoped: true });
  }

  /** The checkpoints, oldest first. */
  list(o: VaultOption = {}): Promise<S.CheckpointListResult> {
    return this.avfs.run(["checkpoint", "list"], { ...o, scoped: true });
  }

  info(name: string, o: VaultOption = {}): Promise<S.CheckpointResult> {
    return this.avfs.run(["checkpoint", "info", "--", name], { ...o, scoped: true });
  }

  restore(name: string, o: VaultOption = {}): Promise<S.CheckpointRestoreResult> {
    return this.avfs.run(["checkpoint", "restore", "--", name], { ...o, scoped: true });
  }

  /**
   * The paths that differ between two states: CHECKPOINT, vault:NAME or
   * vault:NAME@CHECKPOINT. FROM defaults to the latest checkpoint, TO to the
   * working state.
   */
  diff(from?: string, to?: string, o: VaultOption = {}): Promise<S.DiffResult> {
    const states = [from, to].filter((s): s is string => s !== undefined);
    return this.avfs.run(["checkpoint", "diff", "--", ...states], { ...o, scoped: true });
  }

  delete(name: string, o: VaultOption = {}): Promise<S.CheckpointDeleteResult> {
    return this.avfs.run(["checkpoint", "delete", "--", name], { ...o, scoped: true });
  }
}

export class ProxyCommands {
  constructor(private readonly avfs: Avfs) {}

  /**
   * Runs ARGV through the proxy. Resolves to the envelope whenever avfs
   * prints one, whatever the exit code: check `result.state` (completed,
   * timed_out, interrupted, denied, awaiting_approval), `result.exit_code` and
   * `success`. Rejects only when no run was recorded (AvfsError: a bad
   * flag, an unknown vault, VaultLocked, an unusable --approval, ...).
   */
  exec(argv: string[], o: ExecOptions = {}): Promise<S.ProxyExecResult> {
    return this.run(argv.length ? ["--", ...argv] : [], o);
  }

  /** Runs a shell script (/bin/sh -c), classified as a whole; as exec. */
  shell(script: string, o: ExecOptions = {}): Promise<S.ProxyExecResult> {
    return this.run(["--shell", script], o);
  }

  /**
   * Runs ARGV through the proxy with --stream: an async iterator of the
   * command's output as it comes ({event: "stdout" | "stderr", data}, or
   * data_base64 for output that is not UTF-8), then {event: "result",
   * envelope}, last. Throws AvfsError when no run was recorded, as exec
   * rejects. Leaving the loop early interrupts the run.
   *
   *     for await (const ev of avfs.proxy.stream(["make"])) {
   *       if (ev.event === "stdout") process.stdout.write(ev.data ?? "");
   *       if (ev.event === "result") console.log(ev.envelope.result.exit_code);
   *     }
   */
  stream(argv: string[], o: ExecOptions = {}): AsyncGenerator<S.ProxyExecStreamResult, void, undefined> {
    return this.streamRun(argv.length ? ["--", ...argv] : [], o);
  }

  /** Runs a shell script through the proxy with --stream; as stream. */
  streamShell(script: string, o: ExecOptions = {}): AsyncGenerator<S.ProxyExecStreamResult, void, undefined> {
    return this.streamRun(["--shell", script], o);
  }

  private async *streamRun(command: string[], o: ExecOptions): AsyncGenerator<S.ProxyExecStreamResult, void, undefined> {
    yield* this.avfs.stream<S.ProxyExecStreamResult>(["proxy", "exec", "--stream", ...this.flags(o), ...command],
      { vault: o.vault, scoped: true, input: o.stdin });
  }

  // async, so a bad option rejects like every other failure instead of throwing.
  private async run(command: string[], o: ExecOptions): Promise<S.ProxyExecResult> {
    return this.avfs.run(["proxy", "exec", ...this.flags(o), ...command], { vault: o.vault, scoped: true, input: o.stdin });
  }

  private flags(o: ExecOptions): string[] {
    return [
      ...opt(o.cwd, "--cwd"),
      ...opt(o.timeout === undefined ? undefined : duration(o.timeout), "--timeout"),
      ...opt(o.grace === undefined ? undefined : duration(o.grace), "--grace"),
      ...opt(o.checkpoint, "--checkpoint"),
      ...Object.entries(o.env ?? {}).flatMap(([k, v]) => ["--env", `${k}=${v}`]),
      ...flag(o.readonly, "--readonly"),
      ...opt(o.approval, "--approval"),
      ...flag(o.keepMount, "--keep-mount"),
      ...opt(o.linger === undefined ? undefined : duration(o.linger), "--linger"),
      ...opt(o.maxOutput, "--max-output"),
      ...opt(o.isolate, "--isolate"),
      ...flag(o.stdin !== undefined, "--stdin"),
    ];
  }

  /** The recorded runs, oldest first (of the vault, when one is given or is the client's default). */
  history(o: VaultOption & { limit?: number } = {}): Promise<S.ProxyHistoryResult> {
    return this.avfs.run(["proxy", "history", ...opt(o.limit, "--limit")], { ...o, scoped: true });
  }

  /** The envelope of a recorded run. */
  show(id: string): Promise<S.ProxyExecResult> {
    return this.avfs.run(["proxy", "show", "--", id]);
  }

  /** Restores the checkpoint before run ID (default: the vault's latest run that kept one). */
  undo(id?: string, o: VaultOption = {}): Promise<S.ProxyUndoResult> {
    return this.avfs.run(["proxy", "undo", ...(id === undefined ? [] : ["--", id])], { ...o, scoped: true });
  }

  approve(id: string): Promise<S.ProxyApprovalResult> {
    return this.avfs.run(["proxy", "approve", "--", id]);
  }

  reject(id: string): Promise<S.ProxyApprovalResult> {
    return this.avfs.run(["proxy", "reject", "--", id]);
  }
}

export class PolicyCommands {
  constructor(private readonly avfs: Avfs) {}

  /** The policy's decision for ARGV; nothing runs. */
  check(argv: string[], o: VaultOption & { cwd?: string } = {}): Promise<S.PolicyCheckResult> {
    return this.avfs.run(["policy", "check", ...opt(o.cwd, "--cwd"), "--", ...argv], { ...o, scoped: true });
  }

  /** The policy's decision for a shell script; nothing runs. */
  checkShell(script: string, o: VaultOption & { cwd?: string } = {}): Promise<S.PolicyCheckResult> {
    return this.avfs.run(["policy", "check", ...opt(o.cwd, "--cwd"), "--shell", script], { ...o, scoped: true });
  }

  /** The effective policy of the vault. */
  show(o: VaultOption = {}): Promise<S.PolicyShowResult> {
    return this.avfs.run(["policy", "show"], { ...o, scoped: true });
  }
}
