// agentvfs-cli: the avfs binary for Node, and a typed client for it.
export { Avfs, VaultCommands, CheckpointCommands, ProxyCommands, PolicyCommands } from "./client.js";
export type { AvfsOptions, Duration, ExecOptions, RunOptions, VaultOption } from "./client.js";
export * from "./commands.js";
export { commandArgs, duration } from "./args.js";
export type { CallOptions, Flag, Positional } from "./args.js";
export { AvfsError, AvfsProcessError } from "./errors.js";
export { BinaryNotFoundError, PLATFORMS, platformPackage, resolveBinary } from "./resolve.js";
export type { ResolvedBinary, ResolveOptions } from "./resolve.js";
export { runAvfs } from "./run.js";
export * from "./schema.js";
export * from "./types.js";
