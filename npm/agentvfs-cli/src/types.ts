// Short names for parts of the generated types, so callers need not spell
// out ProxyExecResult["result"]["decision"]. Derived, never restated: they
// follow schema.ts (and so docs/schema) by construction.
import type { ErrorDocument, PolicyCheckResult, ProxyExecResult } from "./schema.js";

/** Every error type avfs prints (AvfsError.error), from docs/schema/error.json's enum. */
export type ErrorKind = ErrorDocument["error"];

/** What `proxy exec` was asked to do. */
export type ProxyRequest = ProxyExecResult["request"];
/** What happened in a run: exit code, output, changes, decision, state. */
export type ProxyRunResult = ProxyExecResult["result"];
/** One path a run changed. */
export type ProxyChange = ProxyRunResult["changes"][number];
/** The checkpoint saved just before a run. */
export type ProxyCheckpoint = NonNullable<ProxyRunResult["checkpoint"]>;
/** The approval of a run that needed one. */
export type ProxyApproval = NonNullable<ProxyRunResult["approval"]>;
/** The kernel boundary a run's command ran in (null when it did not run). */
export type ProxyIsolation = NonNullable<ProxyRunResult["isolation"]>;
/** How a run ended: completed, timed_out, interrupted, denied, awaiting_approval or failed. */
export type ProxyState = ProxyRunResult["state"];
/** The policy's decision for a command. */
export type PolicyDecision = PolicyCheckResult["decision"];
/** allow, allow_with_checkpoint, require_approval or deny. */
export type PolicyAction = PolicyDecision["action"];
/** host_escape_risk, networked, mutating, ... */
export type PolicyCategory = PolicyDecision["categories"][number];
